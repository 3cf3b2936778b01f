"""`kernelloop e2e MODEL PACKAGE`: apply a package to a model, check its outputs and (on CUDA) time it.

Exit codes (common.ExitCode, the table in docs/architecture.md): 0 delivered (outputs within tolerance and, on
CUDA, not slower than the original; on the CPU, outputs within tolerance with the speed reported as not measured);
1 not delivered (outputs out of tolerance, slower, or no call site replaced: no call reached the package); 2 bad
input, refused before any work (model, package, a package that refuses to load, example inputs given as a dict,
a model whose dtype or device is not the package's); 3 the model raised on its example inputs (one line naming the
error). With --generate (cli/e2e_generate.py) the same codes: 1 when the greedy tokens fail the check, nothing was
patched or the patched generate() is slower, 2 also for a model without generate(), 3 when the model raises
generating. Without --dtype the model gets the package's dtype when its kernels all share one (else a factory's
own default, bf16 for the built-in models).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from . import common
from .common import ExitCode, esc
from .model_args import require_dtype


def e2e(
    model: Annotated[str, typer.Argument(help="A built-in model (llama-tiny, qwen2-tiny, gpt2-tiny) or "
                                              "module.path:factory (or file.py:factory) returning (model, inputs).")],
    package: Annotated[Path, typer.Argument(help="Package folder (`kernelloop export`).")],
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when present). On the CPU the "
                                                       "package's kernels run in the Triton interpreter.")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="Model dtype: bf16, fp16 or fp32 (default: the package's).")
                     ] = None,
    batch: Annotated[int, typer.Option(min=1, help="Batch of the built-in models' inputs.")] = 2,
    seq: Annotated[int, typer.Option(min=1, help="Sequence length of the built-in models' inputs.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the model's weights.")] = 0,
    seeds: Annotated[int, typer.Option(min=1, help="Fresh seeded inputs the outputs are compared on.")] = 3,
    min_cosine: Annotated[float, typer.Option(help="Logits' cosine similarity, at least.")] = 0.999,
    min_top1: Annotated[float, typer.Option(help="Top-1 agreement of the logits, at least.")] = 0.99,
    out: Annotated[Optional[Path], typer.Option(help="Folder for e2e.json (default: beside the package, "
                                                     "PACKAGE/../e2e-<package name>).")] = None,
    counts: Annotated[Optional[Path], typer.Option(help="Also write the dispatch counts here (JSON; `kernelloop "
                                                        "optimize --workloads` reads it).")] = None,
    allow_unsigned: Annotated[bool, typer.Option(
        "--allow-unsigned", help="Load a package that is unsigned or signed by a key outside the trust store (its "
                                 "code then runs on your say-so; the report says so).")] = False,
    trust: Annotated[Optional[list[Path]], typer.Option(
        help="A public key file whose signatures are accepted for this load (repeatable; `kernelloop keys trust` "
             "adds one for good).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    generate: Annotated[bool, typer.Option(
        "--generate", help="Check and time greedy generation instead of one forward: generate() with a static KV "
                           "cache, prompt --seq tokens, batch --batch, --new-tokens tokens (docs/walkthrough.md).")
                        ] = False,
    new_tokens: Annotated[int, typer.Option(min=1, help="With --generate: tokens generated (N).")] = 16,
    runs: Annotated[Optional[int], typer.Option(min=1, help="With --generate: timed generate() calls per variant "
                                                            "(default 5 on CUDA, 1 on the CPU).")] = None,
) -> None:
    """Outputs of the patched model against the original on fresh inputs; speed beside eager and torch.compile
    (--generate: greedy tokens, prefill, decode-step tail latency, tokens/s and a graph-replayed decode step)."""
    console = common.console(stderr=as_json)
    dev = _device(console, device)
    from ..deliver.integrate.e2e import ModelCallError, Tolerance, e2e as run_e2e, save
    from ..deliver.package import PackageError, load_package
    from ..deliver.package.signing import SigningError
    if allow_unsigned:
        console.print("[yellow]--allow-unsigned: an unsigned or untrusted package's code will run[/yellow]")
    try:
        pkg = load_package(package, allow_unsigned=allow_unsigned, trust=list(trust or []))
    except (PackageError, SigningError) as e:
        console.print(f"[red]package refused:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.BAD_INPUT)
    net, example = _model(console, model, pkg, dev, dtype, seed=seed, batch=batch, seq=seq)
    if generate:
        from .e2e_generate import run_generate
        tol = Tolerance(min_cosine=min_cosine, min_top1=min_top1)
        run_generate(console, model, net, example, pkg, tol, new_tokens=new_tokens, runs=runs, seed=seed,
                     out=out or package.resolve().parent / f"e2e-{package.name}", as_json=as_json)
        return
    try:
        report = run_e2e(net, pkg, example, seeds=tuple(range(seeds)),
                         tolerance=Tolerance(min_cosine=min_cosine, min_top1=min_top1), name=model)
    except ModelCallError as e:
        console.print(f"[red]the model raised:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    where = save(report, out or package.resolve().parent / f"e2e-{package.name}")
    if counts is not None:
        counts.parent.mkdir(parents=True, exist_ok=True)
        counts.write_text(json.dumps(report.counts, indent=1))
    if as_json:
        print(json.dumps(report.model_dump(mode="json"), indent=1))
    else:
        _render(report, console)
        console.print(f"report: {esc(where)}")
    if not report.patched:
        console.print("[red]NOT delivered: no call site was replaced[/red] (no call of the model reached the "
                      "package: the sites left alone are listed above with the reasons)")
    if not report.outputs_ok or report.delivered is False:
        raise typer.Exit(ExitCode.FAILED)


def _device(console, device: str | None) -> str:
    """cpu or cuda (default: cuda when present); on the CPU the Triton interpreter is chosen before Triton loads."""
    import torch
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev not in ("cpu", "cuda"):
        console.print(f"[red]bad argument:[/red] --device {esc(repr(dev))}: use cpu or cuda")
        raise typer.Exit(ExitCode.BAD_INPUT)
    if dev == "cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            console.print("[red]cannot run:[/red] Triton was imported before the interpreter could be chosen")
            raise typer.Exit(ExitCode.BAD_INPUT)
        os.environ["TRITON_INTERPRET"] = "1"   # interpreter-verified kernels run on CPU tensors
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    return dev


def _model(console, spec: str, pkg, device: str, dtype: str | None, **shape):
    """The model and one call's positional arguments (a tuple), the dtype the package's kernels take unless
    --dtype says; exits BAD_INPUT when the model cannot be had or is not what the package serves."""
    from ..deliver.integrate.e2e import mismatch
    from .capture import ModelError, load_model
    dtypes = sorted({e.guard.dtype.value for k in pkg.kernels.values() for e in k.table.entries})
    if dtype is None and len(dtypes) == 1:
        dtype = dtypes[0]
    elif dtype is not None:
        require_dtype(console, dtype)
    try:
        net, inputs = load_model(spec, device=device, dtype=dtype, **shape)
    except ModelError as e:
        console.print(f"[red]bad model:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.BAD_INPUT)
    if isinstance(inputs, dict):
        console.print(f"[red]bad model:[/red] {esc(spec)}: example_inputs is a dict of keyword arguments; e2e calls "
                      f"model(*example_inputs): give a tensor or a tuple of positional arguments")
        raise typer.Exit(ExitCode.BAD_INPUT)
    why = mismatch(net, pkg, device)
    if why:
        console.print(f"[red]the model does not fit the package:[/red] {esc(why)}")
        raise typer.Exit(ExitCode.BAD_INPUT)
    return net, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _render(report, console: Console) -> None:
    sites = report.sites
    console.print(f"[bold]{esc(report.model)}[/bold] with {esc(report.package)} on {esc(report.device)}: "
                  f"{esc(sites['replaced'])} call sites replaced, {esc(sites['left'])} left alone")
    left = [s for s in sites["sites"] if not s["replaced"]]
    for s in left:
        console.print(f"  left: {esc(s['path'])} ({esc(s['kind'])}): {esc(s['reason'])}")
    t = Table(title="outputs, patched vs original")
    for col in ("seed", "max |diff|", "cosine", "top-1 agreement", "decisive (ties)", "ok"):
        t.add_column(col)
    for c in report.checks:
        t.add_row(str(c.seed), f"{c.max_abs:.3g}", f"{c.cosine:.6f}", "-" if c.top1 is None else f"{c.top1:.3f}",
                  "-" if c.top1_decisive is None else f"{c.top1_decisive:.3f} ({c.ties})",
                  "yes" if c.passed else "[red]no[/red]")
    console.print(t)
    if report.times:
        t = Table(title="time per forward (ms, median [95% CI])")
        t.add_column("variant")
        t.add_column("ms")
        for v in report.times:
            t.add_row(v.variant, f"{v.ms.median_us:.3f} [{v.ms.ci_low_us:.3f}, {v.ms.ci_high_us:.3f}]")
        console.print(t)
        for r in report.speedup:
            console.print(f"speed-up over {esc(r.baseline)}: {r.speedup:.3f}x [{r.ci_low:.3f}, {r.ci_high:.3f}] "
                          f"{esc(r.verdict.value)}")
    else:
        console.print(f"speed: {esc(report.speed_note)}")
    for op, c in report.counts.get("ops", {}).items():
        console.print(f"  {esc(op)}: entry hits {esc(c['entries'])}, reference fallbacks {c['fallbacks'] or 'none'}")
    verdict = ("delivered" if report.delivered else "NOT delivered") if report.delivered is not None else \
        ("outputs within tolerance; speed not measured, so not called delivered" if report.outputs_ok
         else "outputs out of tolerance")
    console.print(f"[bold]{esc(verdict)}[/bold]")
