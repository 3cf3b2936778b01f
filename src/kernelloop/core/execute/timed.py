"""The timed stage of an evaluation, as the Evaluator's methods: interleaved samples of the candidate and its
baselines (`bench`), the batch audit for work outside the harness stream (`audit_verdict`), the re-verification of
sampled timed calls' outputs (`check_timed`) and the successive-halving screen before full timing (`_timed`).

`TimedStage` is a part of `execute.evaluate.Evaluator` (its attributes: `spec`, `bundle`, `secret`, `policy`,
`timeouts`, `transports`, `tensor_device` and the worker request helpers), kept apart so that each reads in one sitting.
"""

from __future__ import annotations

from pathlib import Path

from ..bench.stats import paired_speedup, summarize
from ...base.records import Candidate, Measurement, Status, TimingPolicy, Verdict, Workload
from ..reference.inputs import PERTURBED, make_inputs, perturb_
from ..reference.truth import truth
from ..verify import check_outputs
from ..verify.compare import open_guarded
from . import protocol as P
from .battery import derive_seed
from .evidence import timing_evidence
from .pool import Reply

def timed_shared(got: P.Benched) -> list:
    """A timing reply's shared tensors, as nested lists for execute.shared.read_all / release_all: [each snapshot's
    outputs, [each timed set's output backings, its workspace's backing or None]]."""
    return [[s.outputs for s in got.snapshots], [[g.outputs, g.scratch] for g in got.guards]]


# Batch audit: wall-clock to a device-wide synchronize may exceed the harness-stream events by sync latency;
# more than this (absolute and relative) means work ran outside the harness stream.
AUDIT_SLACK_US = 200.0
AUDIT_SLACK_SHARE = 0.2
SNAPSHOTS = 3        # timed candidate calls on near-duplicate contents whose outputs are re-verified (plus the last)


class TimedStage:
    """Timing and the checks of timed calls (mixed into execute.evaluate.Evaluator)."""

    def bench(self, candidate: Candidate | None, workload: Workload, subjects: list[str], policy: TimingPolicy,
              job_dir: Path | None = None, settle_threads: bool = False
              ) -> tuple[dict[str, Measurement], dict[str, str], Reply]:
        """Interleaved samples of the subjects; a Measurement per subject with ratios over every other one.
        `settle_threads`: take the thread census's base only once the thread count has stopped moving (the worker
        always does so when library baselines are among the subjects)."""
        seed = derive_seed(self.secret, "bench", workload.id, candidate.id if candidate else "-")
        baselines_file = self.bundle.folder / "baselines.py"
        self.decide_transport()   # before a reload: a failed probe replaces the worker
        if job_dir and self._writable(job_dir) and candidate is not None:
            failed = self.load(candidate)      # the worker was restarted for the folder: load the candidate again
            if failed is not None:
                return {}, {}, self._last_reply
        msg = P.BenchRequest(
            spec=self._spec_text(), workload=workload, policy=policy, subjects=subjects, seed=seed,
            **({"source_hash": candidate.source_hash, "config": candidate.config} if candidate is not None else {}),
            reference_file=str(self.bundle.folder / self.spec.reference),
            baselines_file=str(baselines_file) if baselines_file.is_file() else "",
            bytes_moved=self.spec.bytes_moved(workload.axes, workload.dtype),
            # fresh input contents for every timed call, SNAPSHOTS near-duplicates re-verified (core/execute/timing.py)
            fresh_inputs=True, snapshots=SNAPSHOTS if candidate else 0, transport=self.transport,
            job_dir=str(job_dir) if job_dir else "", settle_threads=settle_threads)
        reply = self._request(msg, timeout=self.timeouts.bench)
        if reply.status != "ok":
            return {}, {}, reply
        got = reply.record
        if got.snapshots or got.guards:
            self._transport_used = got.transport
        self.transports.worker_said(got)
        if (got.snapshots or got.guards) and got.transport == "cuda-ipc":
            shared = timed_shared(got)
            if self._threads_verdict(got.threads, "") is not None:
                # a thread left behind: no copy is taken (check_timed rejects), the worker may free the snapshots
                self.transports.release(shared)
                reply.owned = []
            else:
                # the controller's own copies now, so that a handle this process cannot open is found while the
                # timing can still be asked again through the host arena (check_timed re-verifies these copies)
                try:
                    reply.owned = self.transports.own_copy(shared)
                except Exception as e:  # noqa: BLE001
                    self.transports.release(shared)
                    self.transports.unopened(e)
                    return self.bench(candidate, workload, subjects, policy, job_dir, settle_threads)
        samples = {n: s.model_dump() for n, s in reply.record.samples.items()}
        notes = dict(reply.record.notes)
        env = {"before": reply.record.gpu_before, "after": reply.record.gpu_after}
        nbytes = self.spec.bytes_moved(workload.axes, workload.dtype)
        stats = {n: (summarize(s["kernel_us"], bootstrap=policy.bootstrap, confidence=policy.confidence,
                               seed=derive_seed(seed, n, "k")),
                     summarize(s["call_us"], bootstrap=policy.bootstrap, confidence=policy.confidence,
                               seed=derive_seed(seed, n, "c")))
                 for n, s in samples.items()}
        out = {}
        for name, s in samples.items():
            kstats, cstats = stats[name]
            ratios = [paired_speedup(samples[b]["kernel_us"], s["kernel_us"], name=b, bootstrap=policy.bootstrap,
                                     confidence=policy.confidence, margin=policy.margin,
                                     seed=derive_seed(seed, name, b))
                      for b in samples if b != name and b != "candidate"]
            roof = stats["copy"][0].median_us / kstats.median_us if "copy" in stats else None
            out[name] = Measurement(
                subject=candidate.id if name == "candidate" and candidate else name, workload_id=workload.id,
                policy=policy, kernel_samples_us=s["kernel_us"], call_samples_us=s["call_us"], kernel=kstats,
                call=cstats, bytes_moved=nbytes, gbps=nbytes / (kstats.median_us * 1e-6) / 1e9,
                roofline_fraction=roof, ratios=ratios,
                environment={**env, **({"audit": s["audit"]} if s.get("audit") else {}),
                             **({"launch": s["launch"]} if s.get("launch") else {})})
        return out, notes, reply

    @staticmethod
    def audit_verdict(samples: dict) -> Verdict | None:
        """REJECTED when a subject's batch ran much longer device-wide than on the harness stream. `samples`: by
        subject, execute.protocol.SubjectSamples or their dict form."""
        first = samples.get("candidate") or {}
        audit = first.get("audit") if isinstance(first, dict) else first.audit
        if not audit:
            return None
        gap = audit["wall_us"] - audit["events_us"]
        if gap > max(AUDIT_SLACK_US, AUDIT_SLACK_SHARE * audit["wall_us"]):
            return Verdict(status=Status.REJECTED, message=(
                f"work-outside-harness-stream: a batch of {audit['batch']} calls took {audit['wall_us']:.0f} µs to a "
                f"device-wide synchronize but {audit['events_us']:.0f} µs on the harness stream"))
        return None

    def check_timed(self, workload: Workload, reply: Reply, refresh: object = None) -> Verdict | None:
        """Hold the timing reply against the controller's own evidence (core/execute/evidence.py: the subjects and samples
        asked for, the wall clock of the request, the physical floor, every snapshot asked for), then re-verify
        outputs of sampled timed calls against the inputs that were live for those calls (their seeds, and for a
        near-duplicate the perturbation's seed, come back with the snapshot). `refresh` is unused: the
        worker draws every timed call's contents itself (core/execute/timing.py)."""
        threads = self._threads_verdict(reply.record.threads, "the timed calls")
        if threads:
            return threads.model_copy(update={"case": f"{workload.label} timed calls"})
        audited = self.audit_verdict(reply.record.samples)
        if audited:
            return audited.model_copy(update={"case": f"{workload.label} timed calls"})
        # the reply's numbers against what the controller asked and saw itself (core/execute/evidence.py)
        forged = timing_evidence(reply.request, reply.record, reply.seconds)
        if forged:
            return forged.model_copy(update={"case": f"{workload.label} timed calls"})
        shots = reply.record.snapshots
        owned = reply.owned if reply.owned is not None else self.transports.own_copy(timed_shared(reply.record))
        shot_outputs, guard_sets = owned or ([], [])
        breach = self._timed_guards(workload, guard_sets)
        if breach:
            return breach
        for shot, outputs in zip(shots, shot_outputs):
            got = {**shot.model_dump(exclude={"outputs"}), "outputs": outputs}
            if got.get("seed") is None:
                continue
            inputs = make_inputs(self.spec, workload, got["seed"], self.tensor_device)
            what = "fresh contents"
            if got.get("perturb") is not None:
                perturb_(self.spec, inputs, got["perturb"])
                what = f"a near-duplicate of an earlier call's contents ({PERTURBED} elements per input changed)"
            refs = truth(self.spec, self.bundle.folder / self.spec.reference, inputs, workload)
            v = check_outputs(self.spec, workload, got["outputs"], refs, inputs, inputs,
                              f"{workload.label} timed call #{got['call']} ({what})")
            if v.status is not Status.PASSED:
                self._timed_case = {"call": got["call"], "seed": got["seed"], "perturb": got.get("perturb")}
                return v.model_copy(update={"message": "timed call: " + v.message})
        return None

    def _timed_guards(self, workload: Workload, sets: list) -> Verdict | None:
        """REJECTED (memory-safety, naming the buffer and its timed set) when a timed call wrote into a guard zone of
        an output set or workspace (`sets`: the controller's own copies of the backings, [outputs, workspace or None]
        per set); REJECTED (timing-guards) for a backing that is not the size of the buffer it should hold."""
        runs = [outputs for outputs, _ in sets]
        scratch = [ws for _, ws in sets if ws is not None]
        if self.spec.scratch is not None and len(scratch) != len(sets):
            return Verdict(status=Status.REJECTED, case=f"{workload.label} timed calls",
                           message="timing-guards: a timed output set came back without its workspace")
        _, v = open_guarded(self.spec, workload, runs, scratch, f"{workload.label} timed calls", label="timed set")
        if v is not None and v.status is not Status.REJECTED:
            return v.model_copy(update={"status": Status.REJECTED, "message": "timing-guards: " + v.message})
        return v

    def refresh_seeds(self, candidate: Candidate | None, workload: Workload) -> list[int]:
        """Kept for callers of check_timed: timed calls' contents are drawn by the worker, per call."""
        return []

    def _timed(self, candidate: Candidate, workload: Workload, job_dir: Path, halving=None):
        """Time the candidate (timed calls re-verified); with `halving` (kernelloop.tune.search.budget: `screen_samples`,
        `promote(kernel µs) -> bool`), first with that many samples, then in full only when promoted. The reply's
        seconds cover both."""
        subjects = ["candidate", "eager", "copy"]
        policy, first = self.policy, 0.0
        if halving is not None:
            samples = max(3, min(halving.screen_samples, self.policy.samples))
            policy = self.policy.model_copy(update={"name": f"{self.policy.name}-screen", "samples": samples})
        ms, notes, reply = self.bench(candidate, workload, subjects, policy, job_dir)
        if reply.status == "ok" and halving is not None:
            bad = self.check_timed(workload, reply, self.refresh_seeds(candidate, workload))
            if bad is not None or not halving.promote(ms["candidate"].kernel.median_us):
                return ms, bad, reply
            first = reply.seconds
            ms, notes, reply = self.bench(candidate, workload, subjects, self.policy, job_dir)
        if reply.status != "ok":
            v = self.failure_verdict(reply, "timing")
            reply.seconds += first
            return None, v.model_copy(update={"case": f"{workload.label} timed calls"}), reply
        bad = self.check_timed(workload, reply, self.refresh_seeds(candidate, workload))   # on its own wall clock
        reply.seconds += first
        return ms, bad, reply


__all__ = ["AUDIT_SLACK_SHARE", "AUDIT_SLACK_US", "SNAPSHOTS", "TimedStage"]
