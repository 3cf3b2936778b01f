"""The nouns of kernelloop: frozen pydantic records with JSON round-trip and content-hashed ids."""

from .base import Record, canonical_json, content_hash, sha256_hex
from .build import BuildArtifact, BuildFailure, BuildStepRecord, BuildUsage, Built
from .candidate import Candidate
from .measurement import Comparison, Measurement, Ratio, Stats, TimingPolicy
from .spec import Axis, Constraint, DType, InputPolicy, OpSpec, ParamSpace, ScratchSpec, TemplateSpec, TensorSpec, Tolerance, Workload
from .spec import check_expression, evaluate_expression, ordered_axes
from .trial import Costs, Environment, Trial
from .verdict import ErrorMetrics, Status, Verdict

__all__ = [
    "Axis", "BuildArtifact", "BuildFailure", "BuildStepRecord", "BuildUsage", "Built", "Candidate", "Comparison", "Constraint", "Costs", "DType",
    "Environment", "ErrorMetrics", "InputPolicy", "Measurement", "OpSpec", "ParamSpace", "Ratio", "Record",
    "ScratchSpec", "Stats", "Status", "TemplateSpec", "TensorSpec", "TimingPolicy", "Tolerance", "Trial", "Verdict",
    "Workload", "canonical_json", "content_hash", "sha256_hex", "ordered_axes",
]
from .profile import BottleneckClass, BuildResources, Ceilings, Classification, Direction, EvidenceItem, Hypothesis, HypothesisOutcome, KernelProfile, KernelShare, ProfileAggregate, ProfileReport, Roofline, RooflineAgreement, RuleHit, ceilings_key; __all__ += ["BottleneckClass", "BuildResources", "Ceilings", "Classification", "Direction", "EvidenceItem", "Hypothesis", "HypothesisOutcome", "KernelProfile", "KernelShare", "ProfileAggregate", "ProfileReport", "Roofline", "RooflineAgreement", "RuleHit", "ceilings_key"]  # noqa: E402,E501 - issue 4 (profile records)
from .rules import StaticRuleHit; __all__ += ["StaticRuleHit"]  # noqa: E402 - issue 3 (static source rules)
from .device import Device; __all__ += ["Device"]  # noqa: E402 - where candidates run
from .run import DeviceBusy, RunResult, RunStatus, StopReason, Throughput, WorkloadResult; __all__ += ["DeviceBusy", "RunResult", "RunStatus", "StopReason", "Throughput", "WorkloadResult"]  # noqa: E402,E501 - what Controller.run returns
from .allow import DEFAULT_CODE_POLICY, CodePolicy; __all__ += ["CodePolicy", "DEFAULT_CODE_POLICY"]
from .generators import CsrColIdxInit, CsrRowPtrInit, HELDOUT_PATTERNS, IndexInit, MaskInit, PATTERNS; __all__ += ["CsrColIdxInit", "CsrRowPtrInit", "HELDOUT_PATTERNS", "IndexInit", "MaskInit", "PATTERNS"]  # noqa: E402,E501 - integer and bool inputs
from .generators import BIN_HELDOUT_PATTERNS, BIN_PATTERNS, BinsInit; __all__ += ["BIN_HELDOUT_PATTERNS", "BIN_PATTERNS", "BinsInit"]  # noqa: E402,E501 - histogram values
