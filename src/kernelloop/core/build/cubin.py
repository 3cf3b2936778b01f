"""Reading a cubin on a machine without its GPU: `cuobjdump` (the copy in Triton's wheel when the CUDA toolkit is
not installed) for the SASS text and the per-function resource usage (registers, stack, shared and local memory).

The ahead-of-time build (core/build/aot_child.py) reads each kernel's resource usage with it; `kernelloop.tune.profile.sass`
parses the SASS it disassembles.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_RESOURCE = re.compile(r"^\s*Function\s+(\S+?)\s*:\s*(.*)$")
_RESOURCE_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump --dump-resource-usage` -> {function: {'REG': 64, 'STACK': 0, 'SHARED': 1024, 'LOCAL': 0, ...}}.

    The fields follow the ` Function NAME:` line, on the same line or the next one.
    """
    out: dict[str, dict[str, int]] = {}
    pending: str | None = None
    for line in text.splitlines():
        m = _RESOURCE.match(line)
        if m:
            pending = m.group(1)
            out[pending] = {k: int(v) for k, v in _RESOURCE_FIELD.findall(m.group(2))}
            if out[pending]:
                pending = None
            continue
        if pending is not None:
            out[pending] = {k: int(v) for k, v in _RESOURCE_FIELD.findall(line)}
            pending = None
    return out


def find_tool(name: str) -> Path | None:
    """A CUDA binary tool (cuobjdump, nvdisasm): $PATH, $CUDA_HOME/bin, then the copy inside Triton's wheel."""
    hit = shutil.which(name)
    if hit:
        return Path(hit)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        base = os.environ.get(var)
        if base and (Path(base) / "bin" / name).is_file():
            return Path(base) / "bin" / name
    try:
        import triton
        p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if p.is_file():
            return p
    except ImportError:
        pass
    return None


def _cuobjdump(cubin: bytes, flag: str, timeout_s: float) -> str:
    tool = find_tool("cuobjdump")
    if tool is None:
        raise FileNotFoundError("cuobjdump not found (PATH, CUDA_HOME/bin, triton/backends/nvidia/bin)")
    with tempfile.TemporaryDirectory(prefix="kernelloop-sass-") as d:
        path = Path(d) / "kernel.cubin"
        path.write_bytes(cubin)
        res = subprocess.run([str(tool), flag, str(path)], capture_output=True, text=True, timeout=timeout_s)
    if res.returncode != 0:
        raise RuntimeError(f"cuobjdump {flag} failed ({res.returncode}): {res.stderr.strip()[-1000:]}")
    return res.stdout


def disassemble(cubin: bytes, timeout_s: float = 60.0) -> str:
    """SASS text of a cubin (`cuobjdump --dump-sass`)."""
    return _cuobjdump(cubin, "--dump-sass", timeout_s)


def resource_usage(cubin: bytes, timeout_s: float = 60.0) -> dict[str, dict[str, int]]:
    """Per-function resource usage of a cubin (`cuobjdump --dump-resource-usage`)."""
    return parse_resource_usage(_cuobjdump(cubin, "--dump-resource-usage", timeout_s))


__all__ = ["disassemble", "find_tool", "parse_resource_usage", "resource_usage"]
