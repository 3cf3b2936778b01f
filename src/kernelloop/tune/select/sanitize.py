"""compute-sanitizer before a winner is confirmed or packaged (kernelloop.core.verify.sanitizer does the running).

A kernel can read past a tensor's end or race on shared memory and still match the reference on every test input.
So before the controller confirms a workload's winner, and before `kernelloop export` packages an entry's kernel,
the candidate runs under memcheck, racecheck, synccheck and initcheck on a small shape of the op's valid domain
(`small_workload`: the workload's axes scaled down, kept where the op's domain and the configuration's constraints
hold). The outcome is a typed `SanitizerOutcome`:

    findings   a REJECTED verdict naming the tool and its first finding, with the report: the candidate is not
               confirmed (the next fastest is tried, up to SANITIZE_TRIES of them) nor packaged
    clean      the tools looked and found nothing
    not_run    no compute-sanitizer, no CUDA, or Triton's interpreter: recorded with the reason, never a pass
    error      a tool's run failed otherwise (deadline, the candidate crashed without a report): no pass either
    off        --no-sanitize

Every outcome is archived as a `sanitize` event of the run (`kernelloop show` lists them); the confirmed winner's
is also in its `CrossProcessConfirmation.sanitizer`.
"""

from __future__ import annotations

from ...base.records.device import Device

from typing import Callable, Iterable

from ...base.records import Candidate, Trial, Workload
from ...base.records.confirm import SanitizerOutcome
from ...base.records.events import SanitizeEvent
from ...base.records.summary import SanitizerCheck
from ...core.verify.sanitizer import not_run_report, outcome, sanitize, small_workload
from ...core.verify.sanitizer_report import SanitizerReport

SANITIZE_EVENT = "sanitize"
SANITIZE_TRIES = 3            # candidates of one workload sanitized before its confirmation gives up
SANITIZE_DEADLINE_S = 300.0   # per tool
INTERPRETER_REASON = ("Triton's interpreter: compute-sanitizer checks compiled kernels on a CUDA device, and the "
                      "interpreter runs none")

Sanitizer = Callable[..., SanitizerReport]
"""`kernelloop.core.verify.sanitizer.sanitize`'s signature: (source, config, spec, workload, *, candidate_id,
deadline_s, ...) -> SanitizerReport."""


def _interpreter(source: str, config: dict, spec, workload: Workload, *, candidate_id: str | None = None,
                 seed: int = 0, **_) -> SanitizerReport:
    return not_run_report(candidate_id or "", f"{workload.label} seed {seed}", INTERPRETER_REASON)


def default_sanitizer(device) -> Sanitizer:
    """`sanitize` on a CUDA device (it reports not_run itself without the tool or CUDA); every tool not_run with
    the reason in Triton's interpreter."""
    return sanitize if Device.of(device).is_cuda else _interpreter


def accept_for(bundle, candidate: Candidate, workload: Workload, device):
    """Where a small shape may go: the op's domain and, for a template's own source, what pruning keeps for the
    candidate's configuration (as the verifier's held-out draws: `Evaluator.accept`)."""
    from ...core.device import device_properties
    from ...core.spec.loader import domain_constraints, in_domain
    from ...core.spec.space import why_pruned
    constraints, props = domain_constraints(bundle.spec), device_properties(device)
    t = next((t for t in bundle.spec.templates if t.name == candidate.template), None)
    own = t is not None and bundle.template_sources.get(candidate.template) == candidate.source

    def accept(axes: dict[str, int]) -> bool:
        if not in_domain(bundle.spec, axes, workload.dtype, constraints):
            return False
        if not own:
            return True
        try:
            return why_pruned(t, workload.model_copy(update={"axes": axes}), props, candidate.config) is None
        except (ValueError, KeyError, ZeroDivisionError):
            return False
    return accept


def sanitize_candidate(sanitizer: Sanitizer, bundle, candidate: Candidate, workload: Workload, accept=None,
                       deadline_s: float = SANITIZE_DEADLINE_S) -> SanitizerOutcome:
    """Run the tools over `candidate` on a small shape of `workload` (see `small_workload`)."""
    small = small_workload(bundle.spec, workload, accept, tuple(getattr(bundle, "fixed_axes", ())))
    try:
        report = sanitizer(candidate.source, dict(candidate.config), bundle.spec, small, candidate_id=candidate.id,
                           deadline_s=deadline_s)
    except (OSError, ValueError, RuntimeError) as e:   # the tool could not be started: no pass, and no finding
        return SanitizerOutcome(status="error", candidate_id=candidate.id, workload=dict(small.axes),
                                case=small.label, reason=f"compute-sanitizer could not run: {type(e).__name__}: {e}")
    return outcome(report, small)


def off(candidate: Candidate, reason: str = "--no-sanitize") -> SanitizerOutcome:
    return SanitizerOutcome(status="off", candidate_id=candidate.id, reason=reason)


def event_payload(stage: str, workload: Workload, candidate: Candidate, result: SanitizerOutcome,
                  trial: Trial | None = None) -> SanitizerCheck:
    """The archived `sanitize` event's payload: where it ran (confirm), the workload, the trial and the outcome."""
    return SanitizerCheck(stage=stage, workload_id=workload.id, label=workload.label, candidate=candidate.id,
                          candidate_label=candidate.label, **({"trial": trial.id} if trial is not None else {}),
                          **result.model_dump())


def rejected(archive, run_id: str) -> set[tuple[str, str]]:
    """(candidate id, workload id) of every candidate the run's compute-sanitizer reported findings for."""
    checks = [e.payload.model_dump() if isinstance(e.event, SanitizeEvent) else e.payload   # an older payload: as read
              for e in archive.event_records(run_id, SANITIZE_EVENT)]
    return {(c["candidate_id"], c["workload_id"]) for c in checks if c.get("status") == "findings"}


def without_rejected(trials: Iterable[Trial], rejected_pairs: set[tuple[str, str]]) -> list[Trial]:
    """The trials whose candidate compute-sanitizer did not reject on their workload."""
    return [t for t in trials if (t.candidate_id, t.workload_id) not in rejected_pairs]


__all__ = ["INTERPRETER_REASON", "accept_for", "SANITIZE_DEADLINE_S", "SANITIZE_EVENT", "SANITIZE_TRIES", "Sanitizer",
           "default_sanitizer", "event_payload", "off", "rejected", "sanitize_candidate", "without_rejected"]
