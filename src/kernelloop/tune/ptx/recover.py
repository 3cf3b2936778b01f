"""Recovering a compiled Triton kernel's PTX and what it declares, from any of four inputs:

- a kernelloop candidate (its JSON: template source + config): built for sm_90 on this machine exactly as
  `kernelloop.core.build.aot.build_configs` builds a configuration (no GPU needed), keeping each kernel's `asm`;
- a Triton cache entry folder (`<name>.ptx`, `<name>.cubin`, `<name>.json` metadata);
- a `.ptx` file;
- a `.cubin` file: its PTX only where the binary embeds one (`cuobjdump -ptx`); a cubin of SASS alone is
  reported not recoverable, with the reason, and its registers and shared memory still read.
"""

from __future__ import annotations

import base64
import json
import re
import tempfile
from pathlib import Path

from ...core.build.cubin import parse_resource_usage
from ...base.records import Candidate, Workload
from . import parse
from .records import KernelReport, Origin, RecoveredKernel, Recovery
from .roundtrip import round_trip
from .tools import run_tool, toolchain_missing


def _registers(cubin: bytes, name: str) -> int | None:
    try:
        usage = parse_resource_usage(run_tool("cuobjdump", ["--dump-resource-usage"], cubin))
    except (FileNotFoundError, RuntimeError):
        return None
    row = usage.get(name) or next(iter(usage.values()), {})
    return row.get("REG")


CUBIN_MAGIC = (b"\x7fELF", b"\x50\xed\x55\xba")   # an ELF cubin, a fatbinary


def from_ptx(ptx: str, *, origin: Origin, path: str = "", metadata: dict | None = None,
             cubin: bytes | None = None) -> RecoveredKernel:
    """The kernel a PTX text declares (its first `.entry`), with Triton's metadata and the cubin when known."""
    meta = dict(metadata or {})
    found = parse.entries(ptx)
    if not found:
        return RecoveredKernel(origin=origin, path=path, recoverable=False, reason="the PTX declares no .entry",
                               metadata=meta)
    entry = next((e for e in found if e.name == meta.get("name")), found[0])
    head = parse.header(ptx)
    threads = None
    if "reqntid" in entry.directives:
        threads = 1
        for v in entry.directives["reqntid"]:
            threads *= v
    warps = meta.get("num_warps") or (threads // 32 if threads else None)
    return RecoveredKernel(
        origin=origin, path=path, recoverable=True, name=entry.name, target=head.get("target", ""),
        ptx_version=head.get("version", ""), num_warps=warps, threads=threads or (warps * 32 if warps else None),
        shared_bytes=meta.get("shared"), registers=_registers(cubin, entry.name) if cubin else None, entry=entry,
        ptx=ptx, cubin_b64=base64.b64encode(cubin).decode() if cubin else "", metadata=meta)


def from_cubin(cubin: bytes, path: str = "") -> RecoveredKernel:
    """The PTX a cubin (or fatbinary) embeds; not recoverable when it holds SASS only."""
    text = run_tool("cuobjdump", ["-ptx"], cubin)
    start = text.find(".version")
    if start >= 0 and ".entry" in text:
        return from_ptx(text[start:], origin="cubin", path=path, cubin=cubin)
    usage = parse_resource_usage(run_tool("cuobjdump", ["--dump-resource-usage"], cubin))
    name, row = next(iter(usage.items()), ("", {}))
    return RecoveredKernel(origin="cubin", path=path, recoverable=False, name=name, registers=row.get("REG"),
                           shared_bytes=row.get("SHARED"), cubin_b64=base64.b64encode(cubin).decode(),
                           reason="the cubin embeds no PTX (cuobjdump -ptx finds none): it holds SASS only, and "
                                  "SASS is not re-assembled")


def from_cache_dir(folder: Path) -> list[RecoveredKernel]:
    """Each kernel of a Triton cache entry folder (a `<name>.json` metadata file with its .ptx and .cubin)."""
    out = []
    for meta_file in sorted(folder.glob("*.json")):
        if meta_file.name.startswith("__grp__"):
            continue
        meta = json.loads(meta_file.read_text())
        stem = meta_file.with_suffix("")
        ptx, cubin = stem.with_suffix(".ptx"), stem.with_suffix(".cubin")
        blob = cubin.read_bytes() if cubin.is_file() else None
        if ptx.is_file():
            out.append(from_ptx(ptx.read_text(), origin="cache", path=str(ptx), metadata=meta, cubin=blob))
        elif blob is not None:
            k = from_cubin(blob, str(cubin))
            out.append(k.model_copy(update={"origin": "cache", "metadata": meta,
                                            "shared_bytes": meta.get("shared", k.shared_bytes)}))
    return out


def parse_axes(text: str) -> dict[str, int]:
    """'M=4096,N=4096' -> {'M': 4096, 'N': 4096}; ValueError naming the part that is not NAME=INT."""
    out = {}
    for part in filter(None, re.split(r"[,\s]+", text)):
        k, _, v = part.partition("=")
        if not k.strip() or not v.strip().lstrip("-").isdigit():
            raise ValueError(f"workload {text!r}: {part!r} is not NAME=INTEGER (e.g. 'M=4096,N=4096')")
        out[k.strip()] = int(v)
    return out


def parse_workload(text: str, op: str, dtype: str) -> Workload:
    """The workload of built-in or local op `op` that `text` ('M=4096,N=4096,K=512') names: ValueError (a SpecError
    for an op that cannot be loaded) naming an axis of the op it lacks, one the op does not have, a value outside
    its axis's bounds or a dtype the op does not take (`spec.loader.workload_misfit`)."""
    from ...base.builtin import resolve_op
    from ...core.spec import load_op
    from ...core.spec.loader import workload_misfit
    spec = load_op(resolve_op(op)).spec
    w = Workload(op=op, axes=parse_axes(text), dtype=dtype)
    misfit = workload_misfit(w, spec)
    if misfit is not None:
        raise ValueError(f"workload {text!r} for {op}: {misfit[0]}: {misfit[1]}")
    return w


def from_candidate(candidate: Candidate, workload: Workload | None = None, arch: int = 90,
                   op_dir: Path | None = None) -> tuple[list[RecoveredKernel], str]:
    """Build the candidate for sm_`arch` on this machine (kernelloop.core.build.aot) and recover every kernel its
    launch compiles; with the build's error when it did not build. The workload defaults to the op's first."""
    from ...base.builtin import resolve_op
    from ...core.spec import load_op
    from ...core.build.aot import BUILT, build_configs
    from ...core.spec.loader import load_workloads
    bundle = load_op(op_dir or resolve_op(candidate.op))
    if workload is None:
        workload = load_workloads(bundle.folder / "workloads.toml", bundle.spec)[0]
    with tempfile.TemporaryDirectory(prefix="kernelloop-ptx-candidate-") as d:
        src = Path(d) / f"{candidate.template}.py"
        src.write_text(candidate.source)
        (outcome,) = build_configs(bundle.spec, {candidate.template: src}, workload,
                                   [{"template": candidate.template, **candidate.config}], arch=arch, jobs=1,
                                   keep_asm=True)
    if outcome.status != BUILT:
        return [], f"{outcome.status}: {outcome.error}"
    kernels = []
    for k in outcome.kernels:
        asm = k.get("asm") or {}
        cubin = base64.b64decode(asm.get("cubin_b64", "")) or None
        if asm.get("ptx"):
            kernels.append(from_ptx(asm["ptx"], origin="candidate", path=candidate.label, metadata=asm["metadata"],
                                    cubin=cubin))
        elif cubin:
            kernels.append(from_cubin(cubin, candidate.label).model_copy(update={"origin": "candidate"}))
    return kernels, ""


def recover(path: Path, *, workload: Workload | None = None, arch: int = 90, check: bool = True) -> Recovery:
    """Recover every kernel `path` holds (candidate JSON, cache folder, .ptx, .cubin) and, with `check`, round-trip
    each recovered PTX through Triton's ptxas. ValueError when a .ptx is not PTX or a .cubin not a cubin."""
    path = Path(path)
    reason = ""
    if path.is_dir():
        origin: Origin = "cache"
        kernels = from_cache_dir(path)
        reason = "" if kernels else "no Triton metadata (<name>.json) with a .ptx or .cubin in the folder"
    elif path.suffix == ".ptx":
        text = path.read_bytes().decode("utf-8", errors="replace")
        if ".version" not in text and ".entry" not in text:
            raise ValueError(f"{path}: not PTX (expected the text of a PTX module: .version, .target, an .entry)")
        origin, kernels = "ptx", [from_ptx(text, origin="ptx", path=str(path))]
    elif path.suffix in (".cubin", ".fatbin", ".o"):
        data = path.read_bytes()
        if not data.startswith(CUBIN_MAGIC):
            raise ValueError(f"{path}: not a cubin (expected an ELF cubin or a CUDA fatbinary)")
        origin, kernels = "cubin", [from_cubin(data, str(path))]
    else:
        origin = "candidate"
        kernels, reason = from_candidate(Candidate.from_json(path.read_text()), workload, arch)
        reason = reason or ("" if kernels else "the candidate's launch compiled no kernel")
    ok = bool(kernels) and all(k.recoverable for k in kernels)
    if not ok and not reason:
        reason = "; ".join(k.reason for k in kernels if not k.recoverable)
    missing = toolchain_missing() if check else None
    reports = [KernelReport(kernel=k, round_trip=round_trip(k, arch) if (k.recoverable and check and not missing)
                            else None) for k in kernels]
    return Recovery(source=str(path), origin=origin, recoverable=ok, reason=reason, kernels=reports)
