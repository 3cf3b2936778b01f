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
"""

from __future__ import annotations

from ..records.device import Device

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..archive import Archive, ArchiveError
from ..profile.aggregate import aggregate, agreement
from ..profile.ceilings import CeilingsCacheError, cached_ceilings
from ..profile.classify import classify
from ..profile.evidence import bench_seed, build_resources, parent_observations
from ..profile.hypothesis import evaluate_hypotheses, observations, parse_hypotheses
from ..profile.report import cross_check, roofline_for
from ..records import Measurement, OpSpec, ProfileReport, Trial, Workload
from ..select.pareto import best_per_workload
from . import common

NO_PROFILE = "no Nsight Compute profile is archived for this trial"
NO_BASELINE_PROFILE = "no Nsight Compute profile is archived for this baseline"
BUILTIN_BASELINES = ("eager", "torch.compile", "copy", "copy-kernel")   # = kernelloop.execute.worker.BUILTIN_BASELINES


class NcuUnavailable(RuntimeError):
    """`--ncu` was asked for on a host without Nsight Compute or without a CUDA GPU."""


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


def _roofs(archive: Archive, run: dict, workload_id: str) -> tuple[Any, float | None, list[str]]:
    env, notes = run["environment"], []
    ceilings = None
    if Device.of_environment(env).is_cuda and env.get("gpu"):
        try:
            ceilings = cached_ceilings(env["gpu"], env.get("driver", ""), env.get("torch", ""))
        except CeilingsCacheError as e:
            notes.append(f"ceilings cache unreadable: {e}")
    copy = archive.baselines(run["id"], workload_id).get("copy", (None, ""))[0]
    return ceilings, (copy.kernel.median_us if copy is not None else None), notes


def _parent_observations(archive: Archive, run_id: str, trial: Trial, candidate) -> tuple[dict | None, str]:
    for pid in candidate.parent_ids if candidate else []:
        got = parent_observations(archive, run_id, pid, trial.workload_id)
        if got[0] is not None:
            return got
    return None, ""


def _timed(archive: Archive, run: dict, trial: Trial) -> tuple[Measurement | None, str]:
    """The timing a trial's roof fractions use: the run's confirmation measurement of the trial's candidate (taken
    in the same session as the baselines and the copy roof), else the trial's own measurement."""
    final = archive.finals(run["id"]).get(trial.workload_id)
    if final is not None and final[0] == trial.candidate_id:
        m = final[1]
        return m, f"confirmation measurement ({m.policy.name}, {m.kernel.n} samples)"
    m = trial.measurement
    return m, (f"trial measurement ({m.policy.name}, {m.kernel.n} samples)" if m is not None else "")


def _profile_fields(report: ProfileReport, spec: OpSpec, workload: Workload | None, timed: Measurement | None,
                    source: str) -> dict:
    """aggregate / agreement of a report, computed now for reports archived without them."""
    agg = report.aggregate
    if agg is None and report.kernel is not None:
        agg = aggregate([report.kernel])
    agree = report.agreement
    if agree is None and agg is not None and workload is not None:
        agree = agreement(spec, workload, report.roofline, profile_bytes=agg.dram_bytes, profile_ns=agg.duration_ns,
                          timing_us=timed.kernel.median_us if timed is not None else None, timing_source=source)
    return {"aggregate": agg.model_dump(mode="json") if agg is not None else None,
            "agreement": agree.model_dump(mode="json") if agree is not None else None}


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
                               roofline=roof, build=build_resources(trial))
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
        **_profile_fields(report, spec, workload, *_timed(archive, run, trial)),
        "build": ({**report.build.model_dump(mode="json"), "ldg128_fraction": report.build.ldg128_fraction}
                  if report.build is not None else None),
        "hypothesis_text": candidate.hypothesis if candidate else "",
        "hypotheses": [h.model_dump(mode="json") for h in hypotheses],
        "outcomes": [o.model_dump(mode="json") for o in outcomes], "parent_trial": parent_trial,
        "cites": report.cites, "notes": [*report.notes, *notes],
    }


def baseline_record(archive: Archive, run: dict, workload: Workload, name: str) -> dict:
    """The JSON-able record `profile --json` prints for one baseline on one workload."""
    spec = OpSpec.model_validate(run["spec"])
    measured, why = archive.baselines(run["id"], workload.id).get(name, (None, ""))
    report = archive.baseline_profile(run["id"], workload.id, name)
    notes: list[str] = []
    if measured is None:
        notes.append(f"the run has no timing of baseline {name!r} on this workload" + (f" ({why})" if why else ""))
    source = f"run's {name} baseline measurement ({measured.policy.name}, {measured.kernel.n} samples)" \
        if measured is not None else ""
    if report is None:
        notes.append(NO_BASELINE_PROFILE)
        ceilings, copy_us, more = _roofs(archive, run, workload.id)
        notes += more
        roof = roofline_for(spec, workload, measured.kernel.median_us if measured is not None else None,
                            ceilings=ceilings, copy_us=copy_us)
        report = ProfileReport(trial_id="", workload_id=workload.id, baseline=name, roofline=roof)
    elif report.classification is None and report.kernel is not None:
        report = report.model_copy(update={"classification": classify(report.kernel)})
    c = report.classification
    return {
        "baseline": name, "workload": workload.label, "workload_id": workload.id,
        "kernel_us": measured.kernel.median_us if measured is not None else None,
        "profiled": report.kernel is not None, "artifact": report.artifact,
        "classification": c.model_dump(mode="json") if c is not None else None,
        "roofline": report.roofline.model_dump(mode="json") if report.roofline is not None else None,
        **_profile_fields(report, spec, workload, measured, source),
        "notes": [*report.notes, *notes],
    }


def _run_of(archive: Archive) -> dict:
    runs = archive.runs()
    if not runs:
        raise LookupError("the archive holds no run")
    return runs[0]


def _workloads_of(archive: Archive, trials: list[Trial]) -> list[Workload]:
    seen: dict[str, Workload] = {}
    for t in trials:
        if t.workload_id not in seen:
            w = archive.get_workload(t.workload_id)
            if w is not None:
                seen[t.workload_id] = w
    return list(seen.values())


def recorded_baselines(archive: Archive, run: dict) -> list[str]:
    """Names of the baselines the run measured (on any workload)."""
    names: set[str] = set()
    for w in {t.workload_id for t in archive.trials(run["id"])}:
        names |= {n for n, (m, _) in archive.baselines(run["id"], w).items() if m is not None}
    return sorted(names)


def profile_summary(archive: Archive, trial: str | None = None, baselines: list[str] | tuple[str, ...] = ()) -> dict:
    """Records of the selected trials of the archive's (first) run, and of the named baselines on their workloads."""
    run = _run_of(archive)
    trials = archive.trials(run["id"])
    chosen = _find_trials(trials, trial)
    env = run["environment"]
    return {"run": run["id"], "op": run["op"], "device": env.get("device"), "gpu": env.get("gpu"),
            "interpreter": not Device.of_environment(env).is_cuda, "trials": [trial_record(archive, run, t) for t in chosen],
            "baselines": [baseline_record(archive, run, w, name) for w in _workloads_of(archive, chosen)
                          for name in baselines]}


# ---------------------------------------------------------------------------------------------- profiling (--ncu)

def ncu_problems() -> list[str]:
    """Why Nsight Compute profiling cannot run on this host (empty when it can)."""
    from ..profile.ncu_report_adapter import find_ncu
    problems = []
    if find_ncu() is None:
        problems.append("Nsight Compute (ncu) not found: set KERNELLOOP_NCU to its path or put it on PATH")
    try:
        import torch
        cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken torch is "no GPU" here
        cuda = False
    if not cuda:
        problems.append("no CUDA GPU: torch.cuda.is_available() is False (Nsight Compute profiles GPU kernels)")
    return problems


def _op_folder(run: dict, op_dir: Path | None):
    """The op folder the harness loads (inputs, reference, baselines.py), checked against the run's frozen spec."""
    from ..records import sha256_hex
    from ..spec import SpecError, load_op
    folder = op_dir if op_dir is not None else common.resolve_op(run["op"])
    try:
        bundle = load_op(folder)
    except SpecError as e:
        raise LookupError(f"op folder for {run['op']!r}: {e} (pass --op DIR)") from None
    frozen = OpSpec.model_validate(run["spec"])
    for field in ("inputs", "outputs", "scalars", "inputs_policy", "bytes_formula"):
        if getattr(bundle.spec, field) != getattr(frozen, field):
            raise LookupError(f"op folder {bundle.folder}: its spec's {field} differs from the run's frozen spec; "
                              f"pass --op with the op folder the run used")
    notes = []
    ref = run["manifest"].get("reference_sha256") if isinstance(run.get("manifest"), dict) else None
    if ref and sha256_hex(bundle.reference_source) != ref:
        notes.append(f"{bundle.folder / bundle.spec.reference} changed since the run: the eager and torch.compile "
                     f"baselines profiled are the current reference, not the one the run timed")
    return bundle, notes


def _seed(run: dict, workload: Workload, candidate_id: str) -> int:
    return bench_seed(run, workload, candidate_id)


def run_ncu_profiles(archive: Archive, run_dir: Path, trial: str | None = None, baselines: tuple[str, ...] = (),
                     *, op_dir: Path | None = None, timeout_s: float = 600.0, say=print) -> dict:
    """Profile the selected trials and baselines with Nsight Compute and archive the reports.

    Returns {"notes": [...], "failed": [subject, ...]}. Raises NcuUnavailable without ncu or a GPU, LookupError
    on bad input (trial, baseline name, op folder).
    """
    problems = ncu_problems()
    if problems:
        raise NcuUnavailable("; ".join(problems))
    from ..profile.report import profile_baseline, profile_trial
    run = _run_of(archive)
    spec = OpSpec.model_validate(run["spec"])
    chosen = _find_trials(archive.trials(run["id"]), trial)
    bundle, notes = _op_folder(run, op_dir)
    known = sorted(set(BUILTIN_BASELINES) | set(recorded_baselines(archive, run)) | set(_op_baselines(bundle)))
    unknown = [b for b in baselines if b not in known]
    if unknown:
        raise LookupError(f"unknown baseline(s) {unknown}; this run and op know {known}")
    import torch
    here = torch.cuda.get_device_name()
    if run["environment"].get("gpu") and run["environment"]["gpu"] != here:
        notes.append(f"profiled on {here}; the run was timed on {run['environment']['gpu']}: the timing fractions "
                     f"compare two devices")
    failed: list[str] = []
    op_dir_abs = bundle.folder.resolve()
    for t in chosen:
        cand = archive.get_candidate(t.candidate_id)
        w = archive.get_workload(t.workload_id)
        src = run_dir / "sources" / f"{cand.id}.py"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(cand.source)
        ceilings, copy_us, more = _roofs(archive, run, w.id)
        timed, source = _timed(archive, run, t)
        say(f"ncu: trial {t.index} ({t.id}) on {w.label} ...")
        report = profile_trial(archive, run_dir, t, op_dir=op_dir_abs, source_file=src.resolve(), config=cand.config,
                               workload=w, spec=spec, seed=_seed(run, w, cand.id), build=build_resources(t),
                               ceilings=ceilings, copy_us=copy_us, timeout_s=timeout_s, timed=timed,
                               timing_source=source)
        if report.kernel is None:
            failed.append(f"trial {t.index} ({t.id})")
    by_workload = {t.workload_id: t for t in chosen}
    for w in _workloads_of(archive, chosen):
        ceilings, copy_us, _ = _roofs(archive, run, w.id)
        measured = archive.baselines(run["id"], w.id)
        for name in baselines:
            say(f"ncu: baseline {name} on {w.label} ...")
            report = profile_baseline(archive, run_dir, run["id"], name, op_dir=op_dir_abs, workload=w, spec=spec,
                                      seed=_seed(run, w, by_workload[w.id].candidate_id),
                                      measurement=measured.get(name, (None, ""))[0], ceilings=ceilings,
                                      copy_us=copy_us, timeout_s=timeout_s)
            if report.kernel is None:
                failed.append(f"baseline {name} on {w.label}")
    return {"notes": notes, "failed": failed}


def _op_baselines(bundle) -> list[str]:
    """Names in the op's baselines.py BASELINES table (factories import their libraries lazily)."""
    path = bundle.folder / "baselines.py"
    if not path.is_file():
        return []
    import importlib.util
    mod_spec = importlib.util.spec_from_file_location("kernelloop_profile_baselines", path)
    mod = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(mod)
    except Exception:  # noqa: BLE001 - an unimportable table names nothing
        return []
    return sorted(getattr(mod, "BASELINES", {}))


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
    agg = t.get("aggregate")
    if agg is not None and agg["launches"] > 1:
        dur = f"{agg['duration_ns'] / 1e3:.2f} us" if agg["duration_ns"] is not None else "unknown time"
        dram = f"{agg['dram_bytes'] / 1e6:.2f} MB DRAM" if agg["dram_bytes"] is not None else "DRAM bytes unknown"
        console.print(f"launches: {agg['launches']} in the profiled call, {dur}, {dram} (sums); class of the longest")
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
        console.print(f"[dim]roofs: {r['ceiling_source']}; DRAM check: {r['dram_check']} ({r['dram_note']})[/dim]")
    a = t.get("agreement")
    if a is not None:
        if a["difference"] is None:
            console.print(f"bandwidth-roof fraction: [dim]{a['note']}[/dim]")
        else:
            ok = "[green]yes[/green]" if a["agrees"] else "[red]no[/red]"
            console.print(
                f"bandwidth-roof fraction: profile {a['profile_fraction']:.3f} ({a['timing_bytes'] / 1e6:.2f} MB formula "
                f"/ {a['profile_us']:.2f} us ncu) vs timing {a['timing_fraction']:.3f} ({a['timing_bytes'] / 1e6:.2f} "
                f"MB formula / {a['timing_us']:.2f} us timed) of {a['bandwidth_gbps']:.0f} GB/s: differ by "
                f"{a['difference']:.1%} (<= {a['tolerance']:.0%}: {ok})")
            console.print(f"[dim]{a['note']}; timing: {a['timing_source']}[/dim]")


def render(summary: dict, console: Console) -> None:
    """Terminal rendering of `profile_summary`."""
    console.print(f"[bold]{summary['op']}[/bold] run {summary['run']} on {summary['gpu'] or summary['device']}")
    if summary["interpreter"]:
        console.print("[yellow]interpreter run: timings are CPU-interpreter wall clock, not kernel performance[/]")
    for n in summary.get("notes", []):
        console.print(f"[yellow]{n}[/yellow]")
    if not summary["trials"]:
        console.print("no passing trial to explain")
    for t in summary["trials"]:
        cfg = ", ".join(f"{k}={v}" for k, v in sorted(t["config"].items()))
        kt = f"{t['kernel_us']:.2f} us" if t["kernel_us"] is not None else "not timed"
        console.rule(f"{t['workload']}  trial {t['index']} ({t['trial']})")
        console.print(f"{cfg}  [dim]{t['status']}, {kt}, proposer {t['proposer']}[/dim]")
        _render_profile(t, console)
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
    for b in summary.get("baselines", []):
        kt = f"{b['kernel_us']:.2f} us" if b["kernel_us"] is not None else "not timed"
        console.rule(f"{b['workload']}  baseline {b['baseline']}")
        console.print(f"[dim]{kt} (the run's timing)[/dim]")
        _render_profile(b, console)
        for n in b["notes"]:
            console.print(f"[yellow]{n}[/yellow]")


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
            console.print("[red]--ncu cannot run here:[/red] " + "; ".join(problems))
            raise typer.Exit(common.STOPPED)
    done: dict = {"notes": [], "failed": []}
    try:
        with Archive(path, readonly=not ncu) as archive:  # only --ncu writes (the reports it archives)
            if ncu:
                done = run_ncu_profiles(archive, path.parent, trial, baselines, op_dir=op, timeout_s=timeout,
                                        say=lambda m: console.print(f"[dim]{m}[/dim]"))
            else:
                run_ = _run_of(archive)
                known = set(BUILTIN_BASELINES) | set(recorded_baselines(archive, run_))
                unknown = [b for b in baselines if b not in known]
                if unknown:
                    raise LookupError(f"unknown baseline(s) {unknown}; this run knows {sorted(known)}")
            summary = profile_summary(archive, trial, baselines)
    except NcuUnavailable as e:
        console.print(f"[red]--ncu cannot run here:[/red] {e}")
        raise typer.Exit(common.STOPPED)
    except LookupError as e:
        console.print(f"[red]{e}[/red]")
        raise typer.Exit(common.BAD_INPUT)
    except ArchiveError as e:
        console.print(f"[red]cannot read or write {path}:[/red] {e}")
        raise typer.Exit(common.STOPPED)
    summary["notes"] = done["notes"]
    summary["ncu"] = {"ran": ncu, "failed": done["failed"]}
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        render(summary, console)
    if done["failed"]:
        console.print(f"[red]not profiled:[/red] {', '.join(done['failed'])} (see the notes above)")
        raise typer.Exit(common.FAILED)


__all__ = ["BUILTIN_BASELINES", "NO_BASELINE_PROFILE", "NO_PROFILE", "NcuUnavailable", "baseline_record",
           "ncu_problems", "profile", "profile_summary", "recorded_baselines", "render", "run_ncu_profiles",
           "trial_record"]
