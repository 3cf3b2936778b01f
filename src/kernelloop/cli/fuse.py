"""`kernelloop fuse MODEL` (discover -> realise -> pattern table -> compose -> end to end) and `kernelloop fuse
discover MODEL [--dtype bf16|fp16|fp32] [--batch B --seq S] [--seed N] [--capture cards.json] [--json] [--out FILE]`.

`fuse MODEL` is `fuse run MODEL`: see `run`'s help. `discover` exports MODEL (a built-in tiny model or module.path:factory, as `kernelloop capture` takes it) on CPU with
torch.export and prints its fusion candidates, ranked: family, ops, occurrences, bytes saved. --capture weights the
ranking by a capture report's time shares (kernelloop capture --out). Exit codes: 0 discovered; 2 bad input
(unknown model, bad dtype, unreadable --capture); 3 the model did not export (the error record is still printed
with --json and written with --out).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Table
from typer.core import TyperGroup

from ..deliver.capture.records import CaptureReport
from ..base.records.device import Device
from . import common
from .common import ExitCode, esc
from .capture import ModelError, load_model
from .model_args import BatchOpt, DtypeOpt, JsonOpt, ModelArg, SeedOpt, SeqOpt, require_dtype



class _RunByDefault(TyperGroup):
    """`kernelloop fuse MODEL ...` is `kernelloop fuse run MODEL ...`; the subcommands keep their names."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


fuse_app = typer.Typer(rich_markup_mode=None, cls=_RunByDefault, no_args_is_help=True,
                       help="Fusion from the model's graph: `kernelloop fuse MODEL` realises, composes and checks "
                            "its patterns; `kernelloop fuse discover MODEL` only lists them.")


@fuse_app.command()
def discover(
    model: ModelArg,
    dtype: DtypeOpt = "bf16",
    batch: BatchOpt = 2,
    seq: SeqOpt = 8,
    seed: SeedOpt = 0,
    capture: Annotated[Path | None, typer.Option("--capture", help="A capture report (cards.json) to weight "
                                                                   "the ranking by.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the DiscoveryReport JSON here.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find fusion candidates in a model's exported graph and rank them by the bytes they save."""
    from ..deliver.fuse import discover as run_discover
    console, err = common.console(), common.console(stderr=True)

    require_dtype(err, dtype)
    report_in = None
    if capture is not None:
        try:
            report_in = CaptureReport.load(capture)
        except (OSError, ValueError) as e:
            first = str(e).splitlines()[0] if str(e) else ""
            common.bad_argument(err, f"--capture {capture}: {type(e).__name__}: {first}")
    try:
        net, inputs = load_model(model, device="cpu", dtype=dtype, seed=seed, batch=batch, seq=seq)
    except ModelError as e:
        common.bad_argument(err, str(e))
    report = run_discover(net, inputs, capture_report=report_in)
    if out is not None:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(report.to_json())
        except OSError as e:
            err.print(f"[red]cannot write:[/red] {esc(e)}")
            raise typer.Exit(ExitCode.STOPPED)
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
        err.print(f"[red]discovery failed ({esc(report.error.stage)}):[/red] {esc(report.error.message)}")
        raise typer.Exit(ExitCode.STOPPED)
    if out is not None:
        (err if as_json else console).print(f"report: {esc(out)}")


def e2e_line(e) -> str:
    """One shape's end-to-end check: its outputs against eager, then its times (or why none), no empty parts."""
    said = f"outputs {'within' if e.outputs_ok else 'OUTSIDE'} tolerance"
    if e.checks:
        said += f" (min cosine {min(c.cosine for c in e.checks):.6f})"
    times = ", ".join(f"{v.variant} {v.ms.median_us:.2f} ms" for v in e.times) or e.speed_note
    return f"{e.shape}: " + "; ".join(part for part in (said, times) if part)


def _shapes(text: str | None, batch: int, seq: int) -> list[tuple[int, int]]:
    if not text:
        return [(batch, seq)]
    out = []
    for part in text.split(","):
        b, _, q = part.strip().partition("x")
        if not (b.isdigit() and q.isdigit() and int(b) > 0 and int(q) > 0):
            raise ValueError(f"--shapes {text!r}: use BATCHxSEQ[,BATCHxSEQ...], e.g. 2x8,1x16")
        out.append((int(b), int(q)))
    return out


_BudgetOpt = Annotated[str, typer.Option("--budget", help="The loop's evaluations per workload of each pattern's "
                                                          "op (N), or a duration (90s).")]
_TableOpt = Annotated[Path | None, typer.Option("--table", help="The pattern table (SQLite; default "
                                                                "OUT/patterns.sqlite).")]
_DeviceOpt = Annotated[str | None, typer.Option("--device", help="cuda or interpret (default: cuda when a GPU is "
                                                                 "present).")]
_ShapesOpt = Annotated[str | None, typer.Option("--shapes", help="Several example shapes, BATCHxSEQ,... (instead "
                                                                 "of --batch/--seq).")]
_FamilyOpt = Annotated[list[str] | None, typer.Option("--family", help="Only this discovery family (repeatable): "
                                                                       "residual_add_norm, gemm_gate, gemm_epilogue, "
                                                                       "rotary.")]
_ConfirmOpt = Annotated[bool | None, typer.Option("--confirm/--no-confirm", help="Confirm winners beside the "
                                                                                 "baselines (default: on a GPU).")]
_JobsOpt = Annotated[int | None, typer.Option("--jobs", min=1, help="Loop runs at once (default 2 in the "
                                                                    "interpreter, 1 on a GPU).")]
_FixOpt = Annotated[list[str] | None, typer.Option("--fix", help="KIND:NAME=V,NAME=V: parameters pinned in that "
                                                                 "kernel family's search (add_norm, dual_gemm, "
                                                                 "gate_mul, gemm_epilogue, act_tail, rotary), "
                                                                 "repeatable.")]


@fuse_app.command()
def run(
    model: ModelArg,
    out: Annotated[Path, typer.Option("--out", help="Folder for ops/, runs/, package/, report.json.")] = Path("fused"),
    budget: _BudgetOpt = "2",
    table: _TableOpt = None,
    device: _DeviceOpt = None,
    dtype: Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32: the model's dtype.")] = "bf16",
    batch: Annotated[int, typer.Option("--batch", min=1, help="Batch of the example input_ids.")] = 2,
    seq: Annotated[int, typer.Option("--seq", min=1, help="Sequence length of the example input_ids.")] = 8,
    shapes: _ShapesOpt = None,
    strategy: Annotated[str, typer.Option("--strategy", help="The loop's search strategy.")] = "staged",
    family: _FamilyOpt = None,
    confirm: _ConfirmOpt = None,
    sanitize: Annotated[bool, typer.Option("--sanitize/--no-sanitize", help="compute-sanitizer over winners.")] = True,
    jobs: _JobsOpt = None,
    fix: _FixOpt = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the weights, inputs and searches.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the FuseReport as JSON.")] = False,
) -> None:
    """Discover MODEL's fusion patterns, realise each as a verified op (or reuse the pattern table's), compose them
    into the model's graph and check the result end to end. Exit 0: the composition is kept; 1: it is not (outputs
    off, slower than eager, or nothing realised); 2: bad input; 3: the model did not export."""
    console, err = common.console(stderr=as_json), common.console(stderr=True)
    from ..deliver.api import UsageError, check_strategy, parse_budget, resolve_device

    def bad(msg: str) -> NoReturn:
        common.bad_argument(err, msg)

    require_dtype(err, dtype)
    try:
        dev = resolve_device(device)
        parse_budget(int(budget) if budget.isdigit() else budget, dev)
        check_strategy(strategy)
        dims = _shapes(shapes, batch, seq)
    except (UsageError, ValueError) as e:
        bad(str(e))
    pins = _pins(fix, bad)
    _check_families_and_table(family, table, bad)
    _choose_interpreter(dev, bad)
    from ..deliver.fuse import FuseError, fuse
    net, examples = _examples(model, dims, dev, dtype, seed, bad)
    try:
        result = fuse(net, examples, out=out, budget=int(budget) if budget.isdigit() else budget, device=dev,
                      strategy=strategy, table=table, families=family or None, seed=seed, confirm=confirm,
                      sanitize=sanitize, jobs=jobs, fixed=pins or None,
                      on_note=lambda text: err.print(f"[dim]{esc(text)}[/dim]"))
    except FuseError as e:
        err.print(f"[red]cannot fuse:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    except UsageError as e:
        bad(str(e))
    if as_json:
        sys.stdout.write(result.report.model_dump_json(indent=2) + "\n")
    else:
        _render(result.report, out, console)
    if not result.report.kept:
        raise typer.Exit(ExitCode.FAILED)


def _pins(fix: list[str] | None, bad) -> dict[str, str]:
    """--fix KIND:NAME=V[,NAME=V] as {kind: assignments}."""
    from typing import get_args

    from ..deliver.fuse.plans import Kind
    kinds = get_args(Kind)
    pins = {}
    for f in fix or []:
        kind, sep, assign = f.partition(":")
        if not sep or kind not in kinds or "=" not in assign:
            bad(f"--fix {f!r}: use KIND:NAME=V[,NAME=V], KIND one of {', '.join(kinds)}")
        pins[kind] = assign
    return pins


def _check_families_and_table(family: list[str] | None, table: Path | None, bad) -> None:
    """--family names known families; an existing --table is a pattern table."""
    from ..deliver.fuse.plans import check_families
    from ..deliver.fuse.table import PatternTable
    try:
        check_families(family)
    except ValueError as e:
        bad(f"--{e}")
    if table is not None and table.exists():
        try:
            PatternTable(table).close()
        except ValueError as e:   # TableError
            bad(f"--table {e}")


def _choose_interpreter(dev: str, bad) -> None:
    """Off CUDA, Triton's interpreter, which must be chosen before Triton is imported."""
    if not Device.of(dev).is_cuda:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
            bad("Triton was imported before the interpreter could be chosen")
        os.environ["TRITON_INTERPRET"] = "1"


def _examples(model: str, dims: list[tuple[int, int]], dev: str, dtype: str, seed: int, bad) -> tuple[Any, list]:
    """The model (built once) and one example call's arguments per (batch, seq) shape."""
    examples, net = [], None
    for b, q in dims:
        try:
            m, inputs = load_model(model, device="cuda" if Device.of(dev).is_cuda else "cpu", dtype=dtype, seed=seed,
                                   batch=b, seq=q)
        except ModelError as e:
            bad(str(e))
        net = net or m
        examples.append(inputs if isinstance(inputs, tuple) else (inputs,))
    return net, examples


def _render(r, out: Path, console) -> None:
    """The fuse report as a table of patterns, the end-to-end lines, what was not realised and the verdict."""
    t = Table(title=f"{r.model}: {len(r.patterns)} patterns realised on {r.device} ({', '.join(r.shapes)})")
    for col in ("op", "family", "occurrences", "composed", "passed", "table", "local (vs eager)", "e2e"):
        t.add_column(col)
    for p in r.patterns:
        local = ", ".join(f"{w.vs_eager.speedup:.2f}x" for w in p.local if w.vs_eager) or p.speed
        e2e = ", ".join(f"{k}: {v.speedup:.3f}x" for k, v in p.contribution.items()) or "not measured"
        t.add_row(p.op, p.family, str(p.occurrences), str(p.replaced), "yes" if p.passed else "no",
                  (p.table or "")[:60], local, e2e)
    console.print(t)
    for e in r.e2e:
        console.print(esc(e2e_line(e)))
    for x in r.refused:
        console.print(f"[dim]not realised: {esc(x.family)}: {esc(x.reason)}[/dim]")
    console.print(f"{esc(r.verdict)}; report {esc(out / 'report.json')}")
