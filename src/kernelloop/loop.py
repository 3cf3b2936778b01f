"""The controller: freeze, evaluate, archive, select, confirm. Reads like DESIGN.md's loop.

    freeze(reference, verifier, workloads, environment)    -> manifest, hash checked before every evaluation
    for each workload: prune(space)                         -> counted reasons, archived as an event
    while budget left (round-robin over workloads):
        config  = strategy.ask()                            -> a trial already in the archive is replayed
        result  = evaluate(candidate, workload)             -> build, verdict, measurement (PASSED only)
        archive(trial)
        evidence (proposers that plan from it, PASSED only) -> profile or timing report, archived
        strategy.tell(config, kernel time)
    front per workload; compute-sanitizer over each winner on a small shape (findings: REJECTED, the next
    fastest is taken); confirm each winner against every baseline, interleaved
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from pydantic import Field

from .archive import Archive
from .bench.policy import policies_for
from .device import device_properties, environment
from .execute import keys
from .execute.evaluate import Evaluator, Timeouts, derive_seed
from .execute.pool import Worker, job_root
from .manifest import build_manifest, check_unchanged, manifest_hash
from .records import Candidate, Record, Status, Trial, Workload, content_hash
from .records.run import RunResult, WorkloadResult
from .replay.prior import prior_files, read_prior
from .report.throughput import SESSION_EVENT, throughput
from .search import DEFAULT_STRATEGY, STRATEGIES, make_strategy, takes_prior
from .search.budget import GpuBudget, Screening
from .search.history import TransferPrior
from .select.confirm import ConfirmFailure, confirm_across_processes, timed_check
from .select.pareto import best_per_workload, front_for_workload
from .select.sanitize import (SANITIZE_EVENT, SANITIZE_TRIES, Sanitizer, default_sanitizer, event_payload, off,
                              rejected, sanitize_candidate, without_rejected)
from .spec import OpBundle
from .spec.space import selected_space
from .verify.explain import failure_reason, failures_by_trial, proposer_trial

CUDA_BASELINES = ["eager", "torch.compile", "copy"]  # plus the names in the op's baselines.py
INTERPRET_BASELINES = ["eager", "copy"]
OWN_SUBJECTS = ("eager", "copy", "copy-kernel")   # subjects of our own; other baselines are libraries
PLANNER = "planner"   # `--strategy planner`: the rule planner proposes (kernelloop.propose.planner_proposer)


def strategy_names() -> list[str]:
    """Every `--strategy` choice: the ask/tell search strategies and the rule planner."""
    return sorted([*STRATEGIES, PLANNER])


def op_baseline_names(bundle: OpBundle) -> list[str]:
    """Keys of the op's `BASELINES` table in baselines.py, read without importing it."""
    import ast
    path = bundle.folder / "baselines.py"
    if not path.is_file():
        return []
    for node in ast.parse(path.read_text()).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "BASELINES" and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


OPTIONS_FORMAT = 2   # archived options: 2 = every RunOptions field; 1 (unmarked): the old as_dict
RUN_KEYS = ("key", "secret", "workloads", "options_format")   # archived beside the options, not options
AS_BEFORE = ("start", "templates", "fixed", "baselines", "prior")   # None on resume: the archived value


class RunOptions(Record):
    """The options of a run: one record, archived whole when the run is created (`archived`) and read back whole
    with `model_validate` on resume (`from_archived`); `resumed` says which fields a resuming invocation sets."""

    device: str
    budget_evals: int | None = 24          # per workload
    budget_seconds: float | None = None    # whole run (this invocation)
    budget_gpu_seconds: float | None = None  # whole run: compile + verify + timing seconds of its trials
    screen_samples: int | None = None      # time candidates the model ranks poorly with this many samples first;
                                           # full timing only when successive halving promotes (search/budget.py)
    strategy: str = DEFAULT_STRATEGY
    seed: int = 0
    checks: int = 2
    confirm: bool = True
    sanitize: bool = True                  # compute-sanitizer over each winner before its confirmation
    baselines: list[str] | None = None
    static_rules: bool = True              # source rules screen every candidate before it runs
    timeouts: Timeouts = Field(default_factory=Timeouts)
    start: dict[str, str] | None = None    # planner: first configuration ("NAME": "VALUE"), see spec.start
    profile_timeout_s: float = 300.0       # planner: deadline of one Nsight Compute run
    templates: list[str] | None = None     # search only these templates of the spec (None: all)
    fixed: dict[str, str] | None = None    # pin parameters (NAME: value text): only templates having them, only
                                           # configurations with these values
    prior: dict | None = None              # staged: warm start from recordings, RecordedPrior.as_dict() (files:
                                           # path and sha256 each; configurations), see kernelloop.replay.prior

    def as_dict(self) -> dict:
        """Every field as JSON (timeouts as {"check", "bench"})."""
        return self.model_dump(mode="json")

    def archived(self, key: dict, workloads: list[Workload]) -> dict:
        """What the archive's `options_json` holds: every field, the run key's record and the workloads."""
        return {**self.as_dict(), "options_format": OPTIONS_FORMAT, "key": key,
                "workloads": [w.model_dump(mode="json") for w in workloads]}

    @classmethod
    def from_archived(cls, stored: dict) -> "RunOptions":
        """The record archived by `archived` (or, unmarked, by the old `as_dict`, whose absent fields were
        defaults or None), validated whole: an unknown key is an error, not dropped."""
        return cls.model_validate({k: v for k, v in stored.items() if k not in RUN_KEYS})

    def resumed(self, stored: "RunOptions") -> "RunOptions":
        """The options a resumed run goes on with: the archived record with this invocation's fields over it, except
        the AS_BEFORE fields this invocation leaves None (the same first ask, space, pins, confirmation and warm
        start as before). A prior that differs from the archived one is refused by the controller."""
        return stored.model_copy(update={k: getattr(self, k) for k in type(self).model_fields
                                         if k not in AS_BEFORE or getattr(self, k) is not None})


@dataclass
class Progress:
    done: int = 0
    total: int = 0
    passed: int = 0
    replayed: int = 0
    best_us: dict[str, float] = field(default_factory=dict)
    last: str = ""


class Proposer(Protocol):
    """What the controller asks for candidates: search over templates, a rule planner, an LLM, an agent.

    A proposer only submits candidates; it never sees the verifier, the timer or the archive. `tell` hands it
    the archived trial (verdict, measurement, build) so it can learn.

    A proposer that plans from evidence (the rule planner) also has `wants_evidence = True`,
    `evidence_request(candidate, workload) -> kernelloop.profile.evidence.EvidenceRequest` (what it predicted)
    and `give_evidence(candidate, workload, report)`: after a PASSED trial the controller's evidence source
    builds and archives a ProfileReport and hands it over before `tell`.
    """

    name: str

    def size(self, workload: Workload) -> int | None:
        """How many candidates it can ever propose for the workload (None = unbounded)."""

    def ask(self, workload: Workload) -> Candidate | None:
        """The next candidate for the workload, or None when it has nothing more."""

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        """The outcome of a candidate it proposed."""


def trial_value(trial: Trial) -> float | None:
    """The search objective: kernel median in µs of a PASSED, measured trial; None otherwise."""
    if trial.verdict.status is Status.PASSED and trial.measurement is not None:
        return trial.measurement.kernel.median_us
    return None


class TemplateSearch:
    """Proposes template configurations from each workload's pruned space through an ask/tell strategy."""

    def __init__(self, bundle: OpBundle, spaces: dict[str, list[dict]], strategy: str, seed: int,
                 prior: TransferPrior | None = None, shapes: dict[str, tuple[dict, str]] | None = None):
        """`prior` warm-starts each workload's search from the recorded workload nearest to it (the same one when
        recorded; by `shapes`, each workload's axes and dtype, otherwise): `TransferPrior.for_workload`."""
        self.bundle = bundle
        self.spaces = spaces
        self.name = f"search:{strategy}"
        self.strategies = {}
        for wid, space in spaces.items():
            options = {}
            if prior is not None:
                options = {"prior": prior.for_workload(wid, *(shapes or {}).get(wid, (None, None)))}
            self.strategies[wid] = make_strategy(strategy, space, derive_seed(seed, wid), **options)
        self._configs: dict[tuple[str, str], dict] = {}
        self._seen: dict[str, int] = {}

    def size(self, workload: Workload) -> int | None:
        return len(self.spaces[workload.id])

    def ask(self, workload: Workload) -> Candidate | None:
        cfg = self.strategies[workload.id].ask()
        if cfg is None:
            return None
        template = cfg["template"]
        cand = Candidate(op=self.bundle.spec.name, template=template, source=self.bundle.template_sources[template],
                         config={k: v for k, v in cfg.items() if k != "template"}, proposer=self.name)
        self._configs[(cand.id, workload.id)] = cfg
        return cand

    def rank(self, candidate: Candidate, workload: Workload) -> float | None:
        """The strategy's predicted quantile of the candidate among the values told so far (None: no model)."""
        rank = getattr(self.strategies[workload.id], "rank", None)
        return rank(self._configs[(candidate.id, workload.id)]) if rank is not None else None

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        cfg = self._configs.pop((candidate.id, workload.id))
        # the failure's kind and what the evaluation cost teach the strategy where kernels fail (search.feasibility)
        self.strategies[workload.id].tell(cfg, trial_value(trial), status=trial.verdict.status.value,
                                          costs=trial.costs.model_dump())

    def drain_events(self) -> list[dict]:
        """Strategy events (supervisor interventions, stage changes) not yet archived."""
        out = []
        for wid, strat in self.strategies.items():
            events = getattr(strat, "events", None) or []
            seen = self._seen.get(wid, 0)
            out += [{"workload": wid, **e} for e in events[seen:]]
            self._seen[wid] = len(events)
        return out


class Controller:
    def __init__(self, bundle: OpBundle, workloads: list[Workload], options: RunOptions, run_dir: Path,
                 on_progress: Callable[[Progress], None] | None = None, proposer: Proposer | None = None,
                 evidence=None, sanitizer: Sanitizer | None = None):
        """`sanitizer` runs compute-sanitizer over a winner (kernelloop.verify.sanitizer.sanitize's signature;
        default: `select.sanitize.default_sanitizer` for the device)."""
        self.bundle = bundle
        self.spec = bundle.spec
        self.workloads = workloads
        self.options = options
        self.run_dir = Path(run_dir)
        self.on_progress = on_progress or (lambda p: None)
        self.progress = Progress()
        self.proposer = proposer
        self.evidence = evidence   # an EvidenceSource (kernelloop.profile.evidence); default: by device
        self.sanitizer = sanitizer
        self._failures: dict[str, dict] = {}   # trial id -> archived failure (its case), for proposers' views
        self._failures_read = False

    # -- freezing -------------------------------------------------------------------------------------------
    def _open(self, archive: Archive, resume: bool) -> tuple[str, dict, str, str]:
        env = environment(self.options.device)
        policy, confirm_policy = policies_for(self.options.device)
        manifest = build_manifest(self.bundle, policy, confirm_policy, env, self.options.checks,
                                  self.options.static_rules)
        mhash = manifest_hash(manifest)
        existing = archive.runs()
        if existing:
            if not resume:
                raise FileExistsError(f"{self.run_dir} already holds run {existing[0]['id']}; use --resume "
                                      f"to continue it or choose another --out")
            run = existing[0]
            if run["manifest_hash"] != mhash:
                diff = [k for k in manifest if manifest[k] != run["manifest"].get(k)]
                raise RuntimeError(f"cannot resume: the manifest changed ({', '.join(diff)}); "
                                   f"results are only comparable within one manifest")
            return run["id"], manifest, mhash, keys.resume_secret(run, self.run_dir)
        # The run key derives every seed and held-out case; the archive keeps only a salt and a commitment to it,
        # the key stays with the user's controller ($KERNELLOOP_KEY or a key file outside the run folder).
        run_id, key_record, secret = keys.start_run(self.run_dir, lambda salt: "r-" + content_hash({"m": mhash,
                                                                                                   "salt": salt}))
        archive.create_run(run_id, self.spec, manifest, mhash, env, self.options.archived(key_record, self.workloads))
        for w in self.workloads:
            archive.put_workload(w)
        return run_id, manifest, mhash, secret

    # -- the loop -------------------------------------------------------------------------------------------
    def run(self, resume: bool = False) -> RunResult:
        """Run (or with `resume`, continue) the loop; the RunResult of this invocation."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        props = device_properties(self.options.device)
        with Archive(self.run_dir / "archive.sqlite") as archive:
            run_id, manifest, mhash, secret = self._open(archive, resume)
            if resume:   # the archived options, read back whole, with this invocation's over them
                archived = archive.get_run(run_id)["options"]
                stored = RunOptions.from_archived(archived)
                given = self.options.prior
                now, then = prior_files(given), prior_files(stored.prior)
                if given is not None and sorted(h for _, h in now) != sorted(h for _, h in then):
                    names = " + ".join(p for p, _ in now)
                    if then and sorted(p for p, _ in now) == sorted(p for p, _ in then):
                        raise RuntimeError(f"cannot resume with --prior {names}: a file changed since the run "
                                           f"began (its sha256 is not the archived one)")
                    raise RuntimeError(f"cannot resume with --prior {names}: the run was "
                                       + (f"warm-started from {' + '.join(p for p, _ in then)}"
                                          if then else "not warm-started"))
                # the same warm start as before: the archived prior, or the same files given from elsewhere
                self.options = self.options.resumed(stored)
            opts = self.options
            unknown = sorted(set(opts.templates or ()) - {t.name for t in self.spec.templates})
            if unknown:
                raise RuntimeError(f"unknown template(s) {', '.join(unknown)}: the spec has "
                                 f"{', '.join(t.name for t in self.spec.templates)}")
            policy, confirm_policy = policies_for(opts.device)
            worker = Worker(opts.device, job_root(self.run_dir), log_path=self.run_dir / "worker.log",
                            remove_work_dir=True)
            evaluator = Evaluator(self.bundle, opts.device, worker, policy, secret, opts.checks, opts.timeouts,
                                  static_rules=opts.static_rules)
            try:
                if self.proposer is None:
                    spaces = {}
                    for w in self.workloads:
                        space = []
                        for t, kept, report in selected_space(self.spec.templates, w, props, opts.templates,
                                                              opts.fixed):
                            space += kept
                            if not resume:
                                archive.log_event(run_id, "prune", {"workload": w.id, "label": w.label,
                                                                    "template": t.name, **report.as_dict()})
                        spaces[w.id] = space
                        if not space and not resume:
                            archive.log_event(run_id, "empty-space", {
                                "workload": w.id, "label": w.label,
                                "message": "every configuration was pruned for this workload: nothing to try"})
                    self.proposer = self._make_proposer(spaces, props)
                proposer = self.proposer
                evidence = self._evidence_source(archive, run_id, proposer)
                limit = {}
                for w in self.workloads:
                    size = proposer.size(w)
                    limit[w.id] = min(x for x in (size, opts.budget_evals) if x is not None) \
                        if (size is not None or opts.budget_evals) else None
                self.progress.total = sum(v for v in limit.values() if v is not None)
                used = {w.id: 0 for w in self.workloads}
                t_start = time.monotonic()
                active = [w for w in self.workloads if limit[w.id] is None or limit[w.id] > 0]
                gpu = GpuBudget(opts.budget_gpu_seconds) if opts.budget_gpu_seconds is not None else None
                screening = Screening(opts.screen_samples) if opts.screen_samples else None
                rank = getattr(proposer, "rank", lambda c, w: None)
                session, done0 = time.time(), self.progress.done - self.progress.replayed
                stop = None
                try:
                    while active:
                        if opts.budget_seconds is not None and time.monotonic() - t_start > opts.budget_seconds:
                            archive.log_event(run_id, "budget", {"reason": "wall time", "seconds": opts.budget_seconds})
                            stop = "wall-time budget"
                            break
                        if gpu is not None and gpu.exhausted:
                            archive.log_event(run_id, "budget", {"reason": "gpu seconds", "seconds": gpu.seconds,
                                                                 "spent": round(gpu.spent, 3),
                                                                 "evaluations": gpu.evaluations})
                            stop = "gpu-seconds budget"
                            break
                        for w in list(active):
                            cand = proposer.ask(w) if (limit[w.id] is None or used[w.id] < limit[w.id]) else None
                            if cand is None:
                                active.remove(w)
                                continue
                            used[w.id] += 1
                            replayed = self.progress.replayed
                            gate = screening.gate(w.id, rank(cand, w)) if screening is not None else None
                            trial = self._one(archive, evaluator, run_id, mhash, manifest, w, cand, gate)
                            if screening is not None and trial.measurement is not None and \
                                    not trial.measurement.policy.name.endswith("-screen"):
                                screening.full(w.id, trial.measurement.kernel.median_us)
                            if gpu is not None:
                                gpu.charge(trial.costs.model_dump())
                            if evidence is not None:
                                self._evidence(archive, run_id, evidence, proposer, w, cand, trial)
                            # proposers get the proposer's view: no seeds, nothing of a held-out case but its class
                            proposer.tell(cand, w, self._for_proposer(archive, run_id, w, trial))
                            events = getattr(proposer, "drain_events", lambda: [])()
                            if self.progress.replayed == replayed:  # a resumed run archived these already
                                for event in events:
                                    archive.log_event(run_id, "search", event)
                except BaseException:
                    with contextlib.suppress(Exception):   # the interruption, not a failed note, is what is raised
                        self._log_session(archive, run_id, session, done0)
                    raise
                self._log_session(archive, run_id, session, done0)
                if screening is not None:
                    archive.log_event(run_id, "screen", screening.as_dict())
                if stop is None:
                    hit = opts.budget_evals is not None and any(used[w.id] >= opts.budget_evals
                                                                for w in self.workloads)
                    stop = "evaluation budget" if hit else "space exhausted"
                self._select(archive, run_id)
                if opts.confirm:
                    self._confirm(archive, evaluator, run_id, confirm_policy)
                archive.set_run_status(run_id, "complete")
            finally:
                worker.close()
            return self._result(archive, run_id, stop)

    def _log_session(self, archive: Archive, run_id: str, started: float, done0: int) -> None:
        """This invocation's search phase as a `search-session` event: the wall time throughput is measured over."""
        p = self.progress
        archive.log_event(run_id, SESSION_EVENT, {"started": started, "finished": time.time(),
                                                  "evaluated": p.done - p.replayed - done0, "replayed": p.replayed})

    def _result(self, archive: Archive, run_id: str, stop: str) -> RunResult:
        """The RunResult of this invocation, read from the archive (the figures `kernelloop show` prints)."""
        trials = archive.trials(run_id)
        best = best_per_workload(without_rejected(trials, rejected(archive, run_id)))
        finals = archive.finals(run_id)
        workloads = []
        for w in self.workloads:
            mine = [t for t in trials if t.workload_id == w.id]
            b = best.get(w.id)
            workloads.append(WorkloadResult(
                workload_id=w.id, label=w.label, trials=len(mine),
                passed=sum(1 for t in mine if t.verdict.status is Status.PASSED),
                best_trial=b.id if b else None, best_candidate=b.candidate_id if b else None,
                best_kernel_us=b.measurement.kernel.median_us if b else None, confirmed=w.id in finals))
        return RunResult(run_id=run_id, run_dir=str(self.run_dir), archive=str(archive.path),
                         status=archive.get_run(run_id)["status"], stop_reason=stop,
                         evaluated=self.progress.done - self.progress.replayed, replayed=self.progress.replayed,
                         counts=archive.count(run_id), workloads=workloads, throughput=throughput(archive, run_id))

    def _make_proposer(self, spaces: dict[str, list[dict]], props: dict) -> Proposer:
        opts = self.options
        if opts.strategy != PLANNER:
            return TemplateSearch(self.bundle, spaces, opts.strategy, opts.seed, self._prior(),
                                  shapes={w.id: (dict(w.axes), w.dtype.value) for w in self.workloads})
        from .propose.planner_proposer import PlannerProposer
        from .spec.start import resolve_start
        start = resolve_start(self.spec, self.workloads, opts.start, props) if opts.start else None
        return PlannerProposer(self.spec.name, self.bundle.template_sources, self.workloads, spaces,
                               {w.id: derive_seed(opts.seed, w.id) for w in self.workloads}, start=start)

    def _prior(self) -> TransferPrior | None:
        """The search's warm start, read again from its recordings: refused if a file changed since it was chosen."""
        given = self.options.prior
        if given is None:
            return None
        files = prior_files(given)
        names = " + ".join(p for p, _ in files)
        if not takes_prior(self.options.strategy):
            raise RuntimeError(f"the run was warm-started from {names}, which --strategy "
                               f"{self.options.strategy} does not take")
        try:
            rec = read_prior([p for p, _ in files], self.spec.name)
        except ValueError as e:
            raise RuntimeError(f"prior {names}: {e} (the paths are as the run was given them: from elsewhere, "
                               f"pass --prior with those files' paths; their sha256 are checked)") from e
        for (path, want), (_, got) in zip(files, rec.files):
            if got != want:
                raise RuntimeError(f"prior {path} changed since the run began (sha256 {want[:12]}... "
                                   f"now {got[:12]}...)")
        return rec.prior

    # -- evidence for proposers that plan from it ---------------------------------------------------------------
    def _evidence_source(self, archive: Archive, run_id: str, proposer: Proposer):
        if not getattr(proposer, "wants_evidence", False):
            return None
        from .profile.evidence import default_evidence
        if self.evidence is None:
            self.evidence = default_evidence(self.options.device, self.options.profile_timeout_s)
        archive.log_event(run_id, "evidence-source", {
            "source": self.evidence.name, "note": getattr(self.evidence, "reason", "")})
        return self.evidence

    def _evidence(self, archive: Archive, run_id: str, source, proposer, w: Workload, cand: Candidate,
                  trial: Trial) -> None:
        """The trial's report (archived, or built and archived now) handed to the proposer. Profile time is
        logged as an `evidence` event; it is never part of the trial's costs or kernel time."""
        from .archive import ArchiveError
        from .profile.evidence import EvidenceContext, TimingEvidence, outcome_counts
        from .profile.hypothesis import format_hypotheses
        if trial.verdict.status is not Status.PASSED or trial.measurement is None:
            return
        report = archive.profile(run_id, trial.id)
        if report is None:
            request = proposer.evidence_request(cand, w)
            run = archive.get_run(run_id)
            ctx = EvidenceContext(archive=archive, run_id=run_id, run_dir=self.run_dir, op_dir=self.bundle.folder,
                                  spec=self.spec, device=self.options.device, environment=run["environment"],
                                  workload=w, candidate=cand, trial=trial, request=request)
            used, error = source.name, ""
            self.progress.last = f"evidence ({source.name}) for {w.label} {cand.label}"
            self.on_progress(self.progress)
            t0 = time.monotonic()
            try:
                report = source.collect(ctx)
            except ArchiveError:
                raise
            except Exception as e:  # noqa: BLE001 - a profiler failure is noted; the search goes on
                error = f"{type(e).__name__}: {e}"[:2000]
                used = "timing"
                report = TimingEvidence(f"{source.name} failed: {error}").collect(ctx)
            seconds = time.monotonic() - t0
            archive.log_event(run_id, "evidence", {
                "workload": w.id, "trial": trial.id, "candidate": cand.id, "source": used, "error": error,
                "seconds": seconds, "profiled": report.kernel is not None,
                "bottleneck": report.classification.bottleneck.value if report.classification else None,
                "parent": request.parent_id, "hypotheses": format_hypotheses(list(request.hypotheses)),
                "outcomes": outcome_counts(report)})
        proposer.give_evidence(cand, w, report)

    def _one(self, archive: Archive, evaluator: Evaluator, run_id: str, mhash: str, manifest: dict,
             w: Workload, cand: Candidate, halving=None) -> Trial:
        p = self.progress
        found = archive.find_trial(run_id, cand.id, w.id)
        if found is None:
            check_unchanged(self.bundle, manifest)
            started = time.time()
            ev = evaluator.evaluate(cand, w, evaluator.worker.work_dir / f"{cand.id}-{w.id}", halving=halving)
            found = Trial(run_id=run_id, index=archive.next_index(run_id), candidate_id=cand.id, workload_id=w.id,
                          manifest_hash=mhash, build=ev.build, verdict=ev.verdict, measurement=ev.measurement,
                          costs=ev.costs, started=started, finished=time.time())
            archive.record_trial(found, cand, w)
            if ev.failure is not None and found.verdict.status is not Status.PASSED:
                # the user's record of where it failed (the case with its shape, seed and distribution)
                failure = {"trial": found.id, "candidate": cand.id, "workload": w.id,
                           "status": found.verdict.status.value, "reason": failure_reason(found.verdict),
                           **ev.failure}
                archive.log_event(run_id, "failure", failure)
                self._failures[found.id] = failure
        else:
            p.replayed += 1
        p.done += 1
        if found.verdict.status is Status.PASSED and found.measurement is not None:
            p.passed += 1
            p.best_us[w.label] = min(p.best_us.get(w.label, float("inf")), found.measurement.kernel.median_us)
        p.last = f"{w.label} {cand.label}: {found.verdict.status.value}"
        self.on_progress(p)
        return found

    def _for_proposer(self, archive: Archive, run_id: str, w: Workload, trial: Trial) -> Trial:
        """The trial as a proposer may see it (kernelloop.verify.explain)."""
        if trial.verdict.status is Status.PASSED:
            return proposer_trial(trial, w)
        if trial.id not in self._failures and not self._failures_read:
            self._failures.update(failures_by_trial(archive, run_id))   # archived by an earlier invocation
            self._failures_read = True
        return proposer_trial(trial, w, self._failures.get(trial.id))

    def _select(self, archive: Archive, run_id: str) -> None:
        trials = archive.trials(run_id)
        for w in self.workloads:
            archive.set_front(run_id, w.id, front_for_workload(trials, w.id))

    def _confirm(self, archive: Archive, evaluator: Evaluator, run_id: str, policy) -> None:
        """Sanitize each workload's winner on a small shape, then re-measure it beside every baseline, interleaved
        in random order, in several fresh worker processes (select/confirm.py, select/sanitize.py)."""
        trials = archive.trials(run_id)
        done = archive.finals(run_id)
        baselines = self.options.baselines or (
            [*CUDA_BASELINES[:-1], *op_baseline_names(self.bundle), CUDA_BASELINES[-1]]
            if self.options.device == "cuda" else INTERPRET_BASELINES)
        for w in self.workloads:
            if w.id in done:
                continue
            picked = self._sanitized_winner(archive, evaluator, run_id, trials, w)
            if picked is None:
                continue
            cand, sanitized, passed_over = picked
            if evaluator.load(cand) is not None:
                continue
            job_dir = evaluator.worker.work_dir / f"confirm-{cand.id}-{w.id}"

            check = timed_check(archive, evaluator, run_id, cand, w, libraries=any(b not in OWN_SUBJECTS
                                                                                   for b in baselines))
            try:   # in CONFIRM_PROCESSES fresh workers; the stated interval covers their spread (select/confirm.py)
                runs, notes, stated = confirm_across_processes(evaluator, cand, w, ["candidate", *baselines], policy,
                                                               job_dir, check)
            except ConfirmFailure as e:
                archive.log_event(run_id, "confirm-failed", {"workload": w.id, "candidate": cand.id,
                                                             "status": e.status, "error": e.error,
                                                             "process": e.process})
                continue
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
            ms = runs[0]
            archive.put_final(run_id, w.id, cand.id, ms["candidate"])
            archive.put_confirmation(run_id, stated.model_copy(update={"sanitizer": sanitized,
                                                                       "sanitizer_rejected": passed_over}))
            for name in baselines:
                archive.put_baseline(run_id, w.id, name, ms.get(name), notes.get(name, ""))
            self.progress.last = f"confirmed {w.label}"
            self.on_progress(self.progress)

    def _sanitized_winner(self, archive: Archive, evaluator: Evaluator, run_id: str, trials: list[Trial],
                          w: Workload):
        """(candidate, its SanitizerOutcome, the faster candidates rejected) of the workload's fastest PASSED trial
        that compute-sanitizer does not reject; None when there is none. Each candidate's outcome is archived as a
        `sanitize` event (a resumed run reads the rejections back and does not sanitize them again); a finding
        takes the next fastest, up to SANITIZE_TRIES candidates. not_run, error and off do not stop the
        confirmation, and none of them is a pass."""
        gone = {c for c, wid in rejected(archive, run_id) if wid == w.id}
        mine = [t for t in trials if t.workload_id == w.id]
        for attempt in range(SANITIZE_TRIES + 1):
            best = best_per_workload(without_rejected(mine, {(c, w.id) for c in gone})).get(w.id)
            if best is None:
                if gone:
                    archive.log_event(run_id, "confirm-failed", {
                        "workload": w.id, "candidate": None, "status": "sanitizer", "process": None,
                        "error": f"compute-sanitizer rejected every PASSED candidate it ran over "
                                 f"({len(gone)}): nothing left to confirm"})
                return None
            cand = archive.get_candidate(best.candidate_id)
            if not self.options.sanitize:
                return cand, off(cand), sorted(gone)
            if attempt == SANITIZE_TRIES:
                archive.log_event(run_id, "confirm-failed", {
                    "workload": w.id, "candidate": cand.id, "status": "sanitizer", "process": None,
                    "error": f"compute-sanitizer rejected the {SANITIZE_TRIES} fastest candidates; the next one is "
                             f"left unconfirmed"})
                return None
            self.progress.last = f"compute-sanitizer over {w.label} {cand.label}"
            self.on_progress(self.progress)
            sanitizer = self.sanitizer or default_sanitizer(self.options.device)
            result = sanitize_candidate(sanitizer, self.bundle, cand, w, evaluator._accept(cand, w))
            archive.log_event(run_id, SANITIZE_EVENT, event_payload("confirm", w, cand, result, best))
            if result.status != "findings":
                return cand, result, sorted(gone)
            gone.add(cand.id)
        return None
