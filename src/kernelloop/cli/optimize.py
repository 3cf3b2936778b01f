"""`kernelloop optimize SPEC`: run the closed loop on an op and its workloads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..deliver import api
from ..tune import loop
from ..core.archive import Archive, ArchiveError
from ..tune.loop import PLANNER, strategy_names
from ..tune.loop.checks import CLI_NAMES
from ..core.manifest import ManifestChanged
from ..tune.search import DEFAULT_STRATEGY
from ..deliver.report.terminal import INTERPRETER_BANNER, render
from ..core.spec import SpecError, load_op
from ..core.spec.start import StartError
from . import common
from .common import esc


_WorkloadsOpt = Annotated[Optional[Path], typer.Option(help="Workload file (default: the op's workloads.toml, "
                                                             "or workloads-interpret.toml without a GPU), or a "
                                                             "package's dispatch counts (.json, `Package.write_counts`"
                                                             "): the shapes it saw, weighted by calls.")]
_BudgetOpt = Annotated[Optional[str], typer.Option(
    help="N evaluations per workload, a duration (90s, 10m), GPU time (gpu:300s, gpu:5m: the trials' compile "
         "+ verification + timing seconds as measured), or several: '40,10m,gpu:5m', whichever is spent first "
         "(default: 24 on cuda, 8 in the interpreter).")]
_GpuBudgetOpt = Annotated[Optional[float], typer.Option(
    "--gpu-budget", min=0.001, help="GPU seconds, the same as a 'gpu:Ns' part of --budget.")]
_ScreenSamplesOpt = Annotated[Optional[int], typer.Option(
    "--screen", min=3, help="Time a candidate the search's model does not rank in its best third with this many samples "
                "first; full timing only when it could win (within 5 % of the best) or successive halving "
                "promotes it (the best third of the screened). Verification is never screened.")]
_StrategyOpt = Annotated[str, typer.Option(help=f"Search strategy: {', '.join(strategy_names())} "
                                                f"(default {DEFAULT_STRATEGY}). '{PLANNER}': the rule planner "
                                                f"proposes from profiles (Nsight Compute on cuda when ncu is "
                                                f"found, else timing-only reports) and the knowledge base.")]
_StartOpt = Annotated[Optional[str], typer.Option(
    help="Planner only: the first configuration, e.g. 'BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0' "
         "(unnamed parameters take their first value in the pruned space; must be in every workload's "
         "pruned space).")]
_ProfileTimeoutSOpt = Annotated[float, typer.Option(
    "--profile-timeout", min=1, help="Planner only: seconds one Nsight Compute run may take.")]
_TemplatesOpt = Annotated[Optional[list[str]], typer.Option(
    "--template", help="Search only this template of the spec (repeatable; default: every template).")]
_FixOpt = Annotated[Optional[str], typer.Option(
    "--fix", help="Pin parameters, e.g. 'BLOCK_N=4096,ROWS=1': only templates that have them, only configurations with "
         "these values.")]
_BaselinesOpt = Annotated[Optional[list[str]], typer.Option(
    "--baseline", help="Confirm the winners against only this baseline (repeatable): eager, torch.compile, copy, copy-kernel "
         "or a name in the op's baselines.py (default: eager, torch.compile, the op's, copy on cuda; eager, copy "
         "in the interpreter). E.g. leave out eager and torch.compile where their fp32 references are slow.")]
_PriorOpt = Annotated[Optional[list[Path]], typer.Option(
    help="Staged only: warm-start the search from a recording of other shapes or another GPU (a `kernelloop "
         "record` space file, a Kernel Tuner cache, or an earlier run's folder or archive.sqlite: its PASSED "
         "trials); repeatable, the recordings pooled. The first evaluations (half the initial design) are, "
         "up to half of them, the configurations the same workload measured best in the recordings (else the "
         "recorded workload nearest in shape), then those of the workload's pruned space that a model fitted "
         "to every PASSED measurement (each recorded workload's times divided by its best) predicts fastest.")]
_ResumeOpt = Annotated[bool, typer.Option(help="Continue the run in --out without repeating finished trials, on "
                                               "its own workloads (other --workloads are refused).")]
_SanitizeOpt = Annotated[bool, typer.Option(
    "--sanitize/--no-sanitize", help="Before a winner is confirmed, run compute-sanitizer (memcheck, racecheck, "
                                     "synccheck, initcheck) over it on a small shape: findings reject it and "
                                     "the next fastest is taken; without the tool, CUDA or in the interpreter "
                                     "the run records that it did not run and why.")]
_DevicesOpt = Annotated[Optional[str], typer.Option(
    help="One evaluation worker per device: a count N (the first N GPUs, or N interpreter workers) or a list "
         "('cuda:0,cuda:1', 'cuda:MIG-...', 'interpret:0,interpret:1'); default: the GPU --device cuda:N "
         "names, else every GPU of GPU 0's model, one interpreter worker.")]
_ExecutorOpt = Annotated[str, typer.Option(
    help="local (worker processes on this host) or ray (one actor per device on a Ray cluster: $RAY_ADDRESS, "
         "else a local one; the cluster extra).")]
_InFlightOpt = Annotated[Optional[int], typer.Option(
    min=1, help="Candidates asked ahead of their results (default: the devices, twice that where builds run "
                "ahead); equal values give equal archives on every executor.")]
_BuildJobsOpt = Annotated[Optional[int], typer.Option(
    min=1, help="Build processes compiling ahead of the GPU (default: this host's CPU cores, at most 8).")]


def optimize(
    spec: Annotated[str, typer.Argument(help=common.SPEC_HELP)],
    workloads: _WorkloadsOpt = None,
    budget: _BudgetOpt = None,
    gpu_seconds: _GpuBudgetOpt = None,
    screen_samples: _ScreenSamplesOpt = None,
    device: Annotated[Optional[str], typer.Option(help="cuda or interpret (default: cuda when a GPU is present).")] = None,
    strategy: _StrategyOpt = DEFAULT_STRATEGY,
    start: _StartOpt = None,
    profile_timeout_s: _ProfileTimeoutSOpt = 300.0,
    templates: _TemplatesOpt = None,
    fixed: _FixOpt = None,
    baselines: _BaselinesOpt = None,
    prior: _PriorOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the search.")] = 0,
    checks: Annotated[int, typer.Option(min=1, help="Verification runs (fresh seeded inputs) per trial.")] = 2,
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default: runs/<op>-<time>).")] = None,
    resume: _ResumeOpt = False,
    no_confirm: Annotated[bool, typer.Option("--no-confirm", help="Skip re-measuring winners beside baselines.")] = False,
    sanitize: _SanitizeOpt = True,
    devices: _DevicesOpt = None,
    executor: _ExecutorOpt = "local",
    in_flight: _InFlightOpt = None,
    build_jobs: _BuildJobsOpt = None,
    gate: Annotated[Optional[str], typer.Option(help=common.GATE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON.")] = False,
) -> None:
    """Search, verify, time and archive candidates for every workload; confirm the winners against baselines."""
    console = common.console(stderr=as_json)
    try:
        bundle = load_op(common.resolve_op(spec))
        plan = api.plan(bundle, common.resolve_path(workloads), budget, device, strategy, out=out,
                        gpu_seconds=gpu_seconds, screen_samples=screen_samples, seed=seed, checks=checks,
                        confirm=not no_confirm, sanitize=sanitize, templates=templates, baselines=baselines, fixed=fixed,
                        prior=prior, start=start, profile_timeout_s=profile_timeout_s, resume=resume,
                        devices=devices, executor=executor, in_flight=in_flight, build_jobs=build_jobs, gate=gate,
                        names=CLI_NAMES)
    except SpecError as e:
        common.spec_error(console, e, spec)
    except (typer.BadParameter, StartError, api.UsageError) as e:
        console.print(f"[red]bad argument:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    if not plan.options.device.is_cuda:
        console.print(f"[yellow]{esc(INTERPRETER_BANNER)}[/yellow]")
    for label, why in plan.empty.items():
        console.print(f"[yellow]nothing to try on {esc(label)}:[/yellow] {esc(why)}")
    result = _run(plan, console, as_json)
    with Archive(plan.run_dir / "archive.sqlite") as archive:
        summary = api.summarize(archive, run_dir=plan.run_dir)   # the record kernelloop.optimize's Run holds
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        render(summary, console)
        console.print(f"stopped: {esc(result.stop_reason)} ({result.evaluated} trials evaluated, {result.replayed} "
                      f"replayed from the archive)")
        console.print(f"run folder: {esc(plan.run_dir)}  (kernelloop show {esc(plan.run_dir)})")
    if any(w.best is None for w in summary.workloads):
        raise typer.Exit(common.FAILED)


def _run(plan: "api.Plan", console, as_json: bool):
    """`kernelloop.tune.loop.run` under a progress bar; the RunResult, or the exit code of why it stopped."""
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("passed {task.fields[passed]}"), TextColumn("{task.fields[best]}"),
                  TimeElapsedColumn(), console=console, transient=as_json) as bar:
        planned = planned_trials(plan.options.budget.evals, len(plan.workloads))
        task = bar.add_task(esc(f"{plan.bundle.spec.name} trials"), total=planned, passed=0, best="")

        def on_progress(p):
            best = esc("; ".join(f"{k} {v:.1f}µs" for k, v in list(p.best_us.items())[:3]))
            bar.update(task, completed=p.done, total=p.total or planned, passed=p.passed, best=best)

        try:
            return loop.run(plan.bundle, plan.workloads, plan.options, plan.run_dir, resume=plan.resume,
                            on_progress=on_progress, names=CLI_NAMES)
        except api.UsageError as e:
            console.print(f"[red]bad argument:[/red] {esc(e)}")
            raise typer.Exit(common.BAD_INPUT)
        except (FileExistsError, ManifestChanged, ArchiveError, RuntimeError) as e:
            console.print(f"[red]run stopped:[/red] {esc(e)}")
            raise typer.Exit(common.STOPPED)
        except KeyboardInterrupt:
            console.print(f"[yellow]interrupted; continue with --resume --out {esc(plan.run_dir)}[/yellow]")
            raise typer.Exit(common.INTERRUPTED)


def planned_trials(evals: int | None, workloads: int) -> int | None:
    """The bar's total before the controller knows the pruned spaces: the evaluation budget over every workload
    (None for a wall-time budget alone). The controller's own total (budget capped by each space) replaces it."""
    return evals * workloads if evals else None
