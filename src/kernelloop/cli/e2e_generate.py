"""`kernelloop e2e MODEL PACKAGE --generate`: greedy static-cache generation of the patched model against the
original (kernelloop.deliver.integrate.generate): tokens, prefill, decode-step p50/p90/p99, tokens/s and, on CUDA,
a decode step replayed from a CUDA graph against the HBM roofline. Writes generate.json; exit codes as `e2e`'s."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from .common import ExitCode, esc


def run_generate(console: Console, spec: str, net, example: tuple, pkg, tol, *, new_tokens: int, runs: int | None,
                 seed: int, out: Path, as_json: bool) -> None:
    import torch

    from ..deliver.integrate.e2e import ModelCallError
    from ..deliver.integrate.generate import e2e_generate, save
    ids = example[0] if example else None
    if not callable(getattr(net, "generate", None)):
        console.print(f"[red]bad model:[/red] {esc(spec)}: {esc(type(net).__name__)} has no generate(): --generate "
                      f"needs a transformers generation model")
        raise typer.Exit(ExitCode.BAD_INPUT)
    if not (isinstance(ids, torch.Tensor) and ids.dim() == 2 and not ids.is_floating_point()):
        console.print(f"[red]bad model:[/red] {esc(spec)}: --generate takes the example's first argument as the "
                      f"prompt's token ids [batch, seq]")
        raise typer.Exit(ExitCode.BAD_INPUT)
    try:
        report = e2e_generate(net, pkg, ids, new_tokens=new_tokens, tolerance=tol, runs=runs, seed=seed, name=spec)
    except ModelCallError as e:
        console.print(f"[red]the model raised:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    where = save(report, out)
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=1))
    else:
        render(report, console)
        console.print(f"report: {esc(where)}")
    if report.delivered is False:
        raise typer.Exit(ExitCode.FAILED)


def _tokens(report, console: Console) -> None:
    tk = report.tokens
    if tk.identical:
        console.print(f"tokens: identical to the original's over {report.new_tokens} steps")
    else:
        console.print(f"tokens: first differ at step {tk.first_divergence} ({esc(tk.note)})")
    if tk.first_failure is not None:
        s = tk.steps[tk.first_failure]
        console.print(f"[red]first failing step: {tk.first_failure}[/red] (cosine {s.check.cosine:.6f}, max |diff| "
                      f"{s.check.max_abs:.3g}, rows differing {s.rows_differ}, near-ties among them "
                      f"{s.near_tie_rows})")


def render(report, console: Console) -> None:
    console.print(f"[bold]{esc(report.model)}[/bold] with {esc(report.package)} on {esc(report.device)}: generate() "
                  f"with a static cache, batch {report.batch}, prompt {report.prompt}, {report.new_tokens} new "
                  f"tokens, greedy; {esc(report.sites.get('replaced', 0))} call sites replaced")
    _tokens(report, console)
    t = Table(title="generation (ms)")
    for col in ("variant", "prefill", "step p50", "p90", "p99", "generate()", "tokens/s"):
        t.add_column(col)
    for g in report.timings:
        t.add_row(g.variant, f"{g.prefill_ms:.3f}", f"{g.step.p50_ms:.3f}", f"{g.step.p90_ms:.3f}",
                  f"{g.step.p99_ms:.3f}", f"{g.generate_ms:.3f}", f"{g.tokens_per_s:.1f}")
    console.print(t)
    console.print(f"[dim]{esc(report.timing_method)}[/dim]")
    for r in report.speedup:
        console.print(f"speed-up of generate() over the original: {r.speedup:.3f}x [{r.ci_low:.3f}, {r.ci_high:.3f}] "
                      f"{esc(r.verdict.value)}")
    if report.speed_note:
        console.print(f"speed: {esc(report.speed_note)}")
    for g in report.graph:
        console.print(f"CUDA-graph decode step ({esc(g.variant)}, cache {g.cache_len}): {g.replay_us.median_us:.2f} us"
                      f", roofline {g.roofline_us:.2f} us ({(g.weight_bytes + g.kv_bytes) / 1e6:.2f} MB at "
                      f"{g.copy_gbps:.0f} GB/s): {100 * g.roofline_fraction:.1f}% of the roof"
                      + ("" if g.matches_eager else f" (replay differs from the eager step by up to "
                                                    f"{g.replay_max_abs:.3g})"))
    if report.graph_note:
        console.print(f"CUDA graph: {esc(report.graph_note)}")
    verdict = ("delivered" if report.delivered else "NOT delivered") if report.delivered is not None else \
        "tokens pass; speed not measured, so not called delivered"
    if not report.patched:
        verdict += ": no call reached the package"
    console.print(f"[bold]{esc(verdict)}[/bold]")
