"""`kernelloop gate ...`: the static gate on one candidate (`check`), and a run's gate decisions against its GPU
verdicts (`precision`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ..base.records import DType
from . import common

gate_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                       help="The static gate before the GPU (docs/schedules.md): one candidate, or a run's precision.")


def _target_run(archive_file: Path, run_id: str | None, op: str, console) -> str:
    """The run of the archive a decision goes under: --run-id, else the newest run; BAD_INPUT when it is not in the
    archive or is a run of another op (exit 3 when the archive cannot be read)."""
    from ..core.archive import Archive, ArchiveError
    try:
        with Archive(archive_file, readonly=True) as a:
            runs = a.runs()
    except ArchiveError as e:
        console.print(f"[red]cannot read {escape(str(archive_file))}:[/red] {escape(str(e))}")
        raise typer.Exit(common.STOPPED)
    if not runs:
        common.bad_argument(console, f"--archive {archive_file}: it holds no run to record the decision under")
    run = runs[-1] if run_id is None else next((r for r in runs if r["id"] == run_id), None)
    if run is None:
        common.bad_argument(console, f"--run-id {run_id!r} is not a run of {archive_file}; its runs: "
                                            f"{', '.join(r['id'] for r in runs)}")
    if run["op"] != op:
        common.bad_argument(console, f"run {run['id']!r} optimizes {run['op']!r}; the candidate is for {op!r}")
    return run["id"]


def _resources(decision) -> str:
    """The build's resources in words: never a missing number."""
    r = decision.resources
    if decision.checked == "schedule":
        return "not built: rejected before the build" if not decision.passed else "not built"
    known = [f"{v} {unit}" for v, unit in ((r.registers, "registers"), (r.shared_bytes, "bytes"),
                                          (r.ctas_per_sm, "program(s) an SM")) if v is not None]
    return ", ".join(known) or f"no resources read from the build ({escape(decision.build_status) or 'no status'})"


@gate_app.command("check")
def check(
    candidate: Annotated[Path, typer.Argument(help="A candidate JSON (kernelloop.base.records.Candidate).")],
    workload: Annotated[str, typer.Option(help="The workload's axes, every axis of the op, e.g. "
                                               "'M=4096,N=4096,K=4096'.")],
    dtype: Annotated[DType, typer.Option()] = DType.fp16,
    archive: Annotated[Optional[Path], typer.Option(help="Record the decision in this run folder's archive.")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="The run to record it under (with --archive; default: the "
                                                       "newest); a run of the candidate's op.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The static gate on one candidate: its schedule's checks, then its ahead-of-time sm_90 build against the
    device's limits and its declared budget (exit 1 when rejected; 2 on bad input, before any build)."""
    from ..core.archive import Archive
    from ..base.builtin import resolve_op
    from ..tune.gate import gate_candidate, record_decision
    from ..tune.ptx.recover import parse_axes
    from ..base.records import Candidate, Workload
    from ..core.spec import load_op
    from ..core.spec.loader import workload_misfit
    console = common.console(stderr=as_json, emoji=False)
    try:
        cand = Candidate.from_json(candidate.read_text())
        bundle = load_op(resolve_op(cand.op))
        w = Workload(op=cand.op, axes=parse_axes(workload), dtype=dtype)
    except (OSError, ValueError) as e:
        common.bad_argument(console, common.error_text(e))
    misfit = workload_misfit(w, bundle.spec)
    if misfit is not None:
        common.bad_argument(console, f"--workload {workload!r} for {cand.op}: {misfit[0]}: {misfit[1]}")
    if run_id is not None and archive is None:
        common.bad_argument(console, "--run-id names a run of --archive; give the archive")
    if archive is not None:
        archive = common.archive_path(archive, console)
        target = _target_run(archive, run_id, cand.op, console)
    decision = gate_candidate(cand, bundle.spec, w)
    if archive is not None:
        with Archive(archive) as a:
            record_decision(a, target, decision)
    if as_json:
        print(decision.model_dump_json(indent=2))
    else:
        console.print(f"{escape(cand.label)} on {escape(w.label)}: "
                      + ("[green]passed[/green]" if decision.passed else "[red]rejected[/red]")
                      + f" ({_resources(decision)})")
        for f in decision.findings:
            console.print(f"  {escape(' '.join(x for x in (f.check, f.field) if x))}: {escape(f.message)}")
    raise typer.Exit(common.OK if decision.passed else common.FAILED)


def _undecided(options: dict) -> str:
    """Why a run archived no gate decision, from its stored options (docs/schedules.md, the gate in a run)."""
    mode, device = options.get("gate"), options.get("device")
    if mode is None:
        return "the run's options record no gate mode (archived before the gate, which decided nothing)"
    if mode == "off":
        return "the gate was off"
    if device == "interpret":
        return (f"the gate was {mode}, but in the interpreter only candidates lowered from a schedule are decided "
                "(no sm_90 build) and this run had none")
    return f"the gate was {mode}, but no candidate reached it with a schedule or an sm_90 build to decide on"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


@gate_app.command("precision")
def precision_cmd(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print each run's precision as JSON.")] = False,
) -> None:
    """The gate's decisions archived by a run against the verdicts of the same (candidate, workload): passed, then
    failed (by status); rejected in audit mode, yet PASSED; rejections by check."""
    from ..core.archive import Archive, ArchiveError
    from ..tune.gate import precision
    console = common.console(emoji=False)
    path = common.archive_path(run, console)
    try:
        with Archive(path, readonly=True) as archive:
            rows = [(r["id"], r.get("options") or {}, precision(archive, r["id"])) for r in archive.runs()]
    except ArchiveError as e:
        console.print(f"[red]cannot read {escape(str(path))}:[/red] {escape(str(e))}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps([{"run_id": rid, "gate": options.get("gate"), **p.model_dump(mode="json")}
                          for rid, options, p in rows], indent=2))
        return
    for rid, options, p in rows:
        console.print(f"[bold]{escape(rid)}[/bold] (gate {options.get('gate') or 'not recorded'}): "
                      f"{p.decisions} decision(s), {p.passed} passed, {p.rejected} rejected")
        if not p.decisions:
            console.print(f"  no gate decision archived: {_undecided(options)}")
            continue
        failed = ", ".join(f"{k} {v}" for k, v in sorted(p.passed_then_failed.items())) or "none"
        console.print(f"  passed and ran {p.passed_and_ran}; then failed: {failed}; "
                      f"pass precision {_pct(p.pass_precision)}")
        console.print(f"  rejected and ran (audit) {p.rejected_and_ran}; yet PASSED {p.rejected_yet_passed}; "
                      f"reject precision {_pct(p.reject_precision)}")
        by_check = ", ".join(f"{escape(k)} {v}" for k, v in sorted(p.rejections_by_check.items())) or "none"
        console.print(f"  rejections by check: {by_check}")


__all__ = ["gate_app"]
