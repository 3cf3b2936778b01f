"""`kernelloop.accelerate(model, example_inputs, budget=..., out=...)`: capture -> optimize each mapped op ->
export -> end to end -> (with fuse=True: fuse, fusion.py) -> apply, in one folder that a second call reuses.

    OUT/cards.json, OUT/cards/<op>.toml    the capture and one workloads file per mapped op
    OUT/runs/<op>/                         the op's loop run (`kernelloop.tune.loop.run`, through `api.plan`)
    OUT/package/                           the exported package (ranges verified, signed)
    OUT/e2e/e2e.json                       the end-to-end check
    OUT/fuse/, OUT/patterns.sqlite         with fuse=True: `kernelloop.fuse`'s folder (made anew) and pattern table
    OUT/accelerate.json                    the AccelerateSummary
    OUT/state.json                         which runs finished, for which workloads; what the package was made of

Resuming: a finished run whose workloads file is unchanged is read back, not run again; an interrupted one is
continued (`resume`); the package is re-exported only when the finished runs changed. A folder that holds anything
else -- or a run of other workloads (another model or shape) -- is refused (UsageError) before any work.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ...base.builtin import op_folder
from ...base.records import Workload
from ...core.spec import load_op
from ...tune import loop
from ...base.records.device import Device
from ...base.usage import UsageError
from .. import api
from ..capture import CaptureReport, capture, write_workloads
from ..integrate.apply import Applied, apply
from ..integrate.e2e import E2EReport, Tolerance, e2e, save
from ..package.export import ExportOptions, export_package
from ..package.records import AuditTrail
from ..package.runtime import Package, load_package
from ..fuse.compose import FusedModel
from . import fusion
from .outcomes import card_outcomes, verdict_of
from .records import AccelerateSummary, FolderState, FusionOutcome, OpOutcome, OpState

STATE, SUMMARY = "state.json", "accelerate.json"


@dataclass
class Accelerated:
    """What `accelerate` returns: the summary record, the capture, the package (None: nothing was packaged), the
    end-to-end report, the patches left on the model (`applied.undo()` restores it; None: nothing applied) and,
    with fuse=True, the fused graph when fusion kept one (`summary.fusion` says what it is and why not):
    inference only, a separate model over the model's parameters, never applied in place of the model."""

    summary: AccelerateSummary
    capture: CaptureReport
    package: Package | None
    e2e: E2EReport | None
    applied: Applied | None
    fused: FusedModel | None = None


@dataclass
class _OpRun:
    outcome: OpOutcome
    run: api.Run | None
    workloads: list[Workload]
    empty: dict[str, str]


def _example(example_inputs) -> tuple:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list) and not any(isinstance(a, (tuple, list)) for a in example_inputs):
        return tuple(example_inputs)
    raise UsageError(f"example_inputs: one call's positional arguments (a tensor or a tuple), not a "
                     f"{type(example_inputs).__name__}" + (" of examples" if isinstance(example_inputs, list) else ""))


def _device(model: torch.nn.Module, device: str | None) -> str:
    """The loop's device ('cuda' or 'interpret') for a model whose parameters are on the CPU or on CUDA."""
    param = next((p for p in model.parameters() if p.is_floating_point()), None)
    on = param.device.type if param is not None else "cpu"
    dev = api.resolve_device("interpret" if device == "cpu" else device or ("cuda" if on == "cuda" else "interpret"))
    want = "cuda" if Device.of(dev).is_cuda else "cpu"
    if on != want:
        raise UsageError(f"device {device or dev!r}: the model's parameters are on {on}; move the model to {want} or "
                         f"pass device={'cuda' if on == 'cuda' else 'cpu'!r}")
    if want == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            raise UsageError("device 'interpret': the package's kernels run in this process only with "
                             "TRITON_INTERPRET=1 set before triton is imported (set it first, or use a GPU)")
        os.environ["TRITON_INTERPRET"] = "1"
    return dev


class _Folder:
    """The accelerate folder and its state file."""

    def __init__(self, out: Path, model: str):
        self.out = out
        if (out / STATE).is_file():
            self.state = FolderState.model_validate_json((out / STATE).read_text())
        elif out.exists() and any(out.iterdir()):
            raise UsageError(f"out {str(out)!r}: the folder holds files and is not an accelerate folder (no {STATE}):"
                             f" choose a new out folder")
        else:
            self.state = FolderState(model=model)

    def save(self, **update) -> None:
        self.state = self.state.model_copy(update=update)
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / f".{STATE}.tmp"
        tmp.write_text(self.state.model_dump_json(indent=1))
        os.replace(tmp, self.out / STATE)

    def set_op(self, op: str, st: OpState) -> None:
        self.save(ops={**self.state.ops, op: st})


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_runs(files: dict[str, Path], folder: _Folder) -> None:
    """UsageError, before any run, when the folder holds a run of an op made for other workloads than now."""
    for op, wl_file in files.items():
        run_dir = folder.out / "runs" / op
        st = folder.state.ops.get(op)
        if (run_dir / "archive.sqlite").is_file() and (st is None or st.workloads_sha256 != _sha(wl_file)):
            raise UsageError(f"{run_dir} holds a run of other workloads (another model or other shapes): choose a "
                             f"new out folder, or remove {run_dir}")


def _optimize(op: str, wl_file: Path, folder: _Folder, budget, dev: str, strategy: str, seed: int,
              confirm: bool, ops_root: Path | None, say: Callable[[str], None]) -> _OpRun:
    """One op's run: a finished one of an earlier call read back, an interrupted one continued, else a new one."""
    run_dir = folder.out / "runs" / op
    st, sha = folder.state.ops.get(op), _sha(wl_file)
    done = (run_dir / "archive.sqlite").is_file()
    bundle = load_op(op_folder(op, ops_root))
    if done and st.finished:
        run = api.Run.load(run_dir)
        say(f"{op}: reusing the finished run in {run_dir} ({len(run.trials())} trials, budget "
            f"{st.budget or 'default'}; remove the folder to run it again)")
        return _OpRun(_outcome(op, run_dir, run, reused=True), run, api.load_workloads(wl_file, bundle.spec), {})
    outcome = OpOutcome(op=op, run_dir=str(run_dir), workloads=0, resumed=done)
    try:
        p = api.plan(bundle, wl_file, budget, dev, strategy, out=run_dir, seed=seed, confirm=confirm, resume=done)
    except (UsageError, ValueError) as e:   # SpecError is a ValueError; every workload pruned is a UsageError
        say(f"{op}: not run: {e}")
        return _OpRun(outcome.model_copy(update={"error": str(e)}), None, [], {})
    folder.set_op(op, OpState(workloads_sha256=sha, budget=str(budget or ""), strategy=strategy))
    say(f"{op}: {'continuing' if done else 'optimizing'} {len(p.workloads)} workload(s) in {run_dir}"
        + (f"; nothing to try at {', '.join(p.empty)}" if p.empty else ""))
    def progress(pr) -> None:
        say(f"{op}: trial {pr.done}/{pr.total}, {pr.passed} passed")
    try:
        result = loop.run(p.bundle, p.workloads, p.options, p.run_dir, resume=p.resume, on_progress=progress)
    except (RuntimeError, UsageError, OSError) as e:
        say(f"{op}: the run stopped: {e}")
        return _OpRun(outcome.model_copy(update={"error": str(e), "workloads": len(p.workloads)}), None,
                      p.workloads, p.empty)
    folder.set_op(op, folder.state.ops[op].model_copy(update={"finished": True}))
    run = api.Run.load(result.archive, result.run_id)
    return _OpRun(_outcome(op, run_dir, run, resumed=done), run, p.workloads, p.empty)


def _outcome(op: str, run_dir: Path, run: api.Run, **flags) -> OpOutcome:
    ws = run.workloads
    return OpOutcome(op=op, run_dir=str(run_dir), workloads=len(ws), passed=sum(w.best is not None for w in ws),
                     trials=sum(w.trials for w in ws), **flags)


def _package(runs: dict[str, _OpRun], folder: _Folder, extend: list[str], ops_root: Path | None,
             say: Callable[[str], None]) -> tuple[Package | None, bool]:
    """Export the runs that have a PASSED candidate (re-using the package when it was made from the same runs) and
    load it; (None, False) when no run has one."""
    usable = {op: r for op, r in runs.items() if r.run is not None and r.outcome.passed}
    if not usable:
        say("package: no op has a verified candidate; nothing to package")
        return None, False
    made_from = hashlib.sha256("|".join(f"{op}:{r.run.id}:{r.outcome.trials}" for op, r in sorted(usable.items()))
                               .encode()).hexdigest()
    out = folder.out / "package"
    reused = folder.state.package_from == made_from and (out / "kernelloop-package.json").is_file()
    if reused:
        say(f"package: reusing {out} (made from the same runs)")
    else:
        why = " (the runs changed since it was made)" if folder.state.package_from else ""
        shutil.rmtree(out, ignore_errors=True)
        folder.save(package_from=None)
        say(f"package: exporting {', '.join(usable)} to {out}{why}")
        export_package([Path(r.outcome.run_dir) for r in usable.values()],
                       ExportOptions(out=out, extend=list(extend), ops_root=ops_root),
                       on_note=lambda text: say(f"package: {text}"))
        folder.save(package_from=made_from)
    return load_package(out), reused


def _left_out(package: Package | None, runs: dict[str, _OpRun]) -> dict[str, _OpRun]:
    """Each run's outcome with its packaged entries and the winners export left out (from the package's audit)."""
    if package is None:
        return runs
    for op, r in runs.items():
        audit = Path(package.path) / "audit" / f"{op}.json"
        if op not in package.kernels or not audit.is_file():
            continue
        trail = AuditTrail.model_validate_json(audit.read_text())
        r.outcome = r.outcome.model_copy(update={"packaged": len(package.kernels[op].table.entries),
                                                 "left_out": list(trail.left_out)})
    return runs


def accelerate(model: torch.nn.Module, example_inputs, *, budget: int | str | None = None,
               out: str | Path = "accelerated", device: str | None = None, strategy: str = api.DEFAULT_STRATEGY,
               seed: int = 0, confirm: bool | None = None, extend: list[str] | None = None,
               ops_root: str | Path | None = None, tolerance: Tolerance | None = None, patch: bool = True,
               name: str = "", fuse: bool = False, fuse_families: list[str] | None = None,
               on_progress: Callable[[str], None] | None = None) -> Accelerated:
    """Capture `model` on `example_inputs` (one call's positional arguments), optimize every op its cards map onto
    (`budget` evaluations per workload, or a duration; None: 24 on CUDA, 8 in the interpreter), export the
    verified winners, check the patched model end to end against itself and, with `patch`, leave the package
    applied to `model` (training-safe: each op has a backward). device: 'cuda', 'cpu'/'interpret' (the Triton interpreter; the model on the CPU) or None (where the
    model's parameters are). confirm: confirm winners beside the baselines (default: on a GPU). extend: export's
    'AXIS=LO:HI' ranges. fuse: also run `kernelloop.fuse` on the unpatched model (same example, budget, device;
    `fuse_families`: only these discovery families) and return the fused graph it keeps as `Accelerated.fused`, an
    inference-only model beside the patched one (fusion.py). on_progress: called with one line of text per step.
    Everything is written under `out`;
    a second call with the same `out` reuses what is finished (see the module docstring).

    Raises UsageError for bad arguments or an `out` that is not this call's, CaptureError when the model raises
    under capture, ModelCallError when it raises in the end-to-end check, ExportError when export fails."""
    t0 = time.perf_counter()
    say = on_progress or (lambda text: None)
    example = _example(example_inputs)
    dev = _device(model, device)
    api.check_strategy(strategy)
    api.parse_budget(budget, dev)
    fusion.check(fuse_families)
    label = name or type(model).__name__
    folder = _Folder(Path(out), label)
    root = Path(ops_root) if ops_root is not None else None
    folder.save()
    say(f"capture: {label} on {dev}")
    report = capture(model, example, ops_root=root)
    report.save(folder.out / "cards.json")
    files = write_workloads(report, folder.out / "cards", root)
    say(f"capture: {len(report.cards)} cards, {len(report.mapped)} mapped onto "
        f"{', '.join(files) or 'no op'}; {len(report.unmapped)} not mapped")
    _check_runs(files, folder)
    confirm = Device.of(dev).is_cuda if confirm is None else confirm
    runs = {op: _optimize(op, path, folder, budget, dev, strategy, seed, confirm, root, say)
            for op, path in files.items()}
    package, reused = _package(runs, folder, extend or [], root, say)
    runs = _left_out(package, runs)
    checked = applied = None
    if package is not None:
        say("e2e: the patched model against the original on fresh inputs")
        checked = e2e(model, package, example, tolerance=tolerance, name=label)
        save(checked, folder.out / "e2e")
    fused, fused_outcome = None, fusion.NOT_TRIED
    if fuse:   # on the unpatched model: export must see its ATen ops
        fused_outcome, fused = fusion.run_fusion(model, example, folder.out, budget=budget, dev=dev,
                                                 strategy=strategy, seed=seed, confirm=confirm,
                                                 families=fuse_families, tolerance=tolerance, say=say)
    if package is not None and patch:
        applied = apply(model, package)
    if fused is not None:
        fused_outcome = fusion.against_patched(fused_outcome, fused, model, package, example, dev, patch, say)
    summary = _summary(label, dev, budget, folder, report, runs, package, reused, checked, fused_outcome, t0)
    (folder.out / SUMMARY).write_text(summary.model_dump_json(indent=1))
    say(f"done: {summary.verdict.value}; {len(summary.replaced)} call sites patched; summary {folder.out / SUMMARY}")
    return Accelerated(summary, report, package, checked, applied, fused)


def _summary(label, dev, budget, folder, report, runs, package, reused, checked, fused: FusionOutcome,
             t0) -> AccelerateSummary:
    cards = card_outcomes(report, {op: (r.outcome, r.run, r.workloads, r.empty) for op, r in runs.items()},
                          package, checked)
    replaced = [f"{s['path']} -> {s['op']}" for s in (checked.sites.get("sites", []) if checked else [])
                if s["replaced"]]
    speed = ""
    if checked is not None:
        speed = (f"{checked.speedup[0].speedup:.3f}x over eager ({checked.speedup[0].verdict.value})"
                 if checked.speedup else checked.speed_note)
    return AccelerateSummary(
        model=label, device=dev, budget=str(budget or ""), out=str(folder.out), cards=cards,
        ops=[r.outcome for r in runs.values()], package=str(folder.out / "package") if package else None,
        package_reused=reused, replaced=replaced,
        e2e=str(folder.out / "e2e" / "e2e.json") if checked else None,
        outputs_ok=checked.outputs_ok if checked else None, delivered=checked.delivered if checked else None,
        speed=speed, fusion=fused, verdict=verdict_of(package, checked), seconds=time.perf_counter() - t0)
