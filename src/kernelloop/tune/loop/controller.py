"""The controller: freeze, search through the pipeline, archive, select, confirm.

    run = freeze(reference, verifier, workloads, environment)   -> manifest, run key, options (read back on resume)
    for each workload: prune(space)                             -> counted reasons, archived
    pipeline = build stage -> one evaluation worker per device
    while budget left (round-robin over workloads, up to `window` candidates in flight):
        candidate = proposer.ask(workload)                      -> a trial already in the archive is replayed
        pipeline.submit(candidate, workload)                    -> built on the CPU, then verified and timed on a device
                                                                   (the static gate's rejection never reaches one)
        oldest = the first submitted result                     -> results are told in submission order
        archive(trial); archive(gate decisions); evidence (planner); proposer.tell(trial)
    front per workload; compute-sanitizer over each winner; confirm each winner beside every baseline
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, Iterator

from ...core.archive import Archive
from ...core.device import device_properties
from ...core.execute.executor import EvalContext, resolve_devices
from ...core.execute.pool import Worker, job_root
from ...core.manifest import check_unchanged
from ...base.records import Candidate, Status, Trial, Workload
from ...base.records.events import (BudgetEvent, BudgetPayload, EmptySpaceEvent, EmptySpacePayload, FailureEvent,
                                    PruneEvent, PrunePayload, ScreenEvent, SearchEvent, SessionEvent, SessionPayload,
                                    TransportEvent, TransportPayload)
from ...base.records.run import RunResult, RunStatus, StopReason, WorkloadResult
from .throughput import throughput
from ..search.budget import GpuBudget, Screening
from ..select.pareto import best_per_workload
from ..select.sanitize import Sanitizer, rejected, without_rejected
from ...core.spec import OpBundle
from ...core.spec.space import selected_space
from ...core.verify.explain import failure_reason, failures_by_trial, proposer_trial
from .evidence import evidence_source, hand_evidence
from .freeze import Frozen, freeze, read_warm_start
from .options import PLANNER, Progress, RunOptions
from .pipeline import Pipeline
from .proposers import Proposer, TemplateSearch
from .winners import Confirmation, confirmation_baselines, store_fronts

TRANSPORT_EVENT = "transport"   # payload: device, transport ('host-arena'), reason, the first trial it concerns


class Controller:
    def __init__(self, bundle: OpBundle, workloads: list[Workload], options: RunOptions, run_dir: Path,
                 on_progress: Callable[[Progress], None] | None = None, proposer: Proposer | None = None,
                 evidence=None, sanitizer: Sanitizer | None = None):
        """`sanitizer` runs compute-sanitizer over a winner (kernelloop.core.verify.sanitizer.sanitize's signature;
        default: `select.sanitize.default_sanitizer` for the device)."""
        self.bundle = bundle
        self.spec = bundle.spec
        self.workloads = workloads
        self.options = options
        self.run_dir = Path(run_dir)
        self.on_progress = on_progress or (lambda p: None)
        self.progress = Progress()
        self.proposer = proposer
        self.evidence = evidence   # an EvidenceSource (kernelloop.tune.profile.evidence); default: by device
        self.sanitizer = sanitizer
        self._failures: dict[str, dict] = {}   # trial id -> archived failure (its case), for proposers' views
        self._failures_read = False
        self._transport_noted: set[tuple[str, str]] = set()   # (device, reason) of host-arena transports archived

    # -- the loop -------------------------------------------------------------------------------------------
    def run(self, resume: bool = False) -> RunResult:
        """Run (or with `resume`, continue) the loop; the RunResult of this invocation."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with Archive(self.run_dir / "archive.sqlite") as archive:
            run = freeze(archive, self.bundle, self.workloads, self.options, self.run_dir, resume)
            self.options = opts = run.options
            self._check_templates()
            proposer = self.proposer = self.proposer or self._search(run, resume)
            evidence = evidence_source(archive, run.run_id, proposer, self.evidence, opts.device,
                                       opts.profile_timeout_s)
            context = EvalContext(self.bundle, run.policy, run.secret, opts.checks, opts.timeouts, opts.static_rules)
            with Pipeline(context, opts, self.run_dir) as pipeline:
                stop = self._search_loop(run, proposer, evidence, pipeline)
            store_fronts(archive, run.run_id, self.workloads)
            if opts.confirm:
                self._confirm(run, context)
            archive.set_run_status(run.run_id, RunStatus.COMPLETE)
            return self._result(archive, run.run_id, stop)

    def _search_loop(self, run: Frozen, proposer: Proposer, evidence, pipeline: Pipeline) -> StopReason:
        """Ask, submit, and tell in submission order until a budget or the proposers' spaces end; the stop reason."""
        opts, archive = run.options, run.archive
        window = pipeline.window(opts, asks_ahead=evidence is None and getattr(proposer, "asks_ahead", False))
        asks = Asks(self, run, proposer)
        screening = Screening(opts.screen_samples) if opts.screen_samples else None
        rank = getattr(proposer, "rank", lambda c, w: None)
        pending: deque[tuple[Workload, Candidate, Trial | Future]] = deque()
        session, done0 = time.time(), self.progress.done - self.progress.replayed
        try:
            while True:
                while len(pending) < window and (nxt := asks.next()) is not None:
                    w, cand = nxt
                    # a candidate the search ranks poorly is timed with a few samples first (successive halving)
                    halving = screening.gate(w.id, rank(cand, w)) if screening is not None else None
                    pending.append((w, cand, self._submit(run, pipeline, w, cand, halving)))
                if not pending:
                    break
                w, cand, job = pending.popleft()
                replayed = not isinstance(job, Future)
                trial = job if replayed else self._record(run, w, cand, job.result())
                self._archive_gate(run, pipeline)
                self._progress(w, cand, trial, replayed)
                asks.charge(trial)
                if screening is not None and trial.measurement is not None and \
                        not trial.measurement.policy.name.endswith("-screen"):
                    screening.full(w.id, trial.measurement.kernel.median_us)
                if evidence is not None:
                    hand_evidence(archive, run.run_id, self.run_dir, self.bundle, opts.device, evidence, proposer,
                                  w, cand, trial, self._note)
                # proposers get the proposer's view: no seeds, nothing of a held-out case but its class
                proposer.tell(cand, w, self._for_proposer(archive, run.run_id, w, trial))
                events = getattr(proposer, "drain_events", lambda: [])()
                if not replayed:   # a resumed run archived these already
                    for event in events:
                        archive.log_event(run.run_id, SearchEvent(payload=event))
        except BaseException:
            with contextlib.suppress(Exception):   # the interruption, not a failed note, is what is raised
                self._archive_gate(run, pipeline)
                self._log_session(archive, run.run_id, session, done0, pipeline)
            raise
        self._archive_gate(run, pipeline)
        self._log_session(archive, run.run_id, session, done0, pipeline)
        if screening is not None:
            archive.log_event(run.run_id, ScreenEvent(payload=screening.as_dict()))
        return asks.stop_reason()

    def _submit(self, run: Frozen, pipeline: Pipeline, w: Workload, cand: Candidate, halving=None
                ) -> Trial | Future:
        """The archived trial (a resumed run does not repeat it), or the future of its evaluation."""
        found = run.archive.find_trial(run.run_id, cand.id, w.id)
        if found is not None:
            return found
        check_unchanged(self.bundle, run.manifest)
        return pipeline.submit(cand, w, halving)

    def _record(self, run: Frozen, w: Workload, cand: Candidate, done) -> Trial:
        """Archive one evaluation as a trial (with the failure's case, for the user's record)."""
        archive, ev = run.archive, done.evaluation
        trial = Trial(run_id=run.run_id, index=archive.next_index(run.run_id), candidate_id=cand.id,
                      workload_id=w.id, manifest_hash=run.mhash, build=ev.build, verdict=ev.verdict,
                      measurement=ev.measurement, costs=ev.costs, started=done.started, finished=done.finished,
                      device=done.device, transport=ev.transport)
        archive.record_trial(trial, cand, w)
        if ev.transport == "host-arena" and (done.device, ev.transport_note) not in self._transport_noted:
            # a GPU whose buffers could not be shared by CUDA IPC: said once per device and reason
            self._transport_noted.add((done.device, ev.transport_note))
            archive.log_event(run.run_id, TransportEvent(payload=TransportPayload(
                device=str(done.device), transport=ev.transport, reason=ev.transport_note, trial=trial.id)))
        if ev.failure is not None and trial.verdict.status is not Status.PASSED:
            failure = {"trial": trial.id, "candidate": cand.id, "workload": w.id,
                       "status": trial.verdict.status.value, "reason": failure_reason(trial.verdict), **ev.failure}
            archive.log_event(run.run_id, FailureEvent(payload=failure))
            self._failures[trial.id] = failure
        return trial

    @staticmethod
    def _archive_gate(run: Frozen, pipeline: Pipeline) -> None:
        """The static gate's decisions made since the last call, each archived (kernelloop.tune.gate.archive) whether
        its candidate then ran or not."""
        from ..gate.archive import record_decision
        for decision in pipeline.gate_decisions():
            record_decision(run.archive, run.run_id, decision)

    def _progress(self, w: Workload, cand: Candidate, trial: Trial, replayed: bool) -> None:
        p = self.progress
        p.replayed += replayed
        p.done += 1
        if trial.verdict.status is Status.PASSED and trial.measurement is not None:
            p.passed += 1
            p.best_us[w.label] = min(p.best_us.get(w.label, float("inf")), trial.measurement.kernel.median_us)
        self._note(f"{w.label} {cand.label}: {trial.verdict.status.value}")

    def _note(self, text: str) -> None:
        self.progress.last = text
        self.on_progress(self.progress)

    def _log_session(self, archive: Archive, run_id: str, started: float, done0: int, pipeline: Pipeline) -> None:
        """This invocation's search phase as a `search-session` event: the wall time throughput is measured over,
        the devices it ran on and how long they waited for builds."""
        p = self.progress
        archive.log_event(run_id, SessionEvent(payload=SessionPayload(
            started=started, finished=time.time(), evaluated=p.done - p.replayed - done0, replayed=p.replayed,
            devices=[str(d) for d in pipeline.devices], build_wait_s=pipeline.build_wait_s(),
            builds_ahead=pipeline.build.compiles)))

    # -- the proposer ---------------------------------------------------------------------------------------
    def _check_templates(self) -> None:
        unknown = sorted(set(self.options.templates or ()) - {t.name for t in self.spec.templates})
        if unknown:
            raise RuntimeError(f"unknown template(s) {', '.join(unknown)}: the spec has "
                               f"{', '.join(t.name for t in self.spec.templates)}")

    def _search(self, run: Frozen, resume: bool) -> Proposer:
        """Each workload's pruned space (every removal archived under its reason) and the proposer over them."""
        opts, archive = run.options, run.archive
        props = device_properties(resolve_devices(opts.device, opts.devices)[0])
        spaces = {}
        for w in self.workloads:
            space = []
            for t, kept, report in selected_space(self.spec.templates, w, props, opts.templates, opts.fixed):
                space += kept
                if not resume:
                    archive.log_event(run.run_id, PruneEvent(payload=PrunePayload(
                        workload=w.id, label=w.label, template=t.name, **report.as_dict())))
            spaces[w.id] = space
            if not space and not resume:
                archive.log_event(run.run_id, EmptySpaceEvent(payload=EmptySpacePayload(
                    workload=w.id, label=w.label,
                    message="every configuration was pruned for this workload: nothing to try")))
        if opts.strategy != PLANNER:
            return TemplateSearch(self.bundle, spaces, opts.strategy, opts.seed, read_warm_start(opts, self.spec.name),
                                  shapes={w.id: (dict(w.axes), w.dtype.value) for w in self.workloads})
        from ...core.execute.battery import derive_seed
        from ..propose.planner_proposer import PlannerProposer
        from ...core.spec.start import resolve_start
        start = resolve_start(self.spec, self.workloads, opts.start, props) if opts.start else None
        return PlannerProposer(self.spec.name, self.bundle.template_sources, self.workloads, spaces,
                               {w.id: derive_seed(opts.seed, w.id) for w in self.workloads}, start=start)

    def _for_proposer(self, archive: Archive, run_id: str, w: Workload, trial: Trial) -> Trial:
        """The trial as a proposer may see it (kernelloop.core.verify.explain)."""
        if trial.verdict.status is Status.PASSED:
            return proposer_trial(trial, w)
        if trial.id not in self._failures and not self._failures_read:
            self._failures.update(failures_by_trial(archive, run_id))   # archived by an earlier invocation
            self._failures_read = True
        return proposer_trial(trial, w, self._failures.get(trial.id))

    # -- after the search -----------------------------------------------------------------------------------
    def _confirm(self, run: Frozen, context: EvalContext) -> None:
        """Winners sanitized and confirmed beside every baseline on the run's first device, in fresh workers."""
        opts = run.options
        device = resolve_devices(opts.device, opts.devices)[0]
        worker = Worker(device, job_root(self.run_dir), log_path=self.run_dir / "worker.log", remove_work_dir=True)
        evaluator = context.evaluator(device, worker)
        try:
            Confirmation(run.archive, run.run_id, self.bundle, evaluator, run.confirm_policy,
                         confirmation_baselines(self.bundle, opts.device, opts.baselines), opts.sanitize,
                         self.sanitizer, self._note).confirm(self.workloads)
        finally:
            worker.close()
            if evaluator.device.is_cuda and evaluator.transport == "host-arena":
                run.archive.log_event(run.run_id, TransportEvent(payload=TransportPayload(
                    device=str(device), transport="host-arena", reason=evaluator.transport_note, phase="confirm")))

    def _result(self, archive: Archive, run_id: str, stop: StopReason) -> RunResult:
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


class Asks:
    """The candidates of the search, in the controller's order: round-robin over the active workloads, each up to
    its limit (the evaluation budget, or the proposer's size), until a wall-time or GPU-seconds budget ends it."""

    def __init__(self, controller: Controller, run: Frozen, proposer: Proposer):
        opts = run.options
        self.run, self.proposer, self.opts = run, proposer, opts
        self.limit = {}
        for w in controller.workloads:
            size = proposer.size(w)
            self.limit[w.id] = min(x for x in (size, opts.budget.evals) if x is not None) \
                if (size is not None or opts.budget.evals) else None
        controller.progress.total = sum(v for v in self.limit.values() if v is not None)
        self.workloads = controller.workloads
        self.used = {w.id: 0 for w in controller.workloads}
        self.active = [w for w in controller.workloads if self.limit[w.id] is None or self.limit[w.id] > 0]
        self.gpu = GpuBudget(opts.budget.gpu_seconds) if opts.budget.gpu_seconds is not None else None
        self.t_start = time.monotonic()
        self.stop: StopReason | None = None
        self._order: Iterator[Workload] = iter(())

    def charge(self, trial: Trial) -> None:
        if self.gpu is not None:
            self.gpu.charge(trial.costs.model_dump())

    def next(self) -> tuple[Workload, Candidate] | None:
        """The next (workload, candidate), or None when the search is over (`stop` says why when a budget ended it)."""
        archive, run_id, opts = self.run.archive, self.run.run_id, self.opts
        while self.active and self.stop is None:
            w = next(self._order, None)
            if w is None:   # a new round over the workloads still active: the budgets are checked between rounds
                if opts.budget.seconds is not None and time.monotonic() - self.t_start > opts.budget.seconds:
                    archive.log_event(run_id, BudgetEvent(payload=BudgetPayload(reason="wall time",
                                                                                seconds=opts.budget.seconds)))
                    self.stop = StopReason.WALL_TIME
                elif self.gpu is not None and self.gpu.exhausted:
                    archive.log_event(run_id, BudgetEvent(payload=BudgetPayload(
                        reason="gpu seconds", seconds=self.gpu.seconds, spent=round(self.gpu.spent, 3),
                        evaluations=self.gpu.evaluations)))
                    self.stop = StopReason.GPU_SECONDS
                self._order = iter(list(self.active))
                continue
            if w not in self.active:
                continue
            limit = self.limit[w.id]
            cand = self.proposer.ask(w) if (limit is None or self.used[w.id] < limit) else None
            if cand is None:
                self.active.remove(w)
                continue
            self.used[w.id] += 1
            return w, cand
        return None

    def stop_reason(self) -> StopReason:
        if self.stop is not None:
            return self.stop
        evals = self.opts.budget.evals
        hit = evals is not None and any(self.used[w.id] >= evals for w in self.workloads)
        return StopReason.EVALUATIONS if hit else StopReason.SPACE
