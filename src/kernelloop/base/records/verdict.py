"""Verdict: the controller's judgement of one candidate on one workload, with required evidence."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, model_validator

from .base import Record


class Status(str, Enum):
    """Outcome of verification. Only PASSED candidates are timed."""

    PASSED = "PASSED"
    COMPILE_ERROR = "COMPILE_ERROR"
    WRONG_SHAPE = "WRONG_SHAPE"          # output shape/dtype/type differs from the spec
    WRONG_VALUES = "WRONG_VALUES"        # outside tolerance against the reference
    WRONG_NONFINITE = "WRONG_NONFINITE"  # NaN/Inf where the reference is finite
    WRONG_INCOMPLETE = "WRONG_INCOMPLETE"  # poisoned output elements left unwritten
    WRONG_INPUT_MUTATED = "WRONG_INPUT_MUTATED"  # an input changed during the call
    WRONG_NONDETERMINISTIC = "WRONG_NONDETERMINISTIC"  # repeated runs on the same inputs differ
    RUNTIME_ERROR = "RUNTIME_ERROR"      # raised, crashed, illegal memory access, worker died
    TIMEOUT = "TIMEOUT"                  # the job exceeded its deadline
    REJECTED = "REJECTED"                # a rule forbids it (physical floor, static rules)
    TAMPERED = "TAMPERED"                # never a verifier's: an archive row that fails its MAC (archive/integrity)

    @property
    def is_wrong(self) -> bool:
        return self.value.startswith("WRONG_")


class ErrorMetrics(Record):
    """Error of one output against the reference."""

    output: str = Field(description="Output tensor name.")
    max_abs: float = Field(description="Largest |out - ref|.")
    max_rel: float = Field(description="Largest |out - ref| / max(|ref|, tiny).")
    mismatched: int = Field(ge=0, description="Elements outside tolerance.")
    total: int = Field(ge=0, description="Elements compared.")
    matched_ratio: float = Field(1.0, ge=0, le=1, description="Share of elements within tolerance.")
    error_cap_ratio: float = Field(0.0, ge=0, description="Largest |out-ref| / (atol + rtol*|ref|).")
    worst_index: list[int] = Field(default_factory=list, description="Index of the worst element.")


class Verdict(Record):
    """Status plus the evidence its status requires."""

    status: Status = Field(description="Outcome.")
    message: str = Field("", description="Human-readable reason.")
    case: str = Field("", description="Failing case: workload label and input seed.")
    metrics: list[ErrorMetrics] = Field(default_factory=list, description="Error metrics per output.")
    log: str = Field("", description="Traceback, compiler log or worker exit information.")

    @model_validator(mode="after")
    def _evidence(self) -> "Verdict":
        s = self.status
        if s is Status.WRONG_VALUES and not self.metrics:
            raise ValueError("WRONG_VALUES requires error metrics")
        if s.is_wrong and not self.case:
            raise ValueError(f"{s.value} requires the failing case")
        if s in (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.COMPILE_ERROR, Status.REJECTED) and not self.message:
            raise ValueError(f"{s.value} requires a message")
        return self
