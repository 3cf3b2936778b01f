"""`kernelloop profile RUN [--trial ID] [--json]`: why a trial's kernel is as fast as it is.

For each selected trial (default: the best passing trial of every workload) it prints the bottleneck class with
the evidence kept for it, the roofline position, the build resources and the hypothesis record (what the
proposal predicted, and what moved relative to its parent). It reads the archived profile when there is one;
otherwise it computes the roofline from the trial's measurement (roofs: the measured-ceilings cache of the run's
device, else the run's device-copy baseline of the same bytes) and says that no Nsight Compute profile is
archived.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..archive import Archive, ArchiveError
from ..profile.ceilings import CeilingsCacheError, cached_ceilings
from ..profile.classify import classify
from ..profile.hypothesis import evaluate_hypotheses, observations, parse_hypotheses
from ..profile.report import cross_check, roofline_for
from ..records import BuildArtifact, BuildResources, OpSpec, ProfileReport, Trial
from ..select.pareto import best_per_workload
from . import common

NO_PROFILE = "no Nsight Compute profile is archived for this trial"


def _find_trials(trials: list[Trial], wanted: str | None) -> list[Trial]:
    if wanted is None:
        return sorted(best_per_workload(trials).values(), key=lambda t: t.index)
    if wanted.isdigit():
        hit = [t for t in trials if t.index == int(wanted)]
    else:
        hit = [t for t in trials if t.id == wanted] or [t for t in trials if t.id.startswith(wanted)]
    if len(hit) != 1:
        raise LookupError(f"{'no' if not hit else 'more than one'} trial matches {wanted!r} "
                          f"(give a trial id, a unique prefix, or a trial index)")
    return hit


def _build_of(trial: Trial) -> BuildResources | None:
    b = trial.build
    if isinstance(b, BuildArtifact) and any(v is not None for v in (b.registers, b.spills, b.shared_bytes)):
        return BuildResources(kernel=",".join(b.kernel_names), registers=b.registers, spills=b.spills,
                              shared_bytes=b.shared_bytes, source="trial build artifact (Triton counters)")
    return None


def _roofs(archive: Archive, run: dict, workload_id: str) -> tuple[Any, float | None, list[str]]:
    env, notes = run["environment"], []
    ceilings = None
    if env.get("device") == "cuda" and env.get("gpu"):
        try:
            ceilings = cached_ceilings(env["gpu"], env.get("driver", ""), env.get("torch", ""))
        except CeilingsCacheError as e:
            notes.append(f"ceilings cache unreadable: {e}")
    copy = archive.baselines(run["id"], workload_id).get("copy", (None, ""))[0]
    return ceilings, (copy.kernel.median_us if copy is not None else None), notes


def _parent_observations(archive: Archive, run_id: str, trial: Trial, candidate) -> tuple[dict | None, str]:
    for pid in candidate.parent_ids if candidate else []:
        pt = archive.find_trial(run_id, pid, trial.workload_id)
        if pt is not None:
            return observations(archive.profile(run_id, pt.id), pt.measurement, _build_of(pt)), pt.id
    return None, ""


def trial_record(archive: Archive, run: dict, trial: Trial) -> dict:
    """The JSON-able record `profile --json` prints for one trial."""
    spec = OpSpec.model_validate(run["spec"])
    workload = archive.get_workload(trial.workload_id)
    candidate = archive.get_candidate(trial.candidate_id)
    report = archive.profile(run["id"], trial.id)
    notes: list[str] = []
    if report is None:
        notes.append(NO_PROFILE)
        ceilings, copy_us, more = _roofs(archive, run, trial.workload_id)
        notes += more
        kernel_us = trial.measurement.kernel.median_us if trial.measurement is not None else None
        roof = roofline_for(spec, workload, kernel_us, ceilings=ceilings, copy_us=copy_us)
        report = ProfileReport(trial_id=trial.id, candidate_id=trial.candidate_id, workload_id=trial.workload_id,
                               roofline=roof, build=_build_of(trial))
    elif report.classification is None and report.kernel is not None:
        report = report.model_copy(update={"classification": classify(report.kernel, build=report.build)})
    hypotheses = list(report.hypotheses)
    if not hypotheses and candidate is not None and candidate.hypothesis:
        try:
            hypotheses = parse_hypotheses(candidate.hypothesis)
        except ValueError as e:
            notes.append(f"candidate hypothesis not in the structured form: {e}")
    outcomes = list(report.outcomes)
    parent_trial = ""
    if hypotheses and not outcomes:
        parent_obs, parent_trial = _parent_observations(archive, run["id"], trial, candidate)
        if parent_obs is not None:
            outcomes = evaluate_hypotheses(hypotheses, parent_obs, observations(report, trial.measurement))
        else:
            notes.append("no parent trial on this workload: hypotheses cannot be evaluated")
    c = report.classification
    note = cross_check(report)
    if note is not None and note not in report.notes:
        notes.append(note)
    return {
        "trial": trial.id, "index": trial.index, "workload": workload.label if workload else trial.workload_id,
        "candidate": trial.candidate_id, "config": candidate.config if candidate else {},
        "proposer": candidate.proposer if candidate else "", "status": trial.verdict.status.value,
        "kernel_us": trial.measurement.kernel.median_us if trial.measurement is not None else None,
        "profiled": report.kernel is not None, "artifact": report.artifact,
        "classification": c.model_dump(mode="json") if c is not None else None,
        "roofline": report.roofline.model_dump(mode="json") if report.roofline is not None else None,
        "build": ({**report.build.model_dump(mode="json"), "ldg128_fraction": report.build.ldg128_fraction}
                  if report.build is not None else None),
        "hypothesis_text": candidate.hypothesis if candidate else "",
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "outcomes": [o.model_dump(mode="json") for o in outcomes], "parent_trial": parent_trial,
        "cites": report.cites, "notes": [*report.notes, *notes],
    }


def profile_summary(archive: Archive, trial: str | None = None) -> dict:
    """Records of the selected trials of the archive's (first) run."""
    runs = archive.runs()
    if not runs:
        raise LookupError("the archive holds no run")
    run = runs[0]
    trials = archive.trials(run["id"])
    chosen = _find_trials(trials, trial)
    env = run["environment"]
    return {"run": run["id"], "op": run["op"], "device": env.get("device"), "gpu": env.get("gpu"),
            "interpreter": env.get("device") != "cuda", "trials": [trial_record(archive, run, t) for t in chosen]}


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def render(summary: dict, console: Console) -> None:
    """Terminal rendering of `profile_summary`."""
    console.print(f"[bold]{summary['op']}[/bold] run {summary['run']} on {summary['gpu'] or summary['device']}")
    if summary["interpreter"]:
        console.print("[yellow]interpreter run: timings are CPU-interpreter wall clock, not kernel performance[/]")
    if not summary["trials"]:
        console.print("no passing trial to explain")
    for t in summary["trials"]:
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(t["config"].items()))
        kt = f"{t['kernel_us']:.2f} us" if t["kernel_us"] is not None else "not timed"
        console.rule(f"{t['workload']}  trial {t['index']} ({t['trial']})")
        console.print(f"{cfg}  [dim]{t['status']}, {kt}, proposer {t['proposer']}[/dim]")
        c = t["classification"]
        if c is None:
            console.print("class: [dim]unknown (needs an Nsight Compute profile)[/dim]")
        else:
            console.print(f"class: [bold]{c['bottleneck']}[/bold]  ({c['reason']})")
            table = Table(show_header=True, header_style="bold", box=None)
            for col in ("evidence", "value", "unit", "what it says"):
                table.add_column(col)
            for e in c["evidence"]:
                table.add_row(e["key"], _fmt(e["value"]), e["unit"], e["why"])
            console.print(table)
            if c["missing"]:
                console.print(f"[dim]not in the profile: {', '.join(c['missing'])}[/dim]")
            for r in c["rules"]:
                sp = f" (est. {r['speedup_pct']:g} %)" if r["speedup_pct"] is not None else ""
                console.print(f"[dim]ncu {r['name']}{sp}: {r['message'][:160]}[/dim]")
        r = t["roofline"]
        if r is not None:
            line = (f"roofline: {r['flops']:.3g} FLOP, {r['bytes']:.3g} B, intensity {r['arithmetic_intensity']:.3g} "
                    f"FLOP/B")
            if r["achieved_gbps"] is not None:
                line += f"; achieved {r['achieved_gbps']:.0f} GB/s"
            if r["fraction"] is not None:
                which = f"the {r['bound']} roof" if r["bound"] != "unknown" else (
                    "the memory roof (no compute roof known)" if r["peak_tflops"] is None else "the roof")
                line += f"; {r['fraction']:.1%} of {which} ({r['roof_us']:.2f} us)"
            console.print(line)
            console.print(f"[dim]roofs: {r['ceiling_source']}; DRAM check: {r['dram_check']} ({r['dram_note']})[/dim]")
        b = t["build"]
        if b is not None:
            parts = [f"{k} {b[k]}" for k in ("registers", "spills", "shared_bytes", "local_loads") if b[k] is not None]
            if b.get("ldg128_fraction") is not None:
                parts.append(f"128-bit loads {b['ldg128_fraction']:.0%}")
            console.print(f"build: {', '.join(parts) or 'nothing recorded'}  [dim]({b['source']})[/dim]")
        if t["hypotheses"]:
            console.print(f"hypotheses: {t['hypothesis_text']}")
            for o in t["outcomes"]:
                h = o["hypothesis"]
                ch = f"{o['change']:+.1%}" if o["change"] is not None else "n/a"
                console.print(f"  {h['metric']} {h['direction']}: [bold]{o['status']}[/bold] ({ch}; {o['note']})")
        if t["cites"]:
            console.print(f"cites: {', '.join(t['cites'])}")
        for n in t["notes"]:
            console.print(f"[yellow]{n}[/yellow]")


def profile(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite).")],
    trial: Annotated[str | None, typer.Option("--trial", help="Trial id, unique id prefix, or trial index "
                                                              "(default: the best trial of every workload).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as JSON.")] = False,
) -> None:
    """Explain trials: bottleneck class, kept evidence, roofline position, hypotheses."""
    console = Console()
    path = common.archive_path(run, console)
    try:
        with Archive(path) as archive:
            summary = profile_summary(archive, trial)
    except LookupError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(common.BAD_INPUT)
    except ArchiveError as e:
        console.print(f"[red]cannot read {path}:[/red] {e}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render(summary, console)


__all__ = ["NO_PROFILE", "profile", "profile_summary", "render", "trial_record"]
