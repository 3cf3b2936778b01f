"""`kernelloop gate ...`: the static gate on one candidate (`check`), and a run's gate decisions against its GPU
verdicts (`precision`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import common

gate_app = typer.Typer(add_completion=False, no_args_is_help=True,
                       help="The static gate before the GPU (docs/schedules.md): one candidate, or a run's precision.")


@gate_app.command("check")
def check(
    candidate: Annotated[Path, typer.Argument(help="A candidate JSON (kernelloop.records.Candidate).")],
    workload: Annotated[str, typer.Option(help="The workload's axes, e.g. 'M=4096,N=4096,K=4096'.")],
    dtype: Annotated[str, typer.Option()] = "fp16",
    archive: Annotated[Optional[Path], typer.Option(help="Record the decision in this run folder's archive.")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="The run to record it under (with --archive).")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The static gate on one candidate: its schedule's checks, then its ahead-of-time sm_90 build against the
    device's limits and its declared budget (exit 1 when rejected)."""
    from ..builtin import resolve_op
    from ..gate import gate_candidate, record_decision
    from ..ptx.recover import parse_axes
    from ..records import Candidate, Workload
    from ..spec import load_op
    console = common.console(stderr=as_json, emoji=False)
    try:
        cand = Candidate.from_json(candidate.read_text())
        bundle = load_op(resolve_op(cand.op))
        w = Workload(op=cand.op, axes=parse_axes(workload), dtype=dtype)
    except (OSError, ValueError) as e:
        common.bad_argument(console, str(e))
    decision = gate_candidate(cand, bundle.spec, w)
    if archive is not None:
        from ..archive import Archive
        with Archive(common.archive_path(archive, console)) as a:
            record_decision(a, run_id or (a.runs()[-1]["id"] if a.runs() else "gate"), decision)
    if as_json:
        print(decision.model_dump_json(indent=2))
    else:
        console.print(f"{cand.label} on {w.label}: "
                      + ("[green]passed[/green]" if decision.passed else "[red]rejected[/red]")
                      + f" ({decision.resources.registers} registers, {decision.resources.shared_bytes} bytes, "
                        f"{decision.resources.ctas_per_sm} program(s) an SM)")
        for f in decision.findings:
            console.print(f"  {f.check} {f.field}: {f.message}")
    raise typer.Exit(common.OK if decision.passed else common.FAILED)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


@gate_app.command("precision")
def precision_cmd(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print each run's precision as JSON.")] = False,
) -> None:
    """The gate's decisions archived by a run against the verdicts of the same (candidate, workload): passed, then
    failed (by status); rejected in audit mode, yet PASSED; rejections by check."""
    from ..archive import Archive, ArchiveError
    from ..gate import precision
    console = common.console(emoji=False)
    path = common.archive_path(run, console)
    try:
        with Archive(path, readonly=True) as archive:
            rows = [(r["id"], (r.get("options") or {}).get("gate"), precision(archive, r["id"]))
                    for r in archive.runs()]
    except ArchiveError as e:
        console.print(f"[red]cannot read {path}:[/red] {e}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps([{"run_id": rid, "gate": mode, **p.model_dump(mode="json")} for rid, mode, p in rows],
                         indent=2))
        return
    for rid, mode, p in rows:
        console.print(f"[bold]{rid}[/bold] (gate {mode or 'not recorded'}): {p.decisions} decision(s), "
                      f"{p.passed} passed, {p.rejected} rejected")
        if not p.decisions:
            console.print("  no gate decision archived (the gate was off, or it had no candidate to decide on)")
            continue
        failed = ", ".join(f"{k} {v}" for k, v in sorted(p.passed_then_failed.items())) or "none"
        console.print(f"  passed and ran {p.passed_and_ran}; then failed: {failed}; "
                      f"pass precision {_pct(p.pass_precision)}")
        console.print(f"  rejected and ran (audit) {p.rejected_and_ran}; yet PASSED {p.rejected_would_run}; "
                      f"reject precision {_pct(p.reject_precision)}")
        by_check = ", ".join(f"{k} {v}" for k, v in sorted(p.rejections_by_check.items())) or "none"
        console.print(f"  rejections by check: {by_check}")


__all__ = ["gate_app"]
