"""`kernelloop submit`: compile -> verify -> benchmark (-> profile) of an agent's kernel, answered in JSON.

The submission runs through the same entry into the loop as `kernelloop optimize` (kernelloop.tune.loop.run) with a
one-shot proposer that hands it the submitted candidate for every workload of the workspace: the first submit
creates the run archive with its frozen manifest, every later one resumes it (the controller refuses when the
manifest changed). The same code path serves `--device interpret` and `--device cuda`; on CUDA, PASSED trials
are profiled with Nsight Compute when kernelloop.tune.profile and `ncu` are available.

A submission is either a Python module (judged as it is: a syntax error is a COMPILE_ERROR trial, archived)
or a KernelProposal JSON (validated first: an invalid proposal is answered with the validation error and
nothing runs). A module comes with one configuration (`config`) or a small space of them (`space`: parameter ->
values, every combination, `config` holding the fixed keys; at most MAX_CONFIGS), judged in one submission.
Submissions are serialized per run folder by a file lock.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ...core.archive import Archive
from ...core.execute.evaluate import Timeouts, derive_seed
from ...tune import loop
from ...tune.loop import Budget, RunOptions
from ...base.records import Candidate, Status, Trial, Workload
from ...core.verify.explain import failure_reason
from ...base.records.device import Device
from .answer import (AnswerCandidate, BestOnWorkload, ParentResult, StaticRuleHit, SubmitAnswer, WorkloadAnswer)
from .workspace import Workspace, WorkspaceError


class SubmissionError(ValueError):
    """The submission cannot be evaluated as given (unknown parent, invalid proposal, unreadable file)."""


class SubmissionProposer:
    """Hands the controller the submitted candidates, each once per workload (the Proposer protocol)."""

    def __init__(self, candidates: list[Candidate], name: str = "agent"):
        self.name = name
        self.candidates = list(candidates)
        self._next: dict[str, int] = {}
        self.trials: list[tuple[Candidate, Workload, Trial]] = []

    def size(self, workload: Workload) -> int | None:
        return len(self.candidates)

    def ask(self, workload: Workload) -> Candidate | None:
        k = self._next.get(workload.id, 0)
        if k >= len(self.candidates):
            return None
        self._next[workload.id] = k + 1
        return self.candidates[k]

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        self.trials.append((candidate, workload, trial))


@dataclass
class Submission:
    """What was submitted: code or a proposal, lineage, hypothesis, configuration."""

    source: str | None = None
    proposal: dict | None = None
    parent: str | None = None
    hypothesis: str = ""
    config: dict = field(default_factory=dict)
    space: dict | None = None
    agent: str = "agent"

    def configs(self) -> list[dict]:
        """The configurations of a module submission: `config`, or `config` merged into every combination of
        `space` (in the order given). A malformed space is a SubmissionError; nothing runs."""
        if not self.space:
            return [dict(self.config)]
        from ...tune.propose.proposal import MAX_CONFIGS
        if not isinstance(self.space, dict):
            raise SubmissionError("the space must be an object: parameter -> list of values")
        for name, values in self.space.items():
            if not isinstance(values, list) or not values:
                raise SubmissionError(f"space[{name!r}] must be a non-empty list of values")
            if any(isinstance(v, (dict, list)) or v is None for v in values):
                raise SubmissionError(f"space[{name!r}]: values must be numbers, strings or booleans")
        both = sorted(set(self.space) & set(self.config))
        if both:
            raise SubmissionError(f"{both} given both in the config and in the space")
        keys = list(self.space)
        combos = [{**self.config, **dict(zip(keys, vals))}
                  for vals in itertools.product(*(self.space[k] for k in keys))]
        if len(combos) > MAX_CONFIGS:
            raise SubmissionError(f"the space expands to {len(combos)} configurations; at most {MAX_CONFIGS} "
                                  f"per submission")
        return combos

    @classmethod
    def from_file(cls, path: str | Path, **kw) -> "Submission":
        p = Path(path)
        try:
            text = p.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise SubmissionError(f"cannot read {p}: {e}") from None
        if p.suffix == ".json":
            try:
                return cls(proposal=json.loads(text), **kw)
            except json.JSONDecodeError as e:
                raise SubmissionError(f"{p}: not valid JSON: {e}") from None
        return cls(source=text, **kw)


@contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".submit.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _known(run_dir: Path, ids: list[str]) -> dict[str, Candidate]:
    db = run_dir / "archive.sqlite"
    out: dict[str, Candidate] = {}
    if ids and db.is_file():
        with Archive(db) as a:
            for i in ids:
                c = a.get_candidate(i)
                if c is not None:
                    out[i] = c
    missing = [i for i in ids if i not in out]
    if missing:
        raise SubmissionError(f"unknown parent candidate(s) {missing}: a parent must be a candidate archived in this "
                              f"workspace's run (see `kernelloop agent status`)")
    return out


def candidates_of(sub: Submission, ws: Workspace, bundle, run_dir: Path) -> list[Candidate]:
    """The candidates a submission stands for, with lineage, proposer and hypothesis."""
    proposer = f"agent:{sub.agent}"
    if sub.proposal is not None:
        if sub.config or sub.space:
            raise SubmissionError("a proposal names its own configuration ('config' or 'space' in the JSON); "
                                  "--config/--space apply to a kernel module")
        from ...tune.propose.proposal import ProposalInvalid, materialize, parse_proposal
        value = dict(sub.proposal)
        if sub.parent and sub.parent not in value.get("parent_ids", []):
            value["parent_ids"] = [sub.parent, *value.get("parent_ids", [])]
        try:
            proposal = parse_proposal(value)
            parents = _known(run_dir, list(proposal.parent_ids))
            cands = materialize(proposal, bundle.spec, parents, proposer=proposer)
        except ProposalInvalid as e:
            raise SubmissionError(f"invalid proposal: {e}") from None
        if sub.hypothesis:
            cands = [c.model_copy(update={"hypothesis": sub.hypothesis}) for c in cands]
        return [c.model_copy(update={"template": _template_name(bundle, c)}) for c in cands]
    if not sub.source or not sub.source.strip():
        raise SubmissionError("the submitted source is empty")
    configs = sub.configs()
    parents = [sub.parent] if sub.parent else []
    _known(run_dir, parents)
    cands = [Candidate(op=bundle.spec.name, template="custom", source=sub.source, config=cfg,
                       parent_ids=parents, proposer=proposer, hypothesis=sub.hypothesis) for cfg in configs]
    return [c.model_copy(update={"template": _template_name(bundle, c)}) for c in cands]


def _template_name(bundle, cand: Candidate) -> str:
    """The op template whose source the candidate's is, byte for byte; else the candidate's own label."""
    return next((name for name, src in bundle.template_sources.items() if src == cand.source), cand.template)


def submit(workspace: str | Path, sub: Submission, *, device: str | None = None, confirm: bool = False,
           timeouts: Timeouts | None = None, profile: bool = True) -> dict:
    """Evaluate a submission on every workload of the workspace; the answer's JSON (`SubmitAnswer.as_json`: what
    `kernelloop submit` prints and the MCP tools return)."""
    return evaluate(workspace, sub, device=device, confirm=confirm, timeouts=timeouts, profile=profile).as_json()


def evaluate(workspace: str | Path, sub: Submission, *, device: str | None = None, confirm: bool = False,
             timeouts: Timeouts | None = None, profile: bool = True) -> SubmitAnswer:
    """Evaluate a submission on every workload of the workspace; the answer record."""
    ws = Workspace.load(workspace)
    device = device or ws.device
    if Device.of(device).is_cuda:
        from ...core.device import cuda_available
        if not cuda_available():
            raise WorkspaceError("--device cuda: no CUDA device is available here")
    bundle = ws.bundle()
    run_dir = ws.run_dir(device)
    with _locked(run_dir):
        cands = candidates_of(sub, ws, bundle, run_dir)
        db = run_dir / "archive.sqlite"
        resume = db.is_file() and _has_run(db)
        options = RunOptions(device=device, budget=Budget.unlimited(), checks=ws.checks, confirm=confirm,
                             timeouts=timeouts or Timeouts())
        proposer = SubmissionProposer(cands, name=f"agent:{sub.agent}")
        started = time.time()
        run_id = loop.run(bundle, ws.workloads, options, run_dir, resume=resume, proposer=proposer).run_id
        with Archive(db) as archive:
            profiles = _profile(archive, run_dir, bundle, proposer.trials) if (profile and Device.of(device).is_cuda) else {}
            answer = verdict(archive, ws, run_id, device, proposer.trials, profiles)
    # the same code and config was judged before
    results = [_with(r, previously_archived=t.started < started)
               for r, (_, _, t) in zip(answer.results, proposer.trials)]
    return answer.model_copy(update={"results": results})


def _has_run(db: Path) -> bool:
    with Archive(db) as a:
        return bool(a.runs())


def _profile(archive: Archive, run_dir: Path, bundle, trials) -> dict[str, dict]:
    """Nsight Compute reports of the PASSED trials, when the profiler is importable and ncu is installed."""
    try:
        from ...tune.profile.ncu_report_adapter import find_ncu
        from ...tune.profile.report import profile_trial
    except ImportError as e:
        return {t.id: {"status": "unavailable", "note": f"kernelloop.tune.profile not importable: {e}"}
                for _, _, t in trials}
    if find_ncu() is None:
        return {t.id: {"status": "unavailable", "note": "ncu not found ($KERNELLOOP_NCU, PATH)"} for _, _, t in trials}
    out = {}
    for cand, w, t in trials:
        if t.verdict.status is not Status.PASSED or archive.profile(t.run_id, t.id) is not None:
            continue
        src = run_dir / "sources" / f"{cand.id}.py"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(cand.source)
        try:
            report = profile_trial(archive, run_dir, t, op_dir=bundle.folder, source_file=src, config=cand.config,
                                   workload=w, spec=bundle.spec, seed=derive_seed("profile", t.id))
            out[t.id] = {"status": "ok", "report": report.model_dump(mode="json")}
        except Exception as e:  # noqa: BLE001 - a profiler failure is a note on the verdict, never a crash
            out[t.id] = {"status": "failed", "note": f"{type(e).__name__}: {e}"[:1000]}
    return out


def trial_result(archive: Archive, run_id: str, cand: Candidate, w: Workload, t: Trial) -> WorkloadAnswer:
    """One workload's part of the verdict: status with its evidence, or the measurement and its context."""
    from ...base.records.summary import MeasurementSummary
    v = t.verdict
    build = t.build
    if build is not None and getattr(build, "log", None):
        build = build.model_copy(update={"log": build.log[-4000:]})
    fields = dict(workload=w.label, workload_id=w.id, candidate=cand.id, label=cand.label, trial=t.id, index=t.index,
                  status=v.status, message=v.message, build=build,
                  measurement=MeasurementSummary.of(t.measurement) if t.measurement is not None else None,
                  costs=t.costs)
    if v.status is not Status.PASSED:   # a passing verdict's cases stay the verifier's
        # the trial as the controller told it to the proposer: no seeds, a held-out case by its class only
        fields.update(reason=failure_reason(v), failing_case=v.case, error_metrics=list(v.metrics),
                      log_tail=v.log[-4000:])
    front = [cid for cid, _ in archive.front(run_id, w.id)]
    fields["on_front"] = cand.id in front
    passed = [x for x in archive.trials(run_id, w.id, Status.PASSED) if x.measurement is not None]
    if passed and t.measurement is not None:
        best = min(passed, key=lambda x: x.measurement.kernel.median_us)
        fields["best_on_workload"] = BestOnWorkload(candidate=best.candidate_id,
                                                    kernel_us=best.measurement.kernel.median_us,
                                                    is_this=best.id == t.id)
    parents = [p for p in (_parent(archive, run_id, pid, w, t) for pid in cand.parent_ids) if p is not None]
    if parents:
        fields["parents"] = parents
    return WorkloadAnswer(**fields)


def _parent(archive: Archive, run_id: str, pid: str, w: Workload, t: Trial) -> ParentResult | None:
    """The parent's trial on the workload, with the speedup when both were timed."""
    pt = archive.find_trial(run_id, pid, w.id)
    if pt is None:
        return None
    entry = dict(candidate=pid, status=pt.verdict.status,
                 kernel_us=pt.measurement.kernel.median_us if pt.measurement else None)
    if pt.measurement is not None and t.measurement is not None:
        entry["speedup_over_parent"] = pt.measurement.kernel.median_us / t.measurement.kernel.median_us
    return ParentResult(**entry)


STATIC_STAGE = "static rules, before any call"   # the case of a trial the source rules rejected (evaluate.py)


def static_rule_hits(cand: Candidate, spec) -> list[StaticRuleHit]:
    """Every static rule the candidate's source breaks: rule, line, the offending source line, why."""
    from ...core.verify.rules import check_source
    return [StaticRuleHit(rule=h.rule, line=h.line, source=h.snippet, why=h.rationale,
                          **({"detail": h.detail} if h.detail else {})) for h in check_source(cand.source, spec)]


def verdict(archive: Archive, ws: Workspace, run_id: str, device: str, trials, profiles: dict) -> SubmitAnswer:
    """The answer of a submission. A candidate the static rules rejected lists every hit once, under its entry in
    `candidates` (`static_rules`); its per-workload results point there instead of repeating them."""
    results, rejected = [], set()
    for cand, w, t in trials:
        r = trial_result(archive, run_id, cand, w, t)
        if t.verdict.status is Status.REJECTED and t.verdict.case.endswith(STATIC_STAGE):
            rejected.add(cand.id)
            r = r.model_copy(update=dict(
                message="rejected by the static source rules before any call: every hit is listed once under "
                        "candidates[].static_rules", log_tail=""))
        if Device.of(device).is_cuda:
            r = _with(r, profile=profiles.get(t.id, {"status": "not profiled"}))
        results.append(r)
    failing = next((r.status for r in results if r.status is not Status.PASSED), None)
    cands = {c.id: c for c, _, _ in trials}
    spec = ws.bundle().spec if rejected else None
    return SubmitAnswer(
        workspace=str(ws.root), run=run_id, device=device, interpreter=not Device.of(device).is_cuda,
        verdict=failing or Status.PASSED,
        candidates=[AnswerCandidate(id=c.id, label=c.label, template=c.template, config=c.config,
                                    parent_ids=c.parent_ids, proposer=c.proposer, hypothesis=c.hypothesis,
                                    **({"static_rules": static_rule_hits(c, spec)} if c.id in rejected else {}))
                    for c in cands.values()],
        results=results)


def _with(record, **update):
    """A copy of the record with these fields set (and so present in its JSON)."""
    return type(record).model_validate({**{k: getattr(record, k) for k in record.model_fields_set}, **update})


__all__ = ["Submission", "SubmissionError", "SubmissionProposer", "candidates_of", "evaluate", "static_rule_hits", "submit",
           "trial_result", "verdict"]
