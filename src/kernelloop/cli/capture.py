"""`kernelloop capture MODEL [--device cpu|cuda] [--dtype bf16|fp16|fp32] [--batch B --seq S] [--seed N]
[--out cards.json] [--workloads-dir DIR] [--ops DIR] [--profile/--no-profile] [--json]`.

Runs a model once and prints its operator cards (module class, how many paths, calls, the kernelloop op with its
axes or the reason there is none) and the to-do list (the ATen overloads outside mapped cards, by device time when
profiled, else by count). MODEL is a built-in tiny model (kernelloop.deliver.capture.models.MODELS: llama-tiny, qwen2-tiny,
gpt2-tiny; they need the `models` extra) or `module.path:factory` / `path/to/file.py:factory`, a callable returning
(model, example_inputs), example_inputs being ONE call's arguments: a tensor (the model is called as model(x)), a
tuple of positional arguments (model(*example_inputs)) or a dict of keyword arguments (capture only; `fuse` exports
positional arguments) -- not a list of examples (several shapes: --batch/--seq, `fuse --shapes`); it is called with those of device (a string), dtype (a torch.dtype), seed, batch and seq
that it declares as parameters, and when it declares no `device` the model and the input tensors are moved to
--device after it returns. --out writes the CaptureReport as JSON, --workloads-dir one workload file per mapped op.
Exit codes: 0 captured; 2 bad input (unknown model, a factory that cannot be imported, raises or does not return a
pair (model, one call's arguments), a device or dtype that is not one of the choices, no CUDA for --device cuda); 3
the model raised under capture (the message names the module path) or the files could not be written.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table
from torch.utils._pytree import tree_leaves, tree_map

from ..deliver.capture import CaptureError, CaptureReport, write_workloads
from ..deliver.capture import capture as run_capture
from ..deliver.capture.mapping import default_ops_root
from ..base.records.spec import DType
from . import common
from .common import ExitCode, esc
from .model_args import BatchOpt, DtypeOpt, JsonOpt, ModelArg, SeedOpt, SeqOpt, require_dtype

DEVICES = ("cpu", "cuda")
INPUTS_CONTRACT = ("(model, example_inputs), example_inputs being one call's arguments: a tensor (model(x)), a tuple "
                   "of positional arguments (model(*example_inputs)) or, for capture, a dict of keyword arguments; "
                   "not a list of examples")
TODO_ROWS = 15


class ModelError(ValueError):
    """MODEL names nothing that gives (model, example_inputs)."""


def _import_factory(spec: str):
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py") or "/" in where:
            path = Path(where)
            if not path.is_file():
                raise ModelError(f"{spec}: no file {path}")
            mspec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(mspec)
            mspec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001 - any import failure is bad input naming it
        raise ModelError(f"{spec}: cannot import {where!r}: {type(e).__name__}: {e}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise ModelError(f"{spec}: {where!r} has no attribute {attr!r}")
    if not callable(factory):
        raise ModelError(f"{spec}: {attr!r} is not callable")
    return factory


def load_model(spec: str, *, device: str, dtype: str | None, seed: int, batch: int,
               seq: int) -> tuple[torch.nn.Module, Any]:
    """(model, example_inputs) for a built-in name or a `module:factory` (see the module docstring); ModelError
    says what is wrong. dtype None: a factory is not offered one (its own default holds), a built-in model is bf16."""
    torch_dtype = getattr(torch, DType(dtype or "bf16").torch_name)
    if ":" not in spec:
        from ..deliver.capture.models import MODELS
        if spec not in MODELS:
            raise ModelError(f"unknown model {spec!r}: the built-in ones are {', '.join(MODELS)}; or give "
                             f"module.path:factory")
        try:
            import transformers  # noqa: F401
        except ImportError:
            raise ModelError(f"{spec} needs transformers: pip install 'kernelloop[models]'") from None
        return MODELS[spec].factory(device=device, dtype=torch_dtype, seed=seed, batch=batch, seq=seq)
    factory = _import_factory(spec)
    offered = {"device": device, "seed": seed, "batch": batch, "seq": seq}
    if dtype is not None:
        offered["dtype"] = torch_dtype
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in offered.items() if takes_all or k in params}
    try:
        result = factory(**kwargs)
    except Exception as e:  # noqa: BLE001 - the factory's own failure is bad input
        raise ModelError(f"{spec}: the factory raised {type(e).__name__}: {e}") from None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise ModelError(f"{spec}: the factory returned {type(result).__name__}, not a pair (model, example_inputs)")
    model, inputs = result
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"{spec}: the pair's first item is a {type(model).__name__}, not a torch.nn.Module")
    _check_inputs(spec, inputs)
    if "device" not in kwargs and device != "cpu":
        model = model.to(device)
        inputs = tree_map(lambda v: v.to(device) if isinstance(v, torch.Tensor) else v, inputs)
    return model, inputs


def _check_inputs(spec: str, inputs: Any) -> None:
    """ModelError unless `inputs` is one call's arguments (INPUTS_CONTRACT) holding a tensor."""
    if isinstance(inputs, (tuple, list)) and inputs and all(isinstance(a, (tuple, list)) for a in inputs):
        raise ModelError(f"{spec}: example_inputs is a {type(inputs).__name__} of {len(inputs)} tuples, as if several "
                         f"examples; the factory returns {INPUTS_CONTRACT} (several shapes: --batch/--seq, or "
                         f"`fuse --shapes`)")
    if not any(isinstance(v, torch.Tensor) for v in tree_leaves(inputs)):
        raise ModelError(f"{spec}: example_inputs (a {type(inputs).__name__}) holds no tensor; the factory returns "
                         f"{INPUTS_CONTRACT}")


def _mapping_text(card) -> str:
    if card.op is not None:
        axes = ", ".join(f"{k}={v}" for k, v in card.axes.items())
        return f"[green]{card.op}[/green] {axes} {card.dtype.value}"
    return f"[yellow]{card.reason}[/yellow]"


def _us(t: float | None, share: float | None) -> str:
    return "" if t is None else f"{t:.1f} us ({100 * (share or 0):.1f}%)"


def render(report: CaptureReport, console: Console) -> None:
    """The cards table and the to-do list."""
    timed = f", device time {report.device_time_us:.1f} us" if report.device_time_us is not None else ""
    shapes = ", ".join(f"{k}: {v.label()}" for k, v in report.inputs.items())
    console.print(f"[bold]{esc(report.model_class)}[/bold] on {esc(report.device)} (torch {esc(report.torch_version)}): "
                  f"{esc(report.aten_calls)} ATen calls{esc(timed)}; inputs {esc(shapes)}")
    table = Table(title=f"operator cards: {len(report.mapped)} mapped, {len(report.unmapped)} unmapped")
    for col in ("#", "module class", "paths", "calls", "op / reason"):
        table.add_column(col, justify="right" if col in ("#", "paths", "calls") else "left")
    if report.profiled:
        table.add_column("device time", justify="right")
    for i, c in enumerate(report.cards):
        cls = c.short_class + (f" ({c.overload.removeprefix('aten.')})" if c.overload else "")
        row = [str(i), cls, str(len(c.paths)), str(c.calls), _mapping_text(c)]
        table.add_row(*row, *([_us(c.device_time_us, c.share)] if report.profiled else []))
    console.print(table)
    todo = [e for e in report.census if not e.view]
    views = sum(e.count for e in report.census if e.view)
    t = Table(title=f"to do: {len(todo)} ATen overloads outside mapped cards"
                    f"{' by device time' if report.profiled else ' by calls'} ({views} view calls not listed)")
    for col in ("overload", "calls", *(["device time"] if report.profiled else []), "issued in"):
        t.add_column(col, justify="right" if col == "calls" else "left")
    for e in todo[:TODO_ROWS]:
        where = ", ".join(c.rsplit(".", 1)[-1] for c in e.module_classes[:3])
        t.add_row(e.overload, str(e.count), *([_us(e.device_time_us, e.share)] if report.profiled else []),
                  where + (" ..." if len(e.module_classes) > 3 else ""))
    console.print(t)
    if len(todo) > TODO_ROWS:
        console.print(f"... and {len(todo) - TODO_ROWS} more (--json or --out for all)")


def capture(
    model: ModelArg,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    dtype: DtypeOpt = "bf16",
    batch: BatchOpt = 2,
    seq: SeqOpt = 8,
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Write the report (cards.json) here.")] = None,
    workloads_dir: Annotated[Path | None, typer.Option("--workloads-dir",
                                                       help="Write <op>.toml workload files here.")] = None,
    ops: Annotated[Path | None, typer.Option("--ops", help="Ops folder (default ./ops, else the checkout's).")] = None,
    profile: Annotated[bool | None, typer.Option("--profile/--no-profile",
                                                 help="Measure device times (default: on for cuda).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Capture a model's operator cards and map them onto kernelloop ops."""
    console, err = common.console(), common.console(stderr=True)

    if device not in DEVICES:
        common.bad_argument(err, f"--device {device!r}: use one of {', '.join(DEVICES)}")
    require_dtype(err, dtype)
    if device == "cuda" and not torch.cuda.is_available():
        common.bad_argument(err, "--device cuda: no CUDA device here")
    if profile and device != "cuda":
        common.bad_argument(err, "--profile measures CUDA device time: it needs --device cuda")
    ops_root = ops if ops is not None else default_ops_root()
    if not ops_root.is_dir():
        common.bad_argument(err, f"--ops {ops_root}: no such folder")
    try:
        net, inputs = load_model(model, device=device, dtype=dtype, seed=seed, batch=batch, seq=seq)
    except ModelError as e:
        common.bad_argument(err, str(e))
    try:
        report = run_capture(net, inputs, profile=profile, ops_root=ops_root)
    except CaptureError as e:
        err.print(f"[red]capture failed:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    written = {}
    try:
        if out is not None:
            report.save(out)
        if workloads_dir is not None:
            written = write_workloads(report, workloads_dir, ops_root)
    except (OSError, ValueError) as e:
        err.print(f"[red]cannot write:[/red] {esc(e)}")
        raise typer.Exit(ExitCode.STOPPED)
    if as_json:
        sys.stdout.write(json.dumps(report.model_dump(mode="json"), indent=2) + "\n")
    else:
        render(report, console)
    if out is not None:
        (err if as_json else console).print(f"report: {esc(out)}")
    for op, path in written.items():
        (err if as_json else console).print(f"workloads for {esc(op)}: {esc(path)}")
