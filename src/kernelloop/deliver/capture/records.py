"""The records of a model capture: tensors, ATen call variants, operator cards, the census and the report.

A card is a *module call site* (or, for softmax and attention, an ATen call site inside an unrecognised module)
with the ATen calls issued inside it, grouped over identical variants: transformers' LlamaRMSNorm reaches ATen
decomposed (pow / mean / rsqrt / mul), so the unit kernelloop can replace is the module call, not one ATen op.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, JsonValue, model_validator

from ...base.records.base import Record, content_hash
from ...base.records.spec import DType


class TensorInfo(Record):
    """Shape, layout and element type of one tensor as the capture saw it (hashable: tuples, not lists)."""

    shape: tuple[int, ...] = Field(description="Sizes, outermost first.")
    stride: tuple[int, ...] = Field(description="Strides in elements (empty for layouts without strides, e.g. "
                                                "sparse).")
    dtype: str = Field(description="torch dtype name without the 'torch.' prefix, e.g. 'bfloat16', 'float64'.")
    device: str = Field(description="Device type: 'cpu', 'cuda', 'meta', ...")
    contiguous: bool = Field(description="Whether the tensor is contiguous in row-major order.")

    def label(self) -> str:
        """`[2, 8, 64] bfloat16` plus ' (strided)' when not contiguous: for tables."""
        return f"[{', '.join(map(str, self.shape))}] {self.dtype}" + ("" if self.contiguous else " (strided)")


class AtenVariant(Record):
    """One ATen overload called with one combination of tensor metadata and non-tensor arguments."""

    overload: str = Field(description="Overload name as str(OpOverload) gives it, e.g. 'aten.mm.default'.")
    tensors: list[TensorInfo] = Field(description="The tensor arguments in call order (tensors inside lists "
                                                  "flattened in place).")
    args: dict[str, JsonValue] = Field(default_factory=dict, description=(
        "The non-tensor arguments that were passed (schema defaults left out), by schema name, as JSON values: "
        "dtypes/devices/layouts as strings, non-finite floats as strings ('inf'), lists of tensors as omitted."))
    count: int = Field(ge=1, description="How many times the model issued this variant.")
    device_time_us: float | None = Field(None, ge=0, description=(
        "Total device (CUDA kernel) time of those calls in microseconds, from torch.profiler; None when not "
        "measured (CPU captures, or profile=False)."))


class OperatorCard(Record):
    """One recognised call-site variant: its module class, where it occurs, the ATen calls it issues, and what
    kernelloop op (if any) computes it.

    kind 'module': a call of a recognised module class (nn.Linear, nn.LayerNorm, RMSNorm classes, GPT-2's Conv1D).
    It owns every ATen call issued while it runs, its children's included (children of a recognised module get no
    cards of their own). kind 'aten': an ATen call kernelloop has an op for (softmax, scaled-dot-product attention)
    issued outside any recognised module; module_class/paths are those of the innermost module around it.
    Calls that agree in class, tensor metadata, ATen variants and mapping are one card: the paths list every
    module path they ran at (e.g. all input_layernorms of identical shape, across layers).
    """

    kind: Literal["module", "aten"] = Field(description="'module': a module call; 'aten': an ATen call site.")
    module_class: str = Field(description="Qualified class name of the module (kind 'aten': the innermost module "
                                          "around the call), e.g. 'torch.nn.modules.linear.Linear'.")
    paths: list[str] = Field(min_length=1, description="Module paths in the model (as named_modules() names them; "
                                                       "'' is the model itself), in order of first call.")
    calls: int = Field(ge=1, description="Number of calls grouped on this card (module calls, or ATen calls).")
    overload: str | None = Field(None, description="kind 'aten': the ATen overload of the call site; else None.")
    inputs: list[TensorInfo] = Field(description="The call's tensor inputs: a module's positional then keyword "
                                                 "tensor arguments, or the ATen call's tensor arguments.")
    aten: list[AtenVariant] = Field(description="The ATen variants issued inside the call, with counts summed over "
                                                "the card's calls (kind 'aten': the one variant).")
    params: dict[str, JsonValue] = Field(default_factory=dict, description=(
        "Facts of the module or call the mapping read, e.g. {'eps': 1e-06}, {'bias': False}, "
        "{'is_causal': True, 'scale': 0.125}."))
    target: str | None = Field(None, description="The kernelloop op this kind of call would map onto (set also "
                                                 "when a condition fails); None when kernelloop has no such op.")
    op: str | None = Field(None, description="The kernelloop op computing this call; None when unmapped.")
    axes: dict[str, int] | None = Field(None, description="The op's axis values (set when mapped, and when the only "
                                                          "failure is a dtype or an axis range).")
    dtype: DType | None = Field(None, description="kernelloop dtype (fp16/bf16/fp32) when mapped.")
    reason: str | None = Field(None, description="Why the call is not mapped (None when mapped).")
    device_time_us: float | None = Field(None, ge=0, description="Device time of all the card's ATen calls in "
                                                                 "microseconds; None when not measured.")
    share: float | None = Field(None, ge=0, description="device_time_us over the model run's device time; None "
                                                        "when not measured.")

    @model_validator(mode="after")
    def _mapped_or_reason(self) -> "OperatorCard":
        if self.op is not None and (self.axes is None or self.dtype is None or self.reason is not None):
            raise ValueError("a mapped card needs axes and dtype and no reason")
        if self.op is None and not self.reason:
            raise ValueError("an unmapped card needs a reason")
        if (self.kind == "aten") != (self.overload is not None):
            raise ValueError("overload is set exactly for kind 'aten'")
        return self

    @property
    def id(self) -> str:
        """Content address of the card (stable across save/load)."""
        return "card-" + content_hash(self.model_dump(mode="json"))

    @property
    def short_class(self) -> str:
        return self.module_class.rsplit(".", 1)[-1]


class CensusEntry(Record):
    """One ATen overload's calls that no mapped card covers: what remains to be written."""

    overload: str = Field(description="Overload name, e.g. 'aten.mul.Tensor'.")
    view: bool = Field(description="The overload returns a view of an input (metadata only: no kernel).")
    count: int = Field(ge=1, description="Calls of the overload outside mapped cards.")
    device_time_us: float | None = Field(None, ge=0, description="Their device time in microseconds; None when not "
                                                                 "measured.")
    share: float | None = Field(None, ge=0, description="device_time_us over the model run's; None when not measured.")
    module_classes: list[str] = Field(description="Qualified classes of the innermost modules that issued them, "
                                                  "in order of first call.")
    variants: list[AtenVariant] = Field(min_length=1, description="The distinct variants, most time (else most "
                                                                  "calls) first.")


class CaptureReport(Record):
    """Everything one capture found: the cards, the unmapped census, and where and how the model was run."""

    model_class: str = Field(description="Qualified class name of the captured model.")
    device: str = Field(description="Device of the first input tensor (else of the first parameter): 'cpu', "
                                    "'cuda:0', ...")
    device_name: str | None = Field(None, description="GPU name for CUDA captures; None on CPU.")
    torch_version: str = Field(description="torch.__version__ of the capturing process.")
    inputs: dict[str, TensorInfo] = Field(description="Tensor inputs of the forward call: positional ones as '0', "
                                                      "'1', ..., keyword ones by name.")
    profiled: bool = Field(description="Whether device times were measured with torch.profiler.")
    device_time_us: float | None = Field(None, ge=0, description="Device time of the whole captured forward in "
                                                                 "microseconds (all kernels and copies); None when "
                                                                 "not measured.")
    aten_calls: int = Field(ge=0, description="ATen calls recorded in the forward.")
    cards: list[OperatorCard] = Field(description="The cards, in order of first call.")
    census: list[CensusEntry] = Field(description="ATen overloads outside mapped cards: by device time when "
                                                  "measured, else by count; views last.")

    @property
    def mapped(self) -> list[OperatorCard]:
        return [c for c in self.cards if c.op is not None]

    @property
    def unmapped(self) -> list[OperatorCard]:
        return [c for c in self.cards if c.op is None]

    def card_for(self, path: str) -> list[OperatorCard]:
        """The cards that list a module path (a module called with several shapes has several)."""
        return [c for c in self.cards if path in c.paths]

    def save(self, path: str | Path) -> Path:
        """Write the report as JSON (canonical, via a temporary file renamed into place: no half-written file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "CaptureReport":
        """Read a report written by save()."""
        return cls.from_json(Path(path).read_text())
