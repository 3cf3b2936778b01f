"""After the search: each workload's front, then its winner sanitized on a small shape and confirmed beside every
baseline, interleaved, in fresh worker processes (tune/select/pareto.py, tune/select/sanitize.py, tune/select/confirm.py)."""

from __future__ import annotations

import ast
import shutil
from typing import Callable

from ...core.archive import Archive
from ...core.execute.evaluate import Evaluator
from ...base.records import Trial, Workload
from ...base.records.events import ConfirmFailedEvent, ConfirmFailedPayload, SanitizeEvent
from ..select.confirm import ConfirmFailure, confirm_across_processes, timed_check
from ..select.pareto import best_per_workload, front_for_workload
from ..select.sanitize import (SANITIZE_TRIES, Sanitizer, default_sanitizer, event_payload, off,
                               rejected, sanitize_candidate, without_rejected)
from ...core.spec import OpBundle
from ...base import pyast

CUDA_BASELINES = ["eager", "torch.compile", "copy"]  # plus the names in the op's baselines.py
INTERPRET_BASELINES = ["eager", "copy"]
OWN_SUBJECTS = ("eager", "copy", "copy-kernel")   # subjects of our own; other baselines are libraries


def op_baseline_names(bundle: OpBundle) -> list[str]:
    """Keys of the op's `BASELINES` table in baselines.py, read without importing it."""
    path = bundle.folder / "baselines.py"
    if not path.is_file():
        return []
    for node in pyast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "BASELINES" and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def confirmation_baselines(bundle: OpBundle, device, chosen: list[str] | None) -> list[str]:
    """The baselines a winner is confirmed beside: the chosen ones, else every one the device has."""
    if chosen:
        return chosen
    if device.is_cuda:
        return [*CUDA_BASELINES[:-1], *op_baseline_names(bundle), CUDA_BASELINES[-1]]
    return INTERPRET_BASELINES


def store_fronts(archive: Archive, run_id: str, workloads: list[Workload]) -> None:
    trials = archive.trials(run_id)
    for w in workloads:
        archive.set_front(run_id, w.id, front_for_workload(trials, w.id))


class Confirmation:
    """Sanitizes and confirms each workload's winner with one evaluator (its worker restarted per process)."""

    def __init__(self, archive: Archive, run_id: str, bundle: OpBundle, evaluator: Evaluator, policy,
                 baselines: list[str], sanitize: bool, sanitizer: Sanitizer | None, note: Callable[[str], None]):
        self.archive, self.run_id, self.bundle, self.evaluator = archive, run_id, bundle, evaluator
        self.policy, self.baselines, self.sanitize, self.sanitizer, self.note = (policy, baselines, sanitize,
                                                                                 sanitizer, note)

    def confirm(self, workloads: list[Workload]) -> None:
        """Sanitize each workload's winner on a small shape, then re-measure it beside every baseline."""
        archive, run_id, evaluator, baselines = self.archive, self.run_id, self.evaluator, self.baselines
        trials = archive.trials(run_id)
        done = archive.finals(run_id)
        for w in workloads:
            if w.id in done:
                continue
            picked = self.sanitized_winner(trials, w)
            if picked is None:
                continue
            cand, sanitized, passed_over = picked
            if evaluator.load(cand) is not None:
                continue
            job_dir = evaluator.worker.work_dir / f"confirm-{cand.id}-{w.id}"
            check = timed_check(archive, evaluator, run_id, cand, w, libraries=any(b not in OWN_SUBJECTS
                                                                                   for b in baselines))
            try:   # in CONFIRM_PROCESSES fresh workers; the stated interval covers their spread (tune/select/confirm.py)
                runs, notes, stated = confirm_across_processes(evaluator, cand, w, ["candidate", *baselines],
                                                               self.policy, job_dir, check)
            except ConfirmFailure as e:
                archive.log_event(run_id, ConfirmFailedEvent(payload=ConfirmFailedPayload(
                    workload=w.id, candidate=cand.id, status=e.status, error=e.error, process=e.process)))
                continue
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
            ms = runs[0]
            archive.put_final(run_id, w.id, cand.id, ms["candidate"])
            archive.put_confirmation(run_id, stated.model_copy(update={"sanitizer": sanitized,
                                                                       "sanitizer_rejected": passed_over}))
            for name in baselines:
                archive.put_baseline(run_id, w.id, name, ms.get(name), notes.get(name, ""))
            self.note(f"confirmed {w.label}")

    def sanitized_winner(self, trials: list[Trial], w: Workload):
        """(candidate, its SanitizerOutcome, the faster candidates rejected) of the workload's fastest PASSED trial
        that compute-sanitizer does not reject; None when there is none. Each candidate's outcome is archived as a
        `sanitize` event (a resumed run reads the rejections back and does not sanitize them again); a finding
        takes the next fastest, up to SANITIZE_TRIES candidates. not_run, error and off do not stop the
        confirmation, and none of them is a pass."""
        archive, run_id = self.archive, self.run_id
        gone = {c for c, wid in rejected(archive, run_id) if wid == w.id}
        mine = [t for t in trials if t.workload_id == w.id]
        for attempt in range(SANITIZE_TRIES + 1):
            best = best_per_workload(without_rejected(mine, {(c, w.id) for c in gone})).get(w.id)
            if best is None:
                if gone:
                    archive.log_event(run_id, ConfirmFailedEvent(payload=ConfirmFailedPayload(
                        workload=w.id, candidate=None, status="sanitizer", process=None,
                        error=f"compute-sanitizer rejected every PASSED candidate it ran over "
                              f"({len(gone)}): nothing left to confirm")))
                return None
            cand = archive.get_candidate(best.candidate_id)
            if not self.sanitize:
                return cand, off(cand), sorted(gone)
            if attempt == SANITIZE_TRIES:
                archive.log_event(run_id, ConfirmFailedEvent(payload=ConfirmFailedPayload(
                    workload=w.id, candidate=cand.id, status="sanitizer", process=None,
                    error=f"compute-sanitizer rejected the {SANITIZE_TRIES} fastest candidates; the next one is "
                          f"left unconfirmed")))
                return None
            self.note(f"compute-sanitizer over {w.label} {cand.label}")
            sanitizer = self.sanitizer or default_sanitizer(self.evaluator.device)
            result = sanitize_candidate(sanitizer, self.bundle, cand, w, self.evaluator.accept(cand, w))
            archive.log_event(run_id, SanitizeEvent(payload=event_payload("confirm", w, cand, result, best)))
            if result.status != "findings":
                return cand, result, sorted(gone)
            gone.add(cand.id)
        return None
