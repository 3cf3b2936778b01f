"""The NVIDIA tools Triton ships and the way Triton calls ptxas.

ptxas is found as Triton finds it (`triton.backends.nvidia.compiler.get_ptxas(arch)`: on 3.9 the `ptxas-blackwell`
binary for sm_90 and newer, on older Triton `knobs.nvidia.ptxas`); its flags are those of Triton's
`CUDABackend.make_cubin`: `-lineinfo` (or `-lineinfo -suppress-debug-info` when line info is off), `--fmad=false`
when fp fusion is off, `-v`, `--regAllocOptLevel=2` where this Triton passes it, the kernel's `ptx_options`, and
`--gpu-name=sm_90a`. cuobjdump and nvdisasm come from `kernelloop.core.build.cubin.find_tool`.
"""

from __future__ import annotations

import functools
import inspect
import re
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...core.build.cubin import find_tool

_USED_REGS = re.compile(r"Used (\d+) registers")


@functools.lru_cache(maxsize=None)
def ptxas_path(arch: int = 90) -> Path | None:
    """The ptxas Triton itself would run for sm_`arch` (None: neither Triton nor $PATH has one)."""
    try:
        from triton.backends.nvidia import compiler
        if hasattr(compiler, "get_ptxas"):
            return Path(compiler.get_ptxas(arch).path)
        from triton import knobs
        return Path(knobs.nvidia.ptxas.path)
    except Exception:  # noqa: BLE001 - no Triton, or no NVIDIA backend: the PATH's ptxas if any
        return find_tool("ptxas")


def gpu_name(arch: int) -> str:
    """Triton's name for the target: sm_90a for Hopper and newer (`sm_arch_from_capability`)."""
    try:
        from triton.backends.nvidia.compiler import sm_arch_from_capability
        return sm_arch_from_capability(arch)
    except Exception:  # noqa: BLE001
        return f"sm_{arch}{'a' if arch >= 90 else ''}"


@functools.lru_cache(maxsize=None)
def _triton_passes(flag: str) -> bool:
    try:
        from triton.backends.nvidia.compiler import CUDABackend
        return flag in inspect.getsource(CUDABackend.make_cubin)
    except Exception:  # noqa: BLE001
        return False


def ptxas_flags(arch: int = 90, metadata: dict | None = None) -> list[str]:
    """The flags Triton's make_cubin passes for this kernel (its metadata: enable_fp_fusion, ptx_options)."""
    meta = metadata or {}
    try:
        from triton import knobs
        no_lines = bool(knobs.compilation.disable_line_info)
    except Exception:  # noqa: BLE001
        no_lines = False
    flags = ["-lineinfo", "-suppress-debug-info"] if no_lines else ["-lineinfo"]
    if meta.get("enable_fp_fusion", True) is False:
        flags.append("--fmad=false")
    flags.append("-v")
    if _triton_passes("--regAllocOptLevel=2"):
        flags.append("--regAllocOptLevel=2")
    flags += (meta.get("ptx_options") or "").split()
    return flags + [f"--gpu-name={gpu_name(arch)}"]


@dataclass
class Assembly:
    """What ptxas made of a PTX: the cubin, or its stderr verbatim."""

    ok: bool
    cubin: bytes = b""
    log: str = ""
    error: str = ""
    command: list[str] = field(default_factory=list)

    @property
    def registers(self) -> int | None:
        """Registers per thread from ptxas -v ("Used N registers"; the largest when several functions)."""
        found = [int(n) for n in _USED_REGS.findall(self.log)]
        return max(found) if found else None


def assemble(ptx: str, arch: int = 90, metadata: dict | None = None, timeout_s: float = 120.0) -> Assembly:
    """Assemble `ptx` for sm_`arch` with Triton's ptxas and flags."""
    tool = ptxas_path(arch)
    if tool is None or not tool.is_file():
        raise FileNotFoundError("no ptxas (Triton's wheel ships one under triton/backends/nvidia/bin)")
    done = _assembled(str(tool), tuple(ptxas_flags(arch, metadata)), ptx, timeout_s)
    return replace(done, command=list(done.command))


@functools.lru_cache(maxsize=128)
def _assembled(tool: str, flags: tuple[str, ...], ptx: str, timeout_s: float) -> Assembly:
    """One ptxas run per distinct PTX and flags in a process (its output depends on nothing else): a PTX's round
    trip, its static checks and its SASS comparison each assemble it."""
    with tempfile.TemporaryDirectory(prefix="kernelloop-ptxas-") as d:
        src, out = Path(d) / "kernel.ptx", Path(d) / "kernel.cubin"
        src.write_text(ptx)
        res = subprocess.run([tool, *flags, str(src), "-o", str(out)], capture_output=True, text=True,
                             timeout=timeout_s)
        command = [Path(tool).name, *flags, "kernel.ptx", "-o", "kernel.cubin"]
        if res.returncode != 0 or not out.is_file():
            return Assembly(ok=False, log=res.stderr, error=res.stderr.replace(str(src), "kernel.ptx").strip()
                            or f"ptxas exited with code {res.returncode}", command=command)
        return Assembly(ok=True, cubin=out.read_bytes(), log=res.stdout + res.stderr, command=command)


def run_tool(name: str, args: list[str], cubin: bytes, timeout_s: float = 60.0) -> str:
    """stdout of cuobjdump/nvdisasm `args` on `cubin` (written to a temporary file)."""
    tool = find_tool(name)
    if tool is None:
        raise FileNotFoundError(f"{name} not found (PATH, CUDA_HOME/bin, triton/backends/nvidia/bin)")
    with tempfile.TemporaryDirectory(prefix="kernelloop-ptx-") as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        res = subprocess.run([str(tool), *args, str(path)], capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()[-1000:]}")
    return res.stdout


def toolchain_missing() -> str | None:
    """Why the round trip cannot run here (None: ptxas and cuobjdump are there)."""
    p = ptxas_path()
    if p is None or not p.is_file():
        return "no ptxas (Triton's wheel ships one under triton/backends/nvidia/bin)"
    if find_tool("cuobjdump") is None:
        return "no cuobjdump (Triton's wheel ships one)"
    return None
