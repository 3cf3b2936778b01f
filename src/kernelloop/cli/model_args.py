"""The arguments of the commands that take a model (`capture`, `fuse discover`): the model and its example input.

`load_model` (cli/capture.py) turns them into (model, example_inputs)."""

from __future__ import annotations

from typing import Annotated

import typer

from .common import bad_argument

DTYPES = ("bf16", "fp16", "fp32")

ModelArg = Annotated[str, typer.Argument(help=(
    "Built-in model (llama-tiny, qwen2-tiny, gpt2-tiny) or module.path:factory / file.py:factory: a callable "
    "returning (model, example_inputs), example_inputs being one call's arguments: a tensor (model(x)) or a tuple "
    "of positional arguments (model(*example_inputs)), not a list of examples. The factory gets those of device, "
    "dtype, seed, batch and seq it declares."))]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="bf16, fp16 or fp32: the model's dtype.")]
BatchOpt = Annotated[int, typer.Option("--batch", min=1, help="Batch of the example input_ids.")]
SeqOpt = Annotated[int, typer.Option("--seq", min=1, help="Sequence length of the example input_ids.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the weights and inputs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


def require_dtype(console, dtype: str) -> None:
    """Exit with BAD_INPUT, naming the choices, when --dtype is not one of DTYPES."""
    if dtype not in DTYPES:
        bad_argument(console, f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}")
