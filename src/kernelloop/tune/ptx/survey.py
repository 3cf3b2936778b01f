"""The round trip over the built-in ops: each template of each op at one valid configuration (the first its
space keeps for the op's first workload on an H200-like sm_90), built ahead of time on this machine, every kernel
its launch compiles recovered and round-tripped."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ...core.device import VIRTUAL_HOPPER
from .records import KernelReport
from .recover import from_ptx
from .roundtrip import round_trip


@dataclass
class SurveyRow:
    op: str
    template: str
    config: dict
    status: str
    error: str = ""
    kernels: list[KernelReport] = field(default_factory=list)
    seconds: float = 0.0


def _one_op(name: str, arch: int) -> list[SurveyRow]:
    import base64

    from ...base.builtin import ops_dir
    from ...core.spec import load_op
    from ...core.build.aot import BUILT, build_configs
    from ...core.spec.loader import load_workloads
    from ...core.spec.space import selected_space
    bundle = load_op(ops_dir() / name)
    w = load_workloads(bundle.folder / "workloads.toml", bundle.spec)[0]
    props = VIRTUAL_HOPPER.with_(virtual=False)
    picks = [cfgs[0] for _, cfgs, _ in selected_space(bundle.spec.templates, w, props) if cfgs]
    files = {t.name: bundle.folder / t.file for t in bundle.spec.templates}
    rows = []
    for o in build_configs(bundle.spec, files, w, picks, arch=arch, jobs=1, keep_asm=True):
        row = SurveyRow(op=name, template=o.template, config=o.config, status=o.status, error=o.error[:500],
                        seconds=o.seconds)
        if o.status == BUILT:
            for k in o.kernels:
                asm = k.get("asm") or {}
                rk = from_ptx(asm.get("ptx", ""), origin="candidate", path=f"{name}/{o.template}",
                              metadata=asm.get("metadata"), cubin=base64.b64decode(asm.get("cubin_b64", "")) or None)
                row.kernels.append(KernelReport(kernel=rk, round_trip=round_trip(rk, arch) if rk.recoverable else None))
        rows.append(row)
    return rows


def survey(ops: list[str] | None = None, arch: int = 90, jobs: int = 2) -> list[SurveyRow]:
    """Round trips of every built-in op's templates (or `ops`), `jobs` ops building at once."""
    from ...base.builtin import ops_dir
    names = ops or sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [r for rows in pool.map(lambda n: _one_op(n, arch), names) for r in rows]
