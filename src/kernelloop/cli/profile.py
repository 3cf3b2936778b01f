"""`kernelloop profile RUN [--trial ID] [--baseline NAME]... [--ncu [--timeout S] [--op DIR]] [--json]`.

Why a trial's kernel (or a baseline) is as fast as it is. For each selected trial (default: the best passing trial
of every workload), and for each `--baseline` on the workloads of those trials, it prints the bottleneck class with
the evidence kept for it, the roofline position, the launches of the profiled call (summed when there are several;
the class is the longest launch's), the fraction of the bandwidth roof seen by Nsight Compute next to the one seen
by the timer, the build resources and the hypothesis record (what the proposal predicted, and what moved relative
to its parent).

Without `--ncu` it reads the archived profiles (tables `profiles`, `baseline_profiles`); a subject without one
gets the roofline of its measurement (roofs: the measured-ceilings cache of the run's device, else the run's
device-copy baseline of the same bytes) and a note that no Nsight Compute profile is archived.
With `--ncu` (a CUDA host with Nsight Compute) it first profiles every selected subject — the trial's archived
candidate source through `profile_trial`, a baseline through `profile_baseline` (the op folder's reference,
`baselines.py` or a device copy, on inputs from the seed the run timed them with) — keeps each `.ncu-rep` under
RUN/profiles/, archives the reports, then prints as above. Exit codes: 0 done; 1 some subject could not be
profiled (its notes say why); 2 bad input (run, trial, baseline name, op folder); 3 no ncu or no CUDA GPU here,
or the archive could not be read or written.

The records are `kernelloop.tune.profile.explain`, profiling on demand `kernelloop.tune.profile.on_demand`; this module is the
command and its terminal view.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..core.archive import Archive, ArchiveError
from ..tune.profile.explain import (BUILTIN_BASELINES, NO_BASELINE_PROFILE, NO_PROFILE, baseline_record, first_run,
                               profile_summary, recorded_baselines, trial_record)
from ..tune.profile.on_demand import NcuUnavailable, ncu_problems, run_ncu_profiles
from . import common
from .common import esc


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def _pct(v: float | None) -> str:
    return f"{v:.1%}" if v is not None else "n/a"


def _render_profile(t: dict, console: Console) -> None:
    """Class with kept evidence, launches, roofline and roof-fraction agreement of one subject."""
    c = t["classification"]
    if c is None:
        console.print("class: [dim]unknown (needs an Nsight Compute profile)[/dim]")
    else:
        console.print(f"class: [bold]{esc(c['bottleneck'])}[/bold]  ({esc(c['reason'])})")
        table = Table(show_header=True, header_style="bold", box=None)
        for col in ("evidence", "value", "unit", "what it says"):
            table.add_column(col)
        for e in c["evidence"]:
            table.add_row(e["key"], _fmt(e["value"]), e["unit"], e["why"])
        console.print(table)
        if c["missing"]:
            console.print(f"[dim]not in the profile: {esc(', '.join(c['missing']))}[/dim]")
        for r in c["rules"]:
            sp = f" (est. {r['speedup_pct']:g} %)" if r["speedup_pct"] is not None else ""
            console.print(f"[dim]ncu {esc(r['name'])}{esc(sp)}: {esc(r['message'][:160])}[/dim]")
    agg = t.get("aggregate")
    if agg is not None and agg["launches"] > 1:
        dur = f"{agg['duration_ns'] / 1e3:.2f} us" if agg["duration_ns"] is not None else "unknown time"
        dram = f"{agg['dram_bytes'] / 1e6:.2f} MB DRAM" if agg["dram_bytes"] is not None else "DRAM bytes unknown"
        console.print(f"launches: {esc(agg['launches'])} in the profiled call, {esc(dur)}, {esc(dram)} (sums); class of the longest")
        table = Table(show_header=True, header_style="bold", box=None)
        for col in ("launch", "kernel", "us", "share", "DRAM MB", "class"):
            table.add_column(col)
        for i, k in enumerate(agg["kernels"]):
            mark = " *" if i == agg["dominant"] else ""
            table.add_row(str(k["launch_id"]), k["kernel"][:60],
                          f"{k['duration_ns'] / 1e3:.2f}" if k["duration_ns"] is not None else "n/a",
                          _pct(k["share"]), f"{k['dram_bytes'] / 1e6:.2f}" if k["dram_bytes"] is not None else "n/a",
                          k["bottleneck"] + mark)
        console.print(table)
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
        console.print(f"[dim]roofs: {esc(r['ceiling_source'])}; DRAM check: {esc(r['dram_check'])} ({esc(r['dram_note'])})[/dim]")
    a = t.get("agreement")
    if a is not None:
        if a["difference"] is None:
            console.print(f"bandwidth-roof fraction: [dim]{esc(a['note'])}[/dim]")
        else:
            ok = "[green]yes[/green]" if a["agrees"] else "[red]no[/red]"
            console.print(
                f"bandwidth-roof fraction: profile {a['profile_fraction']:.3f} ({a['timing_bytes'] / 1e6:.2f} MB formula "
                f"/ {a['profile_us']:.2f} us ncu) vs timing {a['timing_fraction']:.3f} ({a['timing_bytes'] / 1e6:.2f} "
                f"MB formula / {a['timing_us']:.2f} us timed) of {a['bandwidth_gbps']:.0f} GB/s: differ by "
                f"{a['difference']:.1%} (<= {a['tolerance']:.0%}: {ok})")
            console.print(f"[dim]{esc(a['note'])}; timing: {esc(a['timing_source'])}[/dim]")


def render(summary: dict, console: Console) -> None:
    """Terminal rendering of `profile_summary`."""
    console.print(f"[bold]{esc(summary['op'])}[/bold] run {esc(summary['run'])} on {esc(summary['gpu'] or summary['device'])}")
    if summary["interpreter"]:
        console.print("[yellow]interpreter run: timings are CPU-interpreter wall clock, not kernel performance[/]")
    for n in summary.get("notes", []):
        console.print(f"[yellow]{esc(n)}[/yellow]")
    if not summary["trials"]:
        console.print("no passing trial to explain")
    for t in summary["trials"]:
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(t["config"].items()))
        kt = f"{t['kernel_us']:.2f} us" if t["kernel_us"] is not None else "not timed"
        console.rule(f"{t['workload']}  trial {t['index']} ({t['trial']})")
        console.print(f"{esc(cfg)}  [dim]{esc(t['status'])}, {esc(kt)}, proposer {esc(t['proposer'])}[/dim]")
        _render_profile(t, console)
        b = t["build"]
        if b is not None:
            parts = [f"{k} {b[k]}" for k in ("registers", "spills", "shared_bytes", "local_loads") if b[k] is not None]
            if b.get("ldg128_fraction") is not None:
                parts.append(f"128-bit loads {b['ldg128_fraction']:.0%}")
            console.print(f"build: {', '.join(parts) or 'nothing recorded'}  [dim]({esc(b['source'])})[/dim]")
        if t["hypotheses"]:
            console.print(f"hypotheses: {esc(t['hypothesis_text'])}")
            for o in t["outcomes"]:
                h = o["hypothesis"]
                ch = f"{o['change']:+.1%}" if o["change"] is not None else "n/a"
                console.print(f"  {esc(h['metric'])} {esc(h['direction'])}: [bold]{esc(o['status'])}[/bold] ({esc(ch)}; {esc(o['note'])})")
        if t["cites"]:
            console.print(f"cites: {esc(', '.join(t['cites']))}")
        for n in t["notes"]:
            console.print(f"[yellow]{esc(n)}[/yellow]")
    for b in summary.get("baselines", []):
        kt = f"{b['kernel_us']:.2f} us" if b["kernel_us"] is not None else "not timed"
        console.rule(f"{b['workload']}  baseline {b['baseline']}")
        console.print(f"[dim]{esc(kt)} (the run's timing)[/dim]")
        _render_profile(b, console)
        for n in b["notes"]:
            console.print(f"[yellow]{esc(n)}[/yellow]")


def profile(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite).")],
    trial: Annotated[str | None, typer.Option("--trial", help="Trial id, unique id prefix, or trial index "
                                                              "(default: the best trial of every workload).")] = None,
    baseline: Annotated[list[str] | None, typer.Option(
        "--baseline", help="Also a baseline on the selected trials' workloads: eager, torch.compile, copy, or a name "
                           "of the op's baselines.py (e.g. liger); repeatable.")] = None,
    ncu: Annotated[bool, typer.Option("--ncu", help="Profile the selected subjects now with Nsight Compute "
                                                    "(CUDA host) and archive the reports.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds per Nsight Compute run.")] = 600.0,
    op: Annotated[Path | None, typer.Option("--op", help="The run's op folder (default: ./ops/<op>, else the built-in "
                                                         "op); --ncu needs it for the inputs, the reference and "
                                                         "baselines.py.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as JSON.")] = False,
) -> None:
    """Explain trials and baselines: bottleneck class, kept evidence, roofline, profile vs timing, hypotheses."""
    console = common.console(stderr=as_json)
    baselines = tuple(dict.fromkeys(baseline or ()))
    path = common.archive_path(run, console)
    if ncu:
        problems = ncu_problems()
        if problems:
            console.print("[red]--ncu cannot run here:[/red] " + esc("; ".join(problems)))
            raise typer.Exit(common.STOPPED)
    done: dict = {"notes": [], "failed": []}
    try:
        with Archive(path, readonly=not ncu) as archive:  # only --ncu writes (the reports it archives)
            if ncu:
                done = run_ncu_profiles(archive, path.parent, trial, baselines, op_dir=op, timeout_s=timeout,
                                        say=lambda m: console.print(f"[dim]{esc(m)}[/dim]"))
            else:
                run_ = first_run(archive)
                known = set(BUILTIN_BASELINES) | set(recorded_baselines(archive, run_))
                unknown = [b for b in baselines if b not in known]
                if unknown:
                    raise LookupError(f"unknown baseline(s) {unknown}; this run knows {sorted(known)}")
            summary = profile_summary(archive, trial, baselines)
    except NcuUnavailable as e:
        console.print(f"[red]--ncu cannot run here:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    except LookupError as e:
        console.print(f"[red]{esc(e)}[/red]")
        raise typer.Exit(common.BAD_INPUT)
    except ArchiveError as e:
        console.print(f"[red]cannot read or write {esc(path)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    summary["notes"] = done["notes"]
    summary["ncu"] = {"ran": ncu, "failed": done["failed"]}
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render(summary, console)
    if done["failed"]:
        console.print(f"[red]not profiled:[/red] {esc(', '.join(done['failed']))} (see the notes above)")
        raise typer.Exit(common.FAILED)


__all__ = ["BUILTIN_BASELINES", "NO_BASELINE_PROFILE", "NO_PROFILE", "NcuUnavailable", "baseline_record",
           "ncu_problems", "profile", "profile_summary", "recorded_baselines", "render", "run_ncu_profiles",
           "trial_record"]
