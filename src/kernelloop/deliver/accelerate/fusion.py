"""accelerate's opt-in fusion step (`fuse=True`, `kernelloop accelerate --fuse`): `kernelloop.fuse` on the same
model, example and budget, run on the unpatched model (export must see its ATen ops, not the package's), its fuse
folder OUT/fuse (made anew on each call) and its pattern table OUT/patterns.sqlite (kept: a second call re-verifies
the table's realisations instead of searching again).

A composition `fuse` keeps (outputs within tolerance on fresh inputs, and on CUDA not slower than eager) is returned
beside the patched model as a separate, inference-only model; on CUDA it is then timed against the patched model
(paired, the one comparison rule): it pays when FASTER. In the interpreter there is no speed claim. When nothing is
fused the outcome lists fuse's own reasons per pattern: its refusals, failed realisations, sites it left alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import torch

from ...base.records.device import Device
from ...base.records.measurement import SAME_MARGIN, Comparison, Ratio
from ...core.bench.stats import paired_speedup
from ..fuse import FuseError, FuseResult, fuse
from ..fuse.compose import FusedModel
from ..fuse.plans import check_families
from ..integrate.apply import apply
from ..integrate.e2e import Tolerance, fresh_inputs, time_variants
from ..package.build import ExportError
from ..package.runtime import Package
from ...base.usage import UsageError
from .records import FusedPattern, FusionOutcome, FusionStatus

NOT_TRIED = FusionOutcome(status=FusionStatus.NOT_TRIED,
                          detail="fuse=False (`kernelloop accelerate --fuse` composes the model's fusable patterns "
                                 "into a separate inference-only graph)")
INFERENCE_ONLY = "inference only: a separate model (Accelerated.fused); the module patches are what trains"


def check(families: list[str] | None) -> None:
    """UsageError, before any work, for an unknown fusion family."""
    try:
        check_families(families)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _patterns(result: FuseResult) -> tuple[list[FusedPattern], list[str]]:
    """Each realised pattern with its sites; the reasons of what was not fused, in fuse's own words."""
    r = result.report
    reasons = [f"{shape}: the model did not export: {d.error.message}" for shape, d in zip(r.shapes, r.discovery)
               if d.error]
    reasons += [f"{x.family} ({x.kind}): {x.reason}" for x in r.refused]
    out = []
    for p in r.patterns:
        why = ""
        if not p.passed:
            why = p.note or "no candidate passed verification"
        elif not p.replaced:
            left = sorted({s.reason for s in r.sites if s.op == p.op and not s.replaced and s.reason})
            why = "; ".join(left) or "no site composed"
        if why:
            reasons.append(f"{p.op} ({p.family}): {why}")
        out.append(FusedPattern(op=p.op, family=p.family, kind=p.kind, ops=p.ops, occurrences=p.occurrences,
                                replaced=p.replaced, passed=p.passed, why_not=why))
    if not any(d.candidates for d in r.discovery) and not any(d.error for d in r.discovery):
        reasons.append("discovery found no fusion candidate in the exported graph")
    return out, reasons


def _status(result: FuseResult) -> FusionStatus:
    r = result.report
    if result.fused is None:
        return FusionStatus.NOT_REALISED if r.patterns else FusionStatus.NOTHING_TO_FUSE
    return FusionStatus.VERIFIED if r.kept else FusionStatus.NOT_KEPT


def run_fusion(model: torch.nn.Module, example: tuple, out: Path, *, budget, dev: str, strategy: str, seed: int,
               confirm: bool, families: list[str] | None, tolerance: Tolerance | None,
               say: Callable[[str], None]) -> tuple[FusionOutcome, FusedModel | None]:
    """`fuse` of the (unpatched) model on its example: the outcome, and the fused model when fuse kept it."""
    folder = out / "fuse"
    shutil.rmtree(folder, ignore_errors=True)
    say(f"fuse: discovering and realising fusion patterns in {folder}")
    try:
        result = fuse(model, [example], out=folder, budget=budget, device=dev, strategy=strategy, seed=seed,
                      confirm=confirm, families=families, table=out / "patterns.sqlite", tolerance=tolerance,
                      on_note=lambda text: say(f"fuse: {text}"))
    except (FuseError, ExportError) as e:
        say(f"fuse: failed: {e}")
        return FusionOutcome(status=FusionStatus.FAILED, detail=str(e), out=str(folder)), None
    patterns, reasons = _patterns(result)
    status = _status(result)
    e2e = result.report.e2e
    outcome = FusionOutcome(status=status, out=str(folder), patterns=patterns, reasons=reasons,
                            detail=result.report.verdict,
                            outputs_ok=all(e.outputs_ok for e in e2e) if e2e else None)
    if status is FusionStatus.NOTHING_TO_FUSE:
        found = sum(len(d.candidates) for d in result.report.discovery)
        outcome = outcome.model_copy(update={"detail": f"{found} candidate(s) discovered, none planned onto a "
                                                       f"kernel family (the reasons below)"})
    if status is FusionStatus.VERIFIED:
        outcome = outcome.model_copy(update={"detail": f"{result.report.verdict}; {INFERENCE_ONLY}",
                                             "speed": "verified, speed not measured (interpreter)"})
    say(f"fuse: {status.value}: {', '.join(outcome.fused) or 'no pattern fused'}")
    return outcome, result.fused if status is FusionStatus.VERIFIED else None


def against_patched(outcome: FusionOutcome, fused: FusedModel, model: torch.nn.Module, package: Package | None,
                    example: tuple, dev: str, patched: bool, say: Callable[[str], None]) -> FusionOutcome:
    """On CUDA, the kept fused graph timed against the patched model (the model itself when nothing was packaged;
    patched for the timing when `patched` is False): PAYS when FASTER by the paired rule. In the interpreter the
    outcome is returned as it is (no speed claim)."""
    if not Device.of(dev).is_cuda:
        return outcome
    held = apply(model, package) if package is not None and not patched else None
    try:
        ratio = time_fused(model, fused, example, baseline="patched" if package is not None else "eager")
    finally:
        if held is not None:
            held.undo()
    pays = ratio.verdict is Comparison.FASTER
    speed = f"{ratio.speedup:.3f}x over the {ratio.baseline} model ({ratio.verdict.value})"
    say(f"fuse: the fused graph {speed}")
    return outcome.model_copy(update={"vs_patched": ratio, "speed": speed,
                                      "status": FusionStatus.PAYS if pays else FusionStatus.DOES_NOT_PAY})


def time_fused(model: torch.nn.Module, fused: torch.nn.Module, example: tuple, *, baseline: str, seed: int = 0,
               rounds: int = 10, calls: int = 3) -> Ratio:
    """The fused model over `model` as it is now (paired rounds of CUDA-event times, fresh inputs of the example's
    shapes): `paired_speedup`, above 1 when the fused model is faster."""
    args = fresh_inputs(example, model, seed)
    with torch.no_grad():
        samples = time_variants({baseline: lambda: model(*args), "fused": lambda: fused(*args)}, rounds, calls,
                                seed=seed)
    us = {k: [v * 1000 for v in vals] for k, vals in samples.items()}
    return paired_speedup(us[baseline], us["fused"], name=baseline, bootstrap=1000, confidence=0.95,
                          margin=SAME_MARGIN, seed=2)
