"""The ahead-of-time build process of `build.aot`: `python -m kernelloop.core.build.aot_child JOB RESULT`.

Reads the job file (spec, workload, target arch and SM count, template files, the configurations to build) and
appends one JSON line per event to the result file (flushed): `{"start": i}` when configuration i starts and
`{"done": i, "status", "kernels", "error", "seconds"}` when it ends, so the parent knows which configuration a
hung or killed process was building.

Order matters: the read-only view (`core/sandbox/confine.py`) is set up before anything else, since it needs a process
of one thread (so nothing here imports torch before it: `python -m` imports only `kernelloop` and `kernelloop.core.build`
first, neither of which imports torch); the audit-hook sandbox (`core/sandbox/policy.py`) is armed after the build's own
imports and before any template is imported.
"""

# the read-only view (core/sandbox/confine.py) before anything else: it needs a process of one thread
from kernelloop.core.sandbox.confine import confine_from_env


def _setup(arch: int, sm_count: int, ptx_overrides: dict | None = None):
    """Imports, the stand-in driver (unless this host's GPU is the target and visible) and the compile-only launch
    (with `ptx_overrides`, edited PTX substituted through Triton's IR override: kernelloop.core.build.ptx_override); returns
    (prepare, build_item): `prepare(spec, workload)` makes the workload's tensors (kept for the next builds
    of that workload), `build_item(module, spec, workload, config, keep_asm)` builds one configuration and returns
    its event (status, kernels, error, seconds)."""
    import hashlib, json, time  # noqa: F401, E401 - imported before the sandbox is armed (`_kernel_row` uses them)
    on_device = _stand_in_device(arch, sm_count)
    from kernelloop.core.build.cubin import resource_usage
    from kernelloop.core.reference.inputs import alloc_outputs, alloc_scratch, make_inputs
    built = []
    overrides = _compile_only_launch(built, ptx_overrides)
    tensors = {}

    def prepare(spec, w) -> None:
        if w.id not in tensors:   # the same tensors for every configuration of a workload
            tensors.clear()
            tensors[w.id] = ([t.as_subclass(on_device) for t in make_inputs(spec, w, 0, "cpu")],
                             [t.as_subclass(on_device) for t in alloc_outputs(spec, w, "cpu")],
                             {k: t.as_subclass(on_device) for k, t in alloc_scratch(spec, w, "cpu").items()})

    def build_item(module, spec, w, config: dict, keep_asm: bool) -> dict:
        prepare(spec, w)
        inputs, outputs, scratch = tensors[w.id]
        built.clear()
        hits_before = dict(overrides.hits) if overrides is not None else {}
        t0 = time.perf_counter()
        out = {"status": "built", "kernels": [], "error": ""}
        try:
            module.launch(*inputs, *outputs, **scratch, **spec.scalars, **config)
        except Exception as e:  # noqa: BLE001
            out["status"] = "compile_error" if getattr(e, "kernelloop_in_triton", False) else "launch_error"
            out["error"] = f"{type(e).__name__}: {e}"[:1500]
        for k, grid, scalars in built:
            row = _kernel_row(k, grid, scalars, keep_asm, resource_usage)
            if overrides is not None:
                row["ptx_override"] = overrides.hits[row["name"]] > hits_before.get(row["name"], 0)
            out["kernels"].append(row)
        out["seconds"] = time.perf_counter() - t0
        return out
    return prepare, build_item


def _stand_in_device(arch: int, sm_count: int):
    """Make Triton and torch see an sm_<arch> GPU with `sm_count` SMs (Triton's own driver when this host's GPU is the
    target); returns the tensor subclass whose CPU tensors pass for CUDA ones."""
    import types
    import torch, triton  # noqa: F401, E401 - triton before its submodules, as a run imports it
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    class _Target:
        """Stands in for the CUDA driver: reports the target; nothing is ever launched."""
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
        def get_current_target(self): return GPUTarget("cuda", arch, 32)
        def get_active_torch_device(self): return torch.device("cpu")
    # on a host whose GPU is the target, Triton's own driver reports it (and nothing is launched either way)
    _cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    if _cap is None or _cap[0] * 10 + _cap[1] != arch:
        driver.set_active(_Target())
    class _OnDevice(torch.Tensor):
        @property
        def is_cuda(self): return True
    props = types.SimpleNamespace(multi_processor_count=int(sm_count), major=arch // 10, minor=arch % 10)
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_capability = lambda *a, **k: (arch // 10, arch % 10)
    torch.cuda.current_device = lambda: 0
    return _OnDevice


def _compile_only_launch(built: list, ptx_overrides: dict | None):
    """Replace Triton's launch by a compile: each launch appends (kernel, grid, scalar arguments) to `built`. With
    `ptx_overrides`, the edited PTX is substituted (returns the PtxOverrides; else None)."""
    from triton.runtime.jit import JITFunction
    _run = JITFunction.run
    def _compile_only(self, *args, grid, warmup, **kw):
        try:
            kernel = _run(self, *args, grid=grid, warmup=True, **kw)
        except Exception as e:
            e.kernelloop_in_triton = True  # raised by Triton's binding or compiling, not by the template's Python
            raise
        # the launch the template asked for: a grid given as numbers (a callable one is not evaluated here) and the
        # non-constexpr scalar arguments, positional or by keyword (tensors are the same for every configuration)
        g = None if callable(grid) else [int(v) for v in (grid if isinstance(grid, (tuple, list)) else (grid,))]
        consts = {p.name for p in self.params if p.is_constexpr}
        scalars = [a for a in args if isinstance(a, (int, float, bool))]
        scalars += [[k, v] for k, v in sorted(kw.items()) if k not in consts and isinstance(v, (int, float, bool))
                    and k in {p.name for p in self.params}]
        built.append((kernel, g, scalars))
        return kernel
    JITFunction.run = _compile_only
    if not ptx_overrides:
        return None
    from kernelloop.core.build.ptx_override import PtxOverrides
    overrides = PtxOverrides(ptx_overrides)

    def _with_overrides(self, *args, grid, warmup, **kw):   # the override wraps the compile
        return _compile_only(self, *args, grid=grid, warmup=warmup, **overrides.kwargs(self, _run, args, grid, kw))
    JITFunction.run = _with_overrides
    return overrides


def _kernel_row(k, grid, scalars: list, keep_asm: bool, resource_usage) -> dict:
    """One compiled kernel's event row: name, shared memory, warps, launch, cubin hash and resource usage (and with
    `keep_asm` its PTX, cubin and metadata)."""
    import hashlib, json  # noqa: E401 - already imported by `_setup`, before the sandbox
    meta = k.metadata
    cubin = k.asm.get("cubin") or b""
    row = {"name": getattr(meta, "name", ""), "shared": getattr(meta, "shared", None),
           "num_warps": getattr(meta, "num_warps", None), "grid": grid, "scalars": scalars,
           "cubin_sha256": hashlib.sha256(bytes(cubin)).hexdigest()}
    try:
        usage = resource_usage(k.asm["cubin"])
        row.update(usage.get(row["name"]) or next(iter(usage.values()), {}))
    except Exception as e:  # noqa: BLE001 - the build itself stands; its register count is unknown
        row["usage_error"] = str(e)[:300]
    if keep_asm:  # the compiled kernel's own text: PTX, cubin (base64), Triton's metadata
        import base64
        row["asm"] = {"ptx": k.asm.get("ptx", ""), "cubin_b64": base64.b64encode(bytes(cubin)).decode(),
                      "metadata": json.loads(json.dumps(meta._asdict(), default=str))}
    return row


def _import_template(path: str, name: str):
    import importlib.util
    s = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def _arm_sandbox(folder: str, denial_file: str):
    """Least privilege before any template is imported (core/sandbox/policy.py): Triton's compile, ptxas and cuobjdump
    keep working; a template's Python that reaches for anything else fails its configuration, naming the action."""
    import os
    if os.environ.get("KERNELLOOP_SANDBOX", "on") == "off":
        return None
    from kernelloop.core.sandbox.policy import default_policy, install
    return install(default_policy([folder], denial_file))


def main() -> None:
    view = confine_from_env()  # noqa: F841 - what was done ('' when nothing was asked for)
    import json, os, sys
    if sys.argv[1] == "--serve":
        return serve(sys.argv[2])
    job = json.load(open(sys.argv[1]))
    res = open(sys.argv[2], "a", buffering=1)
    prepare, build_item = _setup(int(job["arch"]), int(job["sm_count"]), job.get("ptx_overrides"))
    from kernelloop.base.records import OpSpec, Workload
    spec = OpSpec.model_validate_json(job["spec"])
    w = Workload.model_validate_json(job["workload"])
    prepare(spec, w)
    modules = {}
    box = _arm_sandbox(os.path.dirname(os.path.abspath(sys.argv[1])), sys.argv[1] + ".denied")
    if box is not None:
        for _f in job["files"].values():
            box.grant_read(_f)
        for _by_sha in (job.get("ptx_overrides") or {}).values():
            for _f in _by_sha.values():
                box.grant_read(_f)
    for i, item in enumerate(job["items"]):
        res.write(json.dumps({"start": i}) + "\n")
        name = item["template"]
        if name not in modules:
            modules[name] = _import_template(job["files"][name], f"aot_{name}")
        out = {"done": i, **build_item(modules[name], spec, w, item["config"], bool(job.get("keep_asm")))}
        res.write(json.dumps(out) + "\n")


def serve(folder: str) -> None:
    """The build server of the build stage (kernelloop.core.build.server): one process that builds many candidates.
    Reads requests from standard input, one JSON line each: {"arch", "sm_count", "spec", "source_file", "config",
    "workloads": [Workload JSON], "result"}; appends to the request's result file {"start": i} and
    {"done": i, ...event} per workload, then {"finished": true}. Sources are imported once per file."""
    import json, sys, time
    first = json.loads(sys.stdin.readline())
    _, build_item = _setup(int(first["arch"]), int(first["sm_count"]))
    from kernelloop.base.records import OpSpec, Workload
    box = _arm_sandbox(folder, folder.rstrip("/") + "/build.denied")
    modules, specs = {}, {}
    request = first
    while request:
        with open(request["result"], "a", buffering=1) as res:
            spec = specs.get(request["spec"]) or specs.setdefault(request["spec"],
                                                                  OpSpec.model_validate_json(request["spec"]))
            path = request["source_file"]
            t0 = time.perf_counter()
            try:
                if path not in modules:
                    if box is not None:
                        box.grant_read(path)
                    modules[path] = _import_template(path, f"build_{len(modules)}")
            except BaseException as e:  # noqa: BLE001 - a source that does not import is its build's outcome
                res.write(json.dumps({"import_error": f"{type(e).__name__}: {e}"[:1500],
                                      "seconds": time.perf_counter() - t0}) + "\n")
            else:
                for i, text in enumerate(request["workloads"]):
                    res.write(json.dumps({"start": i}) + "\n")
                    ev = build_item(modules[path], spec, Workload.model_validate_json(text), request["config"], False)
                    res.write(json.dumps({"done": i, **ev}) + "\n")
            res.write(json.dumps({"finished": True}) + "\n")
        print("ok", flush=True)
        line = sys.stdin.readline()
        request = json.loads(line) if line.strip() else None


if __name__ == "__main__":
    main()
