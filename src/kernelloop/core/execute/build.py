"""Build introspection in the worker: what the kernels a candidate's first call compiled are (names, registers,
spills, shared memory, warps, binary hash), read from the Triton JIT functions of its module; and what a failure
of that first call was (a compile error or a runtime error)."""

from __future__ import annotations

from ...base.records import BuildArtifact


def build_info(module, compile_s: float, device) -> BuildArtifact:
    """Registers, spills and shared memory of every kernel the module's JIT functions compiled (max over kernels).
    `compile_s`: the first call's seconds; in the interpreter nothing is compiled (compile_s 0, the call's time is
    `first_call_s`)."""
    import hashlib

    import triton
    from triton.runtime.jit import JITFunction
    info = {"kernel_names": [], "registers": None, "spills": None, "shared_bytes": None, "warps": None,
            "compile_s": compile_s, "toolchain": f"triton {triton.__version__}", "binary_hash": None}
    info["first_call_s"] = compile_s
    if not device.is_cuda:   # a records.Device
        info.update(toolchain=info["toolchain"] + " / interpreter", compiled_by="interpreter", compile_s=0.0)
        info["kernel_names"] = [n for n, v in vars(module).items() if isinstance(v, JITFunction)]
        return BuildArtifact(**info)
    import torch
    cap = torch.cuda.get_device_capability()
    info["toolchain"] += f" / sm_{cap[0]}{cap[1]}"
    digest = hashlib.sha256()
    for name, fn in vars(module).items():
        if not isinstance(fn, JITFunction):
            continue
        for entry in getattr(fn, "device_caches", {}).values():
            cache = next((c for c in entry if isinstance(c, dict)), {})
            for kernel in cache.values():
                info["kernel_names"].append(kernel.metadata.name if hasattr(kernel.metadata, "name") else name)
                regs, spills = getattr(kernel, "n_regs", None), getattr(kernel, "n_spills", None)
                shared = getattr(kernel.metadata, "shared", None)
                warps = getattr(kernel.metadata, "num_warps", None)   # after warp specialization, all of them
                if warps is not None:
                    info["warps"] = max(info["warps"] or 0, int(warps))
                if regs is not None:
                    info["registers"] = max(info["registers"] or 0, int(regs))
                if spills is not None:
                    info["spills"] = max(info["spills"] or 0, int(spills))
                if shared is not None:
                    info["shared_bytes"] = max(info["shared_bytes"] or 0, int(shared))
                cubin = kernel.asm.get("cubin") if hasattr(kernel, "asm") else None
                if cubin:
                    digest.update(cubin if isinstance(cubin, bytes) else str(cubin).encode())
    info["binary_hash"] = digest.hexdigest() if info["kernel_names"] else None
    return BuildArtifact(**info)


def cubin_hashes(module) -> list[str]:
    """sha256 of each compiled kernel's cubin (what the build stage's kernels are compared with)."""
    import hashlib

    from triton.runtime.jit import JITFunction
    out = []
    for fn in vars(module).values():
        if not isinstance(fn, JITFunction):
            continue
        for entry in getattr(fn, "device_caches", {}).values():
            cache = next((c for c in entry if isinstance(c, dict)), {})
            for kernel in cache.values():
                cubin = kernel.asm.get("cubin") if hasattr(kernel, "asm") else None
                if cubin:
                    out.append(hashlib.sha256(bytes(cubin) if not isinstance(cubin, str) else cubin.encode())
                               .hexdigest())
    return sorted(set(out))


def forget_compiled(module) -> None:
    """Drop the in-memory kernel caches of the module's JIT functions.

    Template candidates share one module (same source, different configs); without this, the build record of a
    trial would mix in the kernels of earlier trials. Recompiling after the drop usually hits Triton's on-disk
    cache, so the recorded compile time is the time of this trial's first call, not necessarily a cold compile.
    """
    from triton.runtime.jit import JITFunction
    for fn in vars(module).values():
        caches = getattr(fn, "device_caches", None) if isinstance(fn, JITFunction) else None
        if caches is not None:
            caches.clear()


def is_compile_error(exc: BaseException) -> bool:
    """Whether a first call's exception is Triton failing to compile (not running out of resources at launch)."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "TritonError"}) and \
        "OutOfResources" not in names
