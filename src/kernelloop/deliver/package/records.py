"""The records a package is made of: its manifest (hashes, provenance, environment) and its audit trail."""

from __future__ import annotations

from pydantic import Field

from ...base.records import Record
from ...base.records.confirm import SanitizerOutcome

FORMAT_VERSION = 1
MANIFEST_FILE = "kernelloop-package.json"


class MeasuredOn(Record):
    """Where an op's numbers were measured (the run's environment)."""

    device: str = Field(description="'cuda' or 'interpret'.")
    arch: str = Field(description="'sm_90', ... or 'interpret'.")
    gpu: str = Field("", description="GPU name; empty in the interpreter.")
    driver: str = Field("", description="Driver version.")
    torch: str = Field(description="torch version of the run.")
    triton: str = Field(description="Triton version of the run.")


class PackagedOp(Record):
    """One op of the package and the run it came from."""

    op: str = Field(description="Op name.")
    run_id: str = Field(description="The run whose trials the entries come from.")
    manifest_hash: str = Field(description="That run's frozen manifest hash (reference, verifier, policy, env).")
    measured_on: MeasuredOn = Field(description="The run's environment.")
    entries: int = Field(ge=0, description="Dispatch entries.")
    archive_commitment: str = Field("", description="The run's archive commitment at export: 'hmac-sha256-v1:' and "
                                                    "a sha256 over the MACs of its run and trial rows (archive/"
                                                    "integrity.py), or 'unauthenticated:'/'unverifiable:' and a "
                                                    "sha256 of its trials when exported with the opt-in.")


class PackageManifest(Record):
    """`kernelloop-package.json`: what is in the package and the sha256 of every other file in it."""

    format: int = Field(FORMAT_VERSION, description="Package format version.")
    name: str = Field(description="Package name.")
    version: str = Field(description="Package version (the user's).")
    created: float = Field(description="Unix time of the export.")
    kernelloop: str = Field(description="kernelloop version that exported it.")
    ops: list[PackagedOp] = Field(min_length=1, description="The packaged ops.")
    files: dict[str, str] = Field(description="Path inside the package → sha256 of its bytes (every file but "
                                              "this one).")


class TrialRecord(Record):
    """A trial behind an entry, as the run archived it."""

    trial_id: str
    workload: dict[str, int] = Field(description="Axis values.")
    dtype: str
    status: str = Field(description="Verdict status.")
    kernel_us: float | None = Field(None, description="Search-trial kernel median (µs).")
    confirmed_us: float | None = Field(None, description="Confirmation kernel median beside the baselines (µs).")
    baselines: dict[str, float | None] = Field(default_factory=dict,
                                               description="Confirmation: baseline name → kernel median (µs).")


class ExportCheck(Record):
    """One verification the export ran on a shape the run did not measure."""

    entry_range: str
    axes: dict[str, int]
    status: str
    message: str = ""
    case: str = ""


class SanitizerAudit(SanitizerOutcome):
    """compute-sanitizer over a winner's kernel on a small shape (tune/select/sanitize.py): at export (`stage` export:
    findings leave the winner out), or the run's own before its confirmation (`stage` confirm: a winner it
    rejected was replaced by the run's next fastest)."""

    stage: str = Field(description="export or confirm.")
    label: str = Field(description="The winner's workload label (the small shape is `workload` / `case`).")
    candidate_label: str = ""


class AuditTrail(Record):
    """`audit/<op>.json`: the evidence behind every entry."""

    op: str
    run_id: str
    entries: dict[str, list[TrialRecord]] = Field(description="Entry id → the trials of its candidate in the run.")
    export_checks: list[ExportCheck] = Field(default_factory=list,
                                             description="Verifications run at export (edges, tile boundaries, "
                                                         "interior points); a failure shrank its range.")
    secret_commitment: str = Field("", description="sha256 of the export verifier's secret (the secret itself is "
                                                   "discarded).")
    left_out: list[str] = Field(default_factory=list, description="Winners not packaged, and why (on a GPU: "
                                                                  "measured slower than eager; compute-sanitizer's "
                                                                  "findings).")
    sanitizer: list[SanitizerAudit] = Field(
        default_factory=list, description="compute-sanitizer over each packaged winner's kernel (clean, findings "
                                          "with the tool's report, not_run or error with the reason, off), and the "
                                          "run's rejections before confirmation.")
