"""Typed records of the FlashInfer-Trace format: Definition, Workload, Solution, Trace.

Field names, enums, defaults, nesting and validation rules follow flashinfer-bench's own pydantic models
(`flashinfer_bench/data/{definition,workload,solution,trace}.py`) and its docs (`docs/flashinfer-trace/*.mdx`)
as of commit 40e6ca7844b514eb4b1c7edba6d6a7377df57870 (2026-04-30) of github.com/flashinfer-ai/flashinfer-bench.
These are kernelloop's own models of that schema, written from the schema, not copies of its code.

Like the originals, unknown keys are ignored (pydantic's default): a newer file with an extra field still loads.
A dataset is laid out as (see `dataset.py`):

    definitions/<op_type>/<definition>.json                 one Definition
    workloads/<op_type>/<definition>.jsonl                  Traces with only definition + workload
    solutions/<author>/<op_type>/<definition>/<solution>.json   one Solution
    traces/<author>/<op_type>/<definition>.jsonl            Traces with solution + evaluation
"""

from __future__ import annotations

import ast
import math
from enum import Enum
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator
from ...base import pyast

FLASHINFER_BENCH_COMMIT = "40e6ca7844b514eb4b1c7edba6d6a7377df57870"
"""The flashinfer-bench commit whose schema these records follow."""

NonEmpty = Annotated[str, Field(min_length=1)]
NonNegative = Annotated[int, Field(ge=0)]


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)


# ---------------------------------------------------------------------------------------------- Definition

class AxisConst(_Model):
    """An axis whose value is fixed by the definition."""

    type: Literal["const"] = "const"
    value: NonNegative
    """The fixed extent."""
    description: Optional[str] = None


class AxisVar(_Model):
    """An axis bound at run time from the inputs' shapes (its value comes from each workload)."""

    type: Literal["var"] = "var"
    description: Optional[str] = None


def _tag(default):
    """The member a value belongs to: its `type`, or what the originals' plain unions would pick without one."""
    def tag(v: Any) -> Any:
        t = v.get("type") if isinstance(v, dict) else getattr(v, "type", None)
        return t if t is not None else (default(v) if callable(default) else default)
    return tag


Axis = Annotated[Union[Annotated[AxisConst, Tag("const")], Annotated[AxisVar, Tag("var")]],
                 Discriminator(_tag(lambda v: "const" if isinstance(v, dict) and "value" in v else "var"))]


class DType(str, Enum):
    """Element types of the format (its spellings)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3FN = "float8_e4m3fn"
    FLOAT8_E5M2 = "float8_e5m2"
    FLOAT4_E2M1 = "float4_e2m1"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"


class TensorSpec(_Model):
    """An input or output: shape in axis names (None = a Python scalar, [] = a 0-d tensor) and dtype."""

    shape: Optional[list[NonEmpty]]
    dtype: DType
    description: Optional[str] = None


class Definition(_Model):
    """What to compute: axes, named inputs and outputs in call order, and a plain-PyTorch reference `run`."""

    name: NonEmpty
    op_type: NonEmpty
    axes: dict[NonEmpty, Axis]
    inputs: dict[NonEmpty, TensorSpec]
    """In the entry point's argument order."""
    outputs: dict[NonEmpty, TensorSpec]
    """In return (or destination) order; names disjoint from the inputs'."""
    reference: NonEmpty
    """Python source with a top-level `run(*inputs)` returning the output(s)."""
    tags: list[NonEmpty] = Field(default_factory=list)
    description: Optional[str] = None
    constraints: list[NonEmpty] = Field(default_factory=list)
    """Python expressions over axis names that every workload satisfies."""

    @model_validator(mode="after")
    def _checks(self) -> "Definition":
        try:
            mod = pyast.parse(self.reference, mode="exec")
        except SyntaxError as e:
            raise ValueError(f"reference must be valid Python code: {e}") from e
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in mod.body):
            raise ValueError("reference must define a top-level function named 'run'")
        both = set(self.inputs) & set(self.outputs)
        if both:
            raise ValueError(f"input and output names must not overlap: {sorted(both)}")
        for c in self.constraints:
            try:
                pyast.parse(c, mode="eval")
            except SyntaxError as e:
                raise ValueError(f"constraint {c!r} is not a Python expression: {e}") from e
        for kind, tensors in (("input", self.inputs), ("output", self.outputs)):
            for tname, t in tensors.items():
                for ax in t.shape or []:
                    if ax not in self.axes:
                        raise ValueError(f'{kind} "{tname}" references undefined axis "{ax}"')
        return self

    @property
    def const_axes(self) -> dict[str, int]:
        return {k: a.value for k, a in self.axes.items() if isinstance(a, AxisConst)}

    @property
    def var_axes(self) -> list[str]:
        return [k for k, a in self.axes.items() if isinstance(a, AxisVar)]


# ---------------------------------------------------------------------------------------------- Workload

class RandomInput(_Model):
    """Inputs drawn at random by the benchmark."""

    type: Literal["random"] = "random"


class ScalarInput(_Model):
    """A Python scalar passed as is."""

    type: Literal["scalar"] = "scalar"
    value: Union[int, float, bool]


class SafetensorsInput(_Model):
    """A tensor stored in a safetensors file (path relative to the dataset root)."""

    type: Literal["safetensors"] = "safetensors"
    path: NonEmpty
    tensor_key: NonEmpty


InputSpec = Annotated[Union[Annotated[RandomInput, Tag("random")], Annotated[SafetensorsInput, Tag("safetensors")],
                            Annotated[ScalarInput, Tag("scalar")]], Discriminator(_tag("random"))]


class Workload(_Model):
    """Concrete values of the var axes and a source for every input."""

    axes: dict[str, NonNegative]
    inputs: dict[str, InputSpec]
    uuid: NonEmpty


# ---------------------------------------------------------------------------------------------- Solution

class SupportedLanguages(str, Enum):
    PYTHON = "python"
    TRITON = "triton"
    CPP = "cpp"
    CUDA = "cuda"
    TILELANG = "tilelang"


class SupportedBindings(str, Enum):
    TVM_FFI = "tvm-ffi"
    TORCH = "torch"


class SourceFile(_Model):
    """One file of a solution: a relative path without '..' and its full text."""

    path: NonEmpty
    content: NonEmpty

    @model_validator(mode="after")
    def _relative(self) -> "SourceFile":
        p = PurePosixPath(self.path)
        if p.is_absolute() or self.path.startswith("\\") or (len(self.path) > 1 and self.path[1] == ":"):
            raise ValueError(f"invalid source path (absolute path not allowed): {self.path}")
        if ".." in p.parts:
            raise ValueError(f"invalid source path (parent directory traversal not allowed): {self.path}")
        return self


class BuildSpec(_Model):
    """How to build and call a solution."""

    language: SupportedLanguages
    target_hardware: list[str] = Field(min_length=1)
    entry_point: NonEmpty
    """'<file path>::<function name>', e.g. 'main.py::run'."""
    dependencies: list[NonEmpty] = Field(default_factory=list)
    destination_passing_style: bool = True
    """True: the entry point receives the outputs as its last arguments; False: it returns them."""
    binding: Optional[SupportedBindings] = None

    @model_validator(mode="after")
    def _entry(self) -> "BuildSpec":
        if self.entry_point.count("::") != 1:
            raise ValueError(f"invalid entry point format: {self.entry_point}. "
                             f'Expected "<file_path>::<function_name>".')
        return self


class Solution(_Model):
    """An implementation of one Definition: sources plus the spec to build and call them."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    name: NonEmpty
    definition: NonEmpty
    author: NonEmpty
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: Optional[str] = None

    @model_validator(mode="after")
    def _entry_file(self) -> "Solution":
        paths = [s.path for s in self.sources]
        dup = sorted({p for p in paths if paths.count(p) > 1})
        if dup:
            raise ValueError(f"duplicate source path '{dup[0]}'")
        if self.entry_file not in paths:
            raise ValueError(f"entry source file '{self.entry_file}' not found in sources")
        return self

    @property
    def entry_file(self) -> str:
        return self.spec.entry_point.split("::")[0]

    @property
    def entry_symbol(self) -> str:
        return self.spec.entry_point.split("::")[-1]

    def entry_source(self) -> SourceFile:
        return next(s for s in self.sources if s.path == self.entry_file)


# ---------------------------------------------------------------------------------------------- Trace

class Correctness(_Model):
    """Largest errors against the reference over all outputs and checked inputs (NaN allowed)."""

    model_config = ConfigDict(use_attribute_docstrings=True, ser_json_inf_nan="strings")

    max_relative_error: float = 0.0
    max_absolute_error: float = 0.0
    extra: Optional[dict[str, Any]] = None

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative_or_nan(cls, v: float) -> float:
        if not math.isnan(v) and v < 0:
            raise ValueError("must be non-negative or NaN")
        return v


class Performance(_Model):
    latency_ms: float = Field(0.0, ge=0.0)
    reference_latency_ms: float = Field(0.0, ge=0.0)
    speedup_factor: float = Field(0.0, ge=0.0)
    """reference_latency_ms / latency_ms."""


class Environment(_Model):
    hardware: NonEmpty
    """E.g. 'NVIDIA_H100'."""
    libs: dict[str, str] = Field(default_factory=dict)
    """Library name -> version."""


class EvaluationStatus(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"


class Evaluation(_Model):
    """One solution on one workload. PASSED needs correctness and performance; INCORRECT_NUMERICAL needs
    correctness and no performance; every other status has neither."""

    status: EvaluationStatus
    environment: Environment
    timestamp: NonEmpty
    """ISO 8601."""
    log: str = ""
    correctness: Optional[Correctness] = None
    performance: Optional[Performance] = None

    @model_validator(mode="after")
    def _evidence(self) -> "Evaluation":
        s = self.status
        need_c = s in (EvaluationStatus.PASSED, EvaluationStatus.INCORRECT_NUMERICAL)
        need_p = s is EvaluationStatus.PASSED
        if need_c and self.correctness is None:
            raise ValueError(f"evaluation must include correctness when status is {s.value}")
        if not need_c and self.correctness is not None:
            raise ValueError(f"evaluation must not include correctness when status is {s.value}")
        if need_p and self.performance is None:
            raise ValueError(f"evaluation must include performance when status is {s.value}")
        if not need_p and self.performance is not None:
            raise ValueError(f"evaluation must not include performance when status is {s.value}")
        return self


class Trace(_Model):
    """A solution's evaluation on a workload; with solution and evaluation None, a workload entry."""

    definition: NonEmpty
    workload: Workload
    solution: Optional[str] = None
    evaluation: Optional[Evaluation] = None

    @property
    def is_workload_trace(self) -> bool:
        return self.solution is None and self.evaluation is None
