"""`kernelloop replay SPACE`: run search strategies on a recorded space and report best-so-far curves.

The same ask -> evaluate -> tell loop as the controller, with an executor that serves recorded measurements:
no GPU, no compiler. SPACE is a kernelloop space file (`kernelloop record`) or a Kernel Tuner cache
(.json, .json.xz or .json.gz). `--strategy kt:NAME` runs Kernel Tuner's own strategy NAME through its simulation mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from ..tune.replay import load_space, replay as replay_run
from ..tune.replay.metrics import evals_to_within, fraction_of_optimum, methodology_score
from ..tune.search import DEFAULT_STRATEGY, STRATEGIES
from . import common
from .common import esc

CHECKPOINTS = (10, 25, 50, 100, 200, 400, 1000)


def replay(
    space: Annotated[Path, typer.Argument(help="Recorded space: a kernelloop space file or a Kernel Tuner cache.")],
    strategy: Annotated[list[str], typer.Option(help=f"Strategy (repeatable; default {DEFAULT_STRATEGY}); "
                                                     "kt:NAME for Kernel Tuner's.")] = [],
    seeds: Annotated[int, typer.Option(min=1, help="Seeds 0..N-1 per strategy.")] = 10,
    budget: Annotated[int, typer.Option(min=1, help="Evaluations per run.")] = 400,
    workload: Annotated[Optional[str], typer.Option(help="Workload id or label of a multi-workload space "
                                                         "(default: all, by weighted geomean speed-up).")] = None,
    valid_only: Annotated[bool, typer.Option("--valid-only", help="Drop failed configurations from the space "
                                                                   "(what Kernel Tuner's tune_cache searches).")] = False,
    min_speedup: Annotated[Optional[float], typer.Option(help="Worst-shape limit of the multi-workload "
                                                               "objective, e.g. 0.95.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print results (with full mean curves) as JSON.")] = False,
    shapes: Annotated[bool, typer.Option("--shapes", help="Instead of replaying: robustness across the shapes of a "
                                                          "space recorded on several workloads (best per shape, "
                                                          "best single configuration, what each shape's winner "
                                                          "costs on the others, a specialization).")] = False,
) -> None:
    """Replay strategies on a recorded space: evaluations to within 5 %, P@50, P@100, score, curves."""
    console = common.console(stderr=as_json)
    if shapes:
        _shapes(space, as_json, console)
        return
    names = strategy or [DEFAULT_STRATEGY]
    for n in names:
        if n not in STRATEGIES and not n.startswith("kt:"):
            console.print(f"[red]bad argument:[/red] unknown strategy {esc(repr(n))}; choose from {sorted(STRATEGIES)} or kt:NAME")
            raise typer.Exit(common.BAD_INPUT)
    try:
        rec = load_space(space, workload=workload, min_speedup=min_speedup)
    except (OSError, ValueError) as e:
        console.print(f"[red]cannot read {esc(space)}:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    results = []
    for name in names:
        sp = rec.valid_only() if (valid_only or name.startswith("kt:")) else rec
        if not any(v is not None for v in sp.values):
            console.print(f"[red]{esc(space)}: no configuration in the recording succeeded[/red]")
            raise typer.Exit(common.FAILED)
        vals = sp.valid_values
        opt = float(vals[0])
        curves, runs = [], []
        for seed in range(seeds):
            if name.startswith("kt:"):
                try:
                    from ..tune.replay.external import kernel_tuner_run, plain_cache
                    with plain_cache(space) as plain:
                        traj = kernel_tuner_run(plain, sp, name[3:], seed, budget)
                except ImportError as e:
                    console.print(f"[red]{esc(name)}: Kernel Tuner is not installed ({esc(e)})[/red]")
                    raise typer.Exit(common.BAD_INPUT)
            else:
                traj = replay_run(sp, name, seed, budget)
            c = traj.curve()
            curves.append(c)
            runs.append({"seed": seed, "evaluations": traj.evaluations, "evals_to_5pct": evals_to_within(c, opt),
                         "p50": _p_at(c, opt, 50, len(sp)), "p100": _p_at(c, opt, 100, len(sp)),
                         "score": methodology_score(c, vals), "strategy_s": traj.strategy_seconds,
                         "events": len(traj.events)})
        mean_frac = np.mean([np.where(np.isfinite(c), opt / c, 0.0) for c in curves], axis=0)
        reached = [r["evals_to_5pct"] for r in runs if r["evals_to_5pct"] is not None]
        results.append({
            "strategy": name, "space": sp.name, "configurations": len(sp), "failed": sp.n_failed,
            "optimum": opt, "budget": budget, "seeds": seeds,
            "median_evals_to_5pct": float(np.median([r["evals_to_5pct"] or budget + 1 for r in runs])),
            "reached_5pct": len(reached) / len(runs),
            "p50": _mean_or_none([r["p50"] for r in runs]), "p100": _mean_or_none([r["p100"] for r in runs]),
            "score": float(np.mean([r["score"] for r in runs])),
            "ms_per_proposal": 1e3 * sum(r["strategy_s"] for r in runs) / max(1, sum(r["evaluations"] for r in runs)),
            "mean_fraction_of_optimum": mean_frac.tolist(), "runs": runs})
    if as_json:
        print(json.dumps(results, indent=1))
        return
    _render(results, console)


def _p_at(curve, optimum: float, k: int, size: int) -> float | None:
    """P@k of one run; None (not measured) when the run stopped before k evaluations with the space not exhausted
    (a budget below k): the best after fewer evaluations is not P@k."""
    return None if curve.size < min(k, size) else fraction_of_optimum(curve, optimum, k)


def _mean_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(np.mean(values))


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _render(results: list[dict], console: Console) -> None:
    r0 = results[0]
    console.print(f"[bold]{esc(r0['space'])}[/bold]: {esc(r0['configurations'])} configurations "
                  f"({esc(r0['failed'])} failed), optimum {r0['optimum']:.4g}; budget {esc(r0['budget'])}, {esc(r0['seeds'])} seeds")
    t = Table("strategy", "median evals to 5 %", "reached", "P@50", "P@100", "score", "ms/proposal")
    for r in results:
        med = r["median_evals_to_5pct"]
        t.add_row(r["strategy"], f"{med:.0f}" if med <= r["budget"] else f"> {r['budget']}",
                  f"{r['reached_5pct']:.0%}", _cell(r["p50"]), _cell(r["p100"]), f"{r['score']:.3f}",
                  f"{r['ms_per_proposal']:.2f}")
    console.print(t)
    c = Table("best-so-far (fraction of optimum, mean over seeds)", *[str(k) for k in CHECKPOINTS if k <= r0["budget"]])
    for r in results:
        f = r["mean_fraction_of_optimum"]
        c.add_row(r["strategy"], *[f"{f[k - 1]:.3f}" for k in CHECKPOINTS if k <= r0["budget"]])
    console.print(c)


def _shapes(space: Path, as_json: bool, console: Console) -> None:
    from ..tune.replay.space_file import read_space_document
    from ..deliver.report.shapes import shape_robustness
    try:
        doc = read_space_document(space)
        rep = shape_robustness(doc)
    except (OSError, ValueError, KeyError) as e:
        console.print(f"[red]cannot report shapes of {esc(space)}:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    if as_json:
        print(json.dumps(rep, indent=1))
        return
    cfg = lambda c: ",".join(f"{k}={v}" for k, v in c.items())  # noqa: E731
    console.print(f"[bold]{esc(rep['space'])}[/bold]: {esc(rep['configurations'])} configurations on {len(rep['workloads'])} "
                  f"shapes; speed-ups over {esc(rep['baseline_source'])}")
    b = rep["best_single"]
    console.print(f"best single configuration: {cfg(b['config'])}: geomean speed-up {b['geomean_speedup']:.3f}, "
                  f"worst {b['worst_speedup']:.3f} on {esc(b['worst_shape'])}")
    t = Table("shape", "own best", "time", "best single / own best", "shape's winner: largest loss elsewhere")
    for label, own in rep["best_per_shape"].items():
        w = rep["overfitting"][label]
        r = b["ratio_to_best"][label]
        loss = f"{w['largest_loss']:.3f}" if w["largest_loss"] is not None else "-"
        if w["not_run_on"]:
            loss += "; not run (failed or pruned) on " + ", ".join(w["not_run_on"])
        t.add_row(label, cfg(own["config"]), f"{own['time']:.4g}", f"{r:.3f}" if r is not None else "-", loss)
    console.print(t)
    sp = rep["specialization"]
    console.print(f"specialization: {len(sp['configs'])} configuration(s), geomean speed-up {sp['geomean_speedup']:.3f}, "
                  f"worst {sp['worst_speedup']:.3f}")
    for i, c in enumerate(sp["configs"]):
        served = [lab for lab, j in sp["assignment"].items() if j == i]
        console.print(f"  [{i}] {cfg(c)}: {', '.join(served)}")
