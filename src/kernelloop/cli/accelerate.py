"""`kernelloop accelerate MODEL [--out DIR] [--budget N] [--device cpu|cuda] [--dtype ...] [--batch B --seq S]
[--extend AXIS=LO:HI] [--fuse [--fuse-family F]] [--json]`: capture -> optimize each mapped op -> export -> e2e
(-> fuse), in one folder (`kernelloop.deliver.accelerate`). MODEL is what `capture` takes (a built-in tiny model or
file.py:factory).

Progress goes to stderr line by line, then the summary: each card patched or why not, each op's run, the package,
the end-to-end check, the fusion step (--fuse: the fused graph fuse kept, inference only, or each pattern's reason
why not) and the verdict (`--json`: the AccelerateSummary on stdout). A second call with the same --out
reuses the finished runs. Exit codes (common.ExitCode): 0 patched and outputs within tolerance (and, on CUDA, not
slower); 1 nothing patched, outputs out of tolerance or slower; 2 bad input (arguments, model, an --out that holds
something else or runs of other workloads); 3 the model raised, a file could not be written, export failed; 130
interrupted (run it again to continue).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from . import common
from .common import ExitCode, esc
from ..tune.search import DEFAULT_STRATEGY
from .model_args import BatchOpt, JsonOpt, ModelArg, SeedOpt, SeqOpt, require_dtype


def _default_out(model: str) -> Path:
    name = model.rpartition(":")[2] if ":" in model else model
    return Path("accelerated") / (re.sub(r"[^\w.-]+", "_", name) or "model")


def accelerate(
    model: ModelArg,
    out: Annotated[Optional[Path], typer.Option(help="The accelerate folder: cards, runs, package, e2e and the "
                                                     "summary (default accelerated/MODEL). A second call with the "
                                                     "same folder reuses its finished runs.")] = None,
    budget: Annotated[Optional[str], typer.Option(help="Evaluations per workload (or '10m', 'gpu:5m'); default 24 "
                                                       "on CUDA, 8 in the interpreter.")] = None,
    device: Annotated[Optional[str], typer.Option(help="cpu or cuda (default: cuda when present). On the CPU the "
                                                       "loop and the package run in the Triton interpreter.")] = None,
    dtype: Annotated[Optional[str], typer.Option(help="bf16, fp16 or fp32 (default: the factory's own; bf16 for "
                                                      "the built-in models).")] = None,
    batch: BatchOpt = 2,
    seq: SeqOpt = 8,
    seed: SeedOpt = 0,
    extend: Annotated[Optional[list[str]], typer.Option(help="Export ranges, e.g. 'M=1:64' (as `export --extend`)."
                                                        )] = None,
    strategy: Annotated[str, typer.Option(help="The loop's search strategy (as `optimize --strategy`).")
                        ] = DEFAULT_STRATEGY,
    fuse: Annotated[bool, typer.Option("--fuse", help="Also run `kernelloop fuse` on the model (same budget and "
                                                      "device): its fused graph is a separate, inference-only model "
                                                      "in OUT/fuse, timed against the patched one on CUDA.")] = False,
    fuse_family: Annotated[Optional[list[str]], typer.Option("--fuse-family", metavar="FAMILY", help="With --fuse: only this discovery "
                                                             "family (repeatable; as `fuse --family`).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Make a model faster in one command: capture, optimize each mapped op, export, check end to end."""
    err = common.console(stderr=True)
    console = err if as_json else common.console()
    import torch
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev not in ("cpu", "cuda"):
        common.bad_argument(err, f"--device {dev!r}: use cpu or cuda")
    if dtype is not None:
        require_dtype(err, dtype)
    if dev == "cpu":
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            err.print("[red]cannot run:[/red] Triton was imported before the interpreter could be chosen")
            raise typer.Exit(ExitCode.BAD_INPUT)
        os.environ["TRITON_INTERPRET"] = "1"   # the package's kernels run on CPU tensors in this process
    from ..deliver.accelerate import accelerate as run
    from ..deliver.api import UsageError
    from ..deliver.capture import CaptureError
    from ..deliver.integrate.e2e import ModelCallError
    from ..deliver.package.build import ExportError
    from ..core.spec import SpecError
    from .capture import ModelError, load_model
    try:
        net, inputs = load_model(model, device=dev, dtype=dtype, seed=seed, batch=batch, seq=seq)
    except ModelError as e:
        common.bad_argument(err, str(e))
    folder = out or _default_out(model)
    try:
        result = run(net, inputs, budget=budget, out=folder, device=dev, strategy=strategy, seed=seed,
                     extend=extend, patch=False, name=model, fuse=fuse, fuse_families=fuse_family,
                     on_progress=lambda text: err.print(esc(text)))
    except (UsageError, SpecError) as e:
        common.bad_argument(err, str(e))
    except (CaptureError, ModelCallError) as e:
        err.print(f"[red]the model raised:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    except (ExportError, OSError) as e:
        err.print(f"[red]cannot go on:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted:[/yellow] run the same command again to continue in {esc(folder)}")
        raise typer.Exit(ExitCode.INTERRUPTED)
    summary = result.summary
    if as_json:
        sys.stdout.write(json.dumps(summary.model_dump(mode="json"), indent=1) + "\n")
    else:
        render(summary, console)
    raise typer.Exit(exit_code(summary))


def exit_code(summary) -> ExitCode:
    from ..deliver.accelerate import Verdict
    return ExitCode.OK if summary.verdict is Verdict.ACCELERATED else ExitCode.FAILED


def render(summary, console) -> None:
    """The cards with what became of each, the ops' runs, the package, e2e and the verdict."""
    t = Table(title=f"{summary.model}: operator cards")
    for col in ("module", "paths", "op / workload", "status", "why not"):
        t.add_column(col)
    for c in summary.cards:
        t.add_row(esc(c.module_class), esc(len(c.paths)), esc(c.workload or c.op or "-"),
                  ("[green]" if c.status.value == "patched" else "[yellow]") + esc(c.status.value) + "[/]",
                  esc(c.detail))
    console.print(t)
    for o in summary.ops:
        how = "reused" if o.reused else "resumed" if o.resumed else "run"
        state = f"stopped: {o.error}" if o.error else f"{o.passed}/{o.workloads} workloads passed, {o.trials} trials"
        console.print(f"{esc(o.op)}: {esc(how)} in {esc(o.run_dir)}: {esc(state)}; {esc(o.packaged)} entries packaged")
        for line in o.left_out:
            console.print(f"  left out: {esc(line)}")
    console.print(f"package: {esc(summary.package or 'none')}" + (" (reused)" if summary.package_reused else ""))
    console.print(f"patched call sites: {esc(len(summary.replaced))}")
    if summary.e2e:
        console.print(f"e2e: outputs {'within' if summary.outputs_ok else 'OUT of'} tolerance; speed: "
                      f"{esc(summary.speed)}; report {esc(summary.e2e)}")
    render_fusion(summary.fusion, console)
    colour = "green" if summary.verdict.value == "patched" else "red"
    console.print(f"[bold {colour}]{esc(summary.verdict.value)}[/] in {summary.seconds:.0f} s; summary "
                  f"{esc(Path(summary.out) / 'accelerate.json')}")


def render_fusion(f, console) -> None:
    """The fusion step: its status and detail, the fused patterns, and why the others were not fused."""
    console.print(f"fusion: {esc(f.status.value)}" + (f": {esc(f.detail)}" if f.detail else ""))
    for p in f.patterns:
        state = f"{p.replaced} site(s) fused" if p.replaced else f"not fused: {p.why_not}"
        console.print(f"  {esc(p.op)} ({esc(p.family)}, {esc(' + '.join(p.ops))}): {esc(state)}")
    for why in f.reasons:
        if not any(why.startswith(f"{p.op} ") for p in f.patterns):
            console.print(f"  not fused: {esc(why)}")
    if f.speed:
        console.print(f"  speed: {esc(f.speed)}")
    if f.out:
        console.print(f"  fuse folder: {esc(f.out)}")
