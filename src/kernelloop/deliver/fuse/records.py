"""The records of fusion discovery: a candidate's canonical signature, its occurrences, the saving estimate.

A *candidate* is one canonical subgraph (its `Signature`) together with every place it occurs in the model.
The signature is structural: the ATen ops in graph order, each operand named either as an input of the
subgraph (`in0`, `in1`, ...) or as an earlier step (`%2`), the non-tensor arguments, and each value's shape
written in symbols (`s0`, `s1`, ...: one symbol per distinct size above 1, in order of first appearance) with
its dtype. Occurrences bind the symbols to sizes; `constraints` lists the relations that hold in every one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...base.records.base import Record, content_hash

Family = Literal["gemm_gate", "gemm_epilogue", "residual_add_norm", "scale_mask_softmax", "rotary", "elementwise"]


class Step(Record):
    """One ATen op of the subgraph."""

    op: str = Field(description="The ATen overload, e.g. 'aten.linear.default'.")
    operands: list[str] = Field(description="Tensor operands in argument order: 'inN' (input N of the subgraph, "
                                            "'pN' when N is a parameter or buffer) or '%K' (the value of step K).")
    consts: list[str] = Field(default_factory=list, description="The non-tensor arguments as text, in order.")
    shape: list[str] = Field(description="The output's shape in symbols (sizes of 1 written as '1').")
    dtype: str = Field(description="The output's dtype without 'torch.', e.g. 'bfloat16'.")


class Signature(Record):
    """The canonical subgraph: what identical occurrences share."""

    family: Family = Field(description="The pattern family that matched.")
    steps: list[Step] = Field(description="The ops, in graph order.")
    inputs: list[list[str]] = Field(description="Shape (in symbols) of each input inN / pN, in operand order.")
    outputs: list[str] = Field(description="The steps whose values leave the subgraph ('%K'), in order.")
    symbols: list[str] = Field(description="The shape symbols, s0 first.")

    @property
    def key(self) -> str:
        return "sig-" + content_hash(self.model_dump(mode="json"))

    @property
    def op_sequence(self) -> list[str]:
        return [s.op for s in self.steps]


class Occurrence(Record):
    """One place the signature occurs."""

    nodes: list[str] = Field(description="FX node names of the steps, in step order.")
    module_paths: list[str] = Field(description="Innermost module paths of the steps (nn_module_stack), distinct, "
                                                "in order.")
    bindings: dict[str, int] = Field(description="Size of each symbol here.")
    saved_bytes: int = Field(ge=0, description="Bytes of intermediate traffic the fusion removes here.")
    intermediates: dict[str, int] = Field(description="Node name -> bytes of each value no longer round-tripped "
                                                      "through memory (x2: written and read back; x1 for a value "
                                                      "that still leaves the subgraph: its read-back only).")
    share: float | None = Field(None, ge=0, description="Share of the captured run's time (device time on CUDA, "
                                                        "ATen calls on CPU) the steps' cards measured; None without "
                                                        "a capture report.")


class Candidate(Record):
    """A fusion candidate: one signature, its occurrences, the estimated saving."""

    rank: int = Field(ge=1, description="1 is the most worth fusing.")
    signature: Signature
    constraints: list[str] = Field(description="Relations between symbols that hold in every occurrence, e.g. "
                                               "'s2 == s0*s1', 's3 % 16 == 0'.")
    occurrences: list[Occurrence] = Field(min_length=1)
    saved_bytes_per_occurrence: int = Field(ge=0, description="The largest per-occurrence saving.")
    saved_bytes_total: int = Field(ge=0, description="Summed over the occurrences.")
    share: float | None = Field(None, ge=0, description="Summed share of the occurrences; None without a report.")
    score: float = Field(ge=0, description="What the ranking sorts by: saved_bytes_total, times share when a "
                                           "capture report was given.")

    @property
    def family(self) -> str:
        return self.signature.family


class DiscoveryError(Record):
    """Why discovery could not run (the model did not export, bad input): stage and message, no traceback."""

    stage: Literal["input", "export", "discover"] = Field(description="Where it failed.")
    error_type: str = Field(description="The exception's class name.")
    message: str = Field(description="What went wrong, in one or a few lines.")


class DiscoveryReport(Record):
    """Everything one discovery found on one model."""

    model_class: str = Field(description="Qualified class name of the model.")
    torch_version: str
    graph_nodes: int = Field(ge=0, description="call_function nodes of the exported ATen graph.")
    weighted: bool = Field(False, description="Whether a capture report weighted the ranking.")
    candidates: list[Candidate] = Field(default_factory=list, description="Ranked, best first.")
    error: DiscoveryError | None = Field(None, description="Set when discovery failed; candidates then empty.")

    @property
    def ok(self) -> bool:
        return self.error is None

    def by_family(self, family: str) -> list[Candidate]:
        return [c for c in self.candidates if c.signature.family == family]
