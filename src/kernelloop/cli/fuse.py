"""`kernelloop fuse discover MODEL [--dtype bf16|fp16|fp32] [--batch B --seq S] [--seed N] [--capture cards.json]
[--json] [--out FILE]`.

Exports MODEL (a built-in tiny model or module.path:factory, as `kernelloop capture` takes it) on CPU with
torch.export and prints its fusion candidates, ranked: family, ops, occurrences, bytes saved. --capture weights the
ranking by a capture report's time shares (kernelloop capture --out). Exit codes: 0 discovered; 2 bad input
(unknown model, bad dtype, unreadable --capture); 3 the model did not export (the error record is still printed
with --json and written with --out).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..capture.records import CaptureReport
from . import common
from .capture import DTYPES, ModelError, load_model

fuse_app = typer.Typer(no_args_is_help=True, help="Fusion from the model's graph: discover candidates.")


@fuse_app.command()
def discover(
    model: Annotated[str, typer.Argument(help="Built-in model (llama-tiny, qwen2-tiny, gpt2-tiny) or "
                                              "module.path:factory / file.py:factory returning (model, inputs).")],
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32: the model's dtype.")] = "bf16",
    batch: Annotated[int, typer.Option("--batch", min=1, help="Batch of the example input_ids.")] = 2,
    seq: Annotated[int, typer.Option("--seq", min=1, help="Sequence length of the example input_ids.")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the weights and inputs.")] = 0,
    capture: Annotated[Path | None, typer.Option("--capture", help="A capture report (cards.json) to weight "
                                                                   "the ranking by.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the DiscoveryReport JSON here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Find fusion candidates in a model's exported graph and rank them by the bytes they save."""
    from ..fuse import discover as run_discover
    console, err = common.console(), common.console(stderr=True)

    def bad(msg: str) -> None:
        err.print(f"[red]bad argument:[/red] {msg}")
        raise typer.Exit(common.BAD_INPUT)

    if dtype not in DTYPES:
        bad(f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    report_in = None
    if capture is not None:
        try:
            report_in = CaptureReport.load(capture)
        except (OSError, ValueError) as e:
            bad(f"--capture {capture}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    try:
        net, inputs = load_model(model, device="cpu", dtype=dtype, seed=seed, batch=batch, seq=seq)
    except ModelError as e:
        bad(str(e))
    report = run_discover(net, inputs, capture_report=report_in)
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(report.to_json())
        except OSError as e:
            err.print(f"[red]cannot write:[/red] {e}")
            raise typer.Exit(common.STOPPED)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    elif report.error is None:
        t = Table(title=f"{report.model_class}: {len(report.candidates)} fusion candidates "
                        f"({report.graph_nodes} graph nodes{', weighted by the capture' if report.weighted else ''})")
        for col in ("#", "family", "ops", "occurrences", "bytes/occ", "bytes total", *(["share"] * report.weighted)):
            t.add_column(col, justify="left" if col in ("family", "ops") else "right")
        for c in report.candidates:
            ops = " ".join(s.op.removeprefix("aten.").split(".")[0] for s in c.signature.steps)
            t.add_row(str(c.rank), c.family, ops, str(len(c.occurrences)), str(c.saved_bytes_per_occurrence),
                      str(c.saved_bytes_total), *([f"{100 * (c.share or 0):.1f}%"] * report.weighted))
        console.print(t)
    if report.error is not None:
        err.print(f"[red]discovery failed ({report.error.stage}):[/red] {report.error.message}")
        raise typer.Exit(common.STOPPED)
    if out is not None:
        (err if as_json else console).print(f"report: {out}")
