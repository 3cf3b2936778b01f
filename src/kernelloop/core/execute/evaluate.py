"""compile -> verify -> benchmark of one candidate on one workload, driven from the trusted controller.

The worker builds and runs; this module regenerates the same inputs itself, computes the reference in higher
precision, reads the worker's output files and decides the verdict. Only PASSED candidates are timed, and the
outputs of sampled *timed* calls are verified too.

The verification battery for one trial (core/execute/battery.py; seeds and held-out shapes mix the run's secret, the
workload and the candidate, so no proposer can precompute them, nor learn the next candidate's from this one's):
- `checks` cases on the workload, each with fresh inputs from a different value distribution;
- the first case is run 3 times on identical inputs: any bitwise difference is WRONG_NONDETERMINISTIC;
- held-out shapes, never shown to proposers;
- outputs must stay the buffers the harness allocated and must not alias inputs; no thread may be left behind;
- `launch` returns None: results are written in place into the given outputs (a returned value is REJECTED, never
  silently ignored).
A failed trial's Evaluation carries `failure`: the case it failed on (execute.battery.case_record) and the stage.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path


from ..build.merge import merge_build
from ...base.records.device import Device
from ...base.records import (BuildArtifact, BuildFailure, Built, Candidate, Costs, Measurement, Status, TimingPolicy, Verdict,
                       Workload)
from ..reference.inputs import make_inputs
from ..reference.truth import truth
from ..spec import OpBundle
from ..verify import check_outputs
from ..verify.compare import check_repeats, input_drift, open_guarded
from . import battery
from .battery import DETERMINISM_RUNS, case_label, case_record, derive_seed
from . import protocol as P
from .pool import Reply, Worker, describe_exit, signal_name
from .procutil import STAGE_FILE
from .timed import TimedStage
from .transport import TransportChoice
# A kernel time below this share of a device copy of the same bytes is physically implausible for an op whose
# bytes formula is a true minimum: it is re-measured in a fresh worker and rejected if it persists.
INTERPRET_GROWTH = 8   # in the interpreter a held-out shape is at most this many times the workload's size
PHYSICAL_FLOOR = 0.7


@dataclass
class Timeouts:
    """Deadlines in seconds. The first check includes JIT compilation."""

    check: float = 300.0
    bench: float = 600.0


@dataclass
class Evaluation:
    build: BuildArtifact | BuildFailure | None
    verdict: Verdict
    measurement: Measurement | None
    costs: Costs
    failure: dict | None = None   # non-PASSED: {"stage", "case": case_record or None}
    transport: str = ""           # how the worker's tensors came back (core/execute/shared.py); '' when none were asked for
    transport_note: str = ""      # on a GPU with transport 'host-arena': why not CUDA IPC


__all__ = ["DETERMINISM_RUNS", "Evaluation", "Evaluator", "Timeouts", "derive_seed"]


class Evaluator(TimedStage):
    def __init__(self, bundle: OpBundle, device: Device | str, worker: Worker, policy: TimingPolicy, secret: str,
                 checks: int = 2, timeouts: Timeouts | None = None, static_rules: bool = True,
                 aten_ops: bool = True, cuda_ipc: bool = True):
        self.bundle = bundle
        self.spec = bundle.spec
        self.device = Device.of(device)
        self.worker = worker
        self.policy = policy
        self.secret = secret
        self.checks = checks
        self.timeouts = timeouts or Timeouts()
        self.static_rules = static_rules
        # False: torch computation seen by the ATen recorder (core/execute/aten.py) is not a verdict (for fixtures that
        # model a kernel's misbehaviour with torch operations, to test the battery behind it)
        self.aten_ops = aten_ops
        self._rule_verdicts: dict[str, Verdict | None] = {}
        self._domain = None   # (domain constraints, device properties), computed on first use
        self._last_reply: Reply | None = None     # of the latest worker request (where a crash happened)
        self._timed_case: dict | None = None      # the timed call a timing verdict failed on
        # The trusted parent recomputes inputs and the reference on the worker's device (or the CPU in the interpreter).
        self.tensor_device = self.device.controller_tensor_device
        self.toolchain = f"triton {__import__('triton').__version__}"
        # how the worker's tensors come back (core/execute/transport.py): on a GPU probed before the first candidate is
        # loaded; `cuda_ipc=False` asks for the host arena from the start
        self.transports = TransportChoice(self.device, self.tensor_device, cuda_ipc)
        self._transport_used = ""   # of the latest verification or timing request
        self._spec_json: tuple[object, str] | None = None   # (spec, its JSON text): serialised once, not per request
        self._loaded: P.LoadRequest | None = None   # the latest load, asked again of a worker started since

    # -- the battery ----------------------------------------------------------------------------------------
    def heldout_workloads(self, workload: Workload, candidate: Candidate) -> list[Workload]:
        """Shapes the proposer never sees, drawn per (secret, workload, candidate): see core/execute/battery.py."""
        return [w for _, w in battery.heldout_workloads(self.spec, self.secret, workload, candidate.id,
                                                        self.bundle.fixed_axes, self.accept(candidate, workload),
                                                        self._own_template(candidate))]

    def cases(self, candidate: Candidate, workload: Workload) -> list[dict]:
        return battery.cases(self.spec, self.secret, self.checks, candidate.id, workload, self.bundle.fixed_axes,
                             self.accept(candidate, workload), self._own_template(candidate))

    def _own_template(self, candidate: Candidate) -> bool:
        """Whether the candidate is one of the op's templates, its source unchanged (its constraints then say
        which shapes its configuration supports)."""
        return self.bundle.template_sources.get(candidate.template, None) == candidate.source

    def accept(self, candidate: Candidate, workload: Workload):
        """Where held-out draws beyond the primary axes may go: the op's domain (axis bounds, the axis-only
        constraints every template states) and, for a template's own source, what pruning keeps for its
        configuration (so an honest configuration is never judged on shapes it declares it does not support). In
        the interpreter a held-out shape's size (the product of its axes) stays within INTERPRET_GROWTH times the
        workload's, to bound its time."""
        from ..spec.loader import domain_constraints, in_domain
        from ..spec.space import why_pruned
        if self._domain is None:
            from ..device import device_properties
            self._domain = domain_constraints(self.spec), device_properties(self.device)
        constraints, props = self._domain
        t = next((t for t in self.spec.templates if t.name == candidate.template), None)
        own = t is not None and self._own_template(candidate)

        cap = None if self.device.is_cuda else INTERPRET_GROWTH * math.prod(workload.axes.values())

        def accept(axes: dict[str, int]) -> bool:
            if not in_domain(self.spec, axes, workload.dtype, constraints):
                return False
            if cap is not None and math.prod(axes.values()) > cap:   # the interpreter's time cap
                return False
            if not own:
                return True
            try:
                return why_pruned(t, workload.model_copy(update={"axes": axes}), props, candidate.config) is None
            except (ValueError, KeyError, ZeroDivisionError):   # a partial configuration: keep the visible value
                return False
        return accept

    # -- messages -------------------------------------------------------------------------------------------
    def _spec_text(self) -> str:
        """The op's spec as the JSON text requests carry (the worker validates each distinct text once)."""
        if self._spec_json is None or self._spec_json[0] is not self.spec:
            self._spec_json = (self.spec, self.spec.model_dump_json())
        return self._spec_json[1]

    def _request(self, msg: P.LoadRequest | P.CheckRequest | P.BenchRequest | P.ShareRequest, timeout: float
                 ) -> Reply:
        """A worker request; the worker's stage file is cleared first, so a crash reads only this job's stage. A
        worker started since the candidate's load (the previous one replaced) answers that it has not loaded it: the
        candidate is loaded again and the request asked once more."""
        if isinstance(msg, P.LoadRequest):
            self._loaded = msg
        reply = self._ask(msg, timeout)
        again = self._loaded
        if P.is_not_loaded(reply.record) and again is not None and again.source_hash == getattr(msg, "source_hash", ""):
            if self._ask(again, self.timeouts.check).status != "ok":
                return self._last_reply
            reply = self._ask(msg, timeout)
        return reply

    def _ask(self, msg, timeout: float) -> Reply:
        stage = getattr(self.worker, "work_dir", None)
        if stage is not None:
            (Path(stage) / STAGE_FILE).unlink(missing_ok=True)
        self._last_reply = self.worker.request(msg, timeout=timeout)
        return self._last_reply

    def _writable(self, job_dir: Path) -> bool:
        """Make `job_dir` writable for the worker (its read-only view, core/sandbox/confine.py, keeps only its own
        folders writable); True when that stopped the worker (the next request starts a fresh one)."""
        make = getattr(self.worker, "make_writable", None)
        return bool(make(job_dir)) if make is not None else False

    def crash_info(self, reply: Reply) -> dict:
        """Where a failed request stopped: the worker's last stage ('import', 'build (first call, case k)',
        'verify case k', 'timing (samples)', ...) and, for a worker that died, the signal that killed it."""
        stage = None
        root = getattr(self.worker, "work_dir", None)
        if reply.status in ("died", "timeout") and root is not None:
            try:
                stage = (Path(root) / STAGE_FILE).read_text().strip() or None
            except OSError:
                stage = None
        sig = signal_name(reply.exitcode) if reply.status == "died" else None
        return {"at": stage, "signal": sig, "exitcode": reply.exitcode if reply.status == "died" else None}

    def failure_verdict(self, reply: Reply, what: str) -> Verdict:
        if reply.status == "denied":   # the sandbox denied an action (core/sandbox/policy.py): named in the verdict
            from ..sandbox.policy import denial_verdict_message
            denied = reply.record.denied
            return Verdict(status=Status.REJECTED, message=denial_verdict_message(denied),
                           log="\n".join([*(d.message for d in denied), reply.record.log, reply.log_tail]).strip())
        if reply.status == "violation":   # the worker broke the protocol (core/execute/pool.py): named, never trusted
            return Verdict(status=Status.REJECTED, message=reply.record.error,
                           log=(reply.record.log + "\n" + reply.log_tail).strip())
        info = self.crash_info(reply)
        where = info["at"] or what
        if reply.status == "timeout":
            return Verdict(status=Status.TIMEOUT, message=f"{what} exceeded its deadline (during {where}); "
                           f"worker killed", log=reply.log_tail)
        if reply.status == "died":
            return Verdict(status=Status.RUNTIME_ERROR, message=f"{describe_exit(reply.exitcode)} during {where}",
                           log=reply.log_tail)
        failed = reply.record
        return Verdict(status=Status.RUNTIME_ERROR, message=(getattr(failed, "error", "") or f"{what} failed")[:2000],
                       log=(getattr(failed, "log", "") or "") + ("\n" + reply.log_tail if reply.log_tail else ""))

    @staticmethod
    def _threads_verdict(threads: P.ThreadCensus | None, what: str) -> Verdict | None:
        if threads is not None and threads.base is not None and threads.after > threads.base:
            new = threads.new
            named = ", ".join(repr(t.python_name or t.name) + ("" if t.python else " (native)") for t in new[:6])
            return Verdict(status=Status.REJECTED, message=(
                f"thread-left-behind: {threads.after - threads.base} thread(s) still running after {what}"
                + (f" ({named})" if named else "") + "; work outside the call escapes the timer"),
                log=json.dumps([t.model_dump(exclude_defaults=True) for t in new], indent=1) if new else "")
        return None

    # -- stages ---------------------------------------------------------------------------------------------
    def screen(self, candidate: Candidate) -> Verdict | None:
        """Static source rules, before any candidate code runs: a hit is REJECTED with the rule and line."""
        if not self.static_rules:
            return None
        key = candidate.source_hash
        if key not in self._rule_verdicts:
            from ..build.steps import rules_verdict
            self._rule_verdicts[key] = rules_verdict(candidate.source, self.spec)
        return self._rule_verdicts[key]

    def load(self, candidate: Candidate) -> BuildFailure | Verdict | None:
        reply = self._request(P.LoadRequest(source=candidate.source, source_hash=candidate.source_hash),
                              timeout=self.timeouts.check)
        if reply.status == "ok":
            aten = reply.record.aten
            if aten is not None and aten.forbidden and self.aten_ops:
                return Verdict(status=Status.REJECTED, message=aten.message, log="\n".join(aten.seen))
            return None
        if reply.status == "error" and reply.record.stage == "import":
            return BuildFailure(stage="import", log=reply.record.log, toolchain=self.toolchain)
        return self.failure_verdict(reply, "import")

    def decide_transport(self) -> None:
        """Probe CUDA IPC once on a GPU (core/execute/transport.py). Asked before a candidate is loaded: a probe that
        fails replaces the worker, and with it anything loaded into it."""
        self.transports.decide(lambda msg: self._request(msg, self.timeouts.check))

    @property
    def transport(self) -> str:
        """How the worker is asked to share tensors (core/execute/transport.py): the arena on the CPU; on a GPU CUDA IPC
        unless the probe found it refused (or it was turned off), then the host arena."""
        return self.transports.asked

    @property
    def transport_note(self) -> str:
        """Why this GPU's tensors come through the host arena ('' where they do not)."""
        return self.transports.note

    def _judge_case(self, case: dict, got: dict) -> Verdict:
        """The verdict of one case from the controller's own copy of its tensors (`got`: runs, inputs_before,
        inputs_after), against inputs and a reference it computes itself."""
        w: Workload = case["workload"]
        inputs = make_inputs(self.spec, w, case["seed"], self.tensor_device, case["distribution"], case.get("pattern"))
        label = case_label(case)
        note = ""
        seen = got.get("inputs_before")
        if seen is not None:
            # The worker's own copy of the inputs, taken just before the candidate's first call of the case. It should
            # equal the regeneration bit for bit; a rare one-ulp drift between the two processes' draws was seen
            # (CPU interpreter: inputs were then drawn with torch's MKL-backed log, whose first parallel call in a
            # process can be off; core/reference/inputs.py no longer uses it, and benchmarks/verify_stress.py counts
            # drift). Then the kernel is judged on what it was given -- the mutation check against the worker's
            # copy, the reference from it -- and the drift is noted; a larger difference is a verdict.
            differ, ulps = input_drift(inputs, seen)
            if ulps > 1:
                return Verdict(status=Status.WRONG_INPUT_MUTATED, case=label,
                               message=f"the inputs the kernel was given differ from the seeded inputs in {differ} "
                                       f"element(s), by up to {ulps} ulp(s), before its call")
            if differ:
                note = (f"input regeneration drift: the worker's inputs differ from the controller's regeneration in "
                        f"{differ} element(s) by one ulp; judged on the worker's inputs")
                inputs = [t.to(self.tensor_device) for t in seen]
        refs = truth(self.spec, self.bundle.folder / self.spec.reference, inputs, w)
        verdict = check_outputs(self.spec, w, got["runs"][0], refs, inputs, got["inputs_after"], label)
        if verdict.status is Status.PASSED and len(got["runs"]) > 1:
            verdict = check_repeats(self.spec, got["runs"][0], got["runs"][1:], label) or verdict
        if note:
            verdict = verdict.model_copy(update={"log": (verdict.log + "\n" + note).strip()})
        return verdict

    def verify(self, candidate: Candidate, workload: Workload, job_dir: Path
               ) -> tuple[BuildArtifact | BuildFailure | None, Verdict, float, dict | None]:
        """Run the battery; (build, verdict, seconds, the case it failed on or None)."""
        cases = self.cases(candidate, workload)
        self.decide_transport()
        self._transport_used = self.transport
        # the worker gets what it needs to run a case, nothing of what a proposer may not know beyond that
        msg = P.CheckRequest(spec=self._spec_text(), source_hash=candidate.source_hash, config=candidate.config,
                             job_dir=str(job_dir), transport=self.transport,
                             cases=[P.VerifyCase(workload=c["workload"], seed=c["seed"], distribution=c["distribution"],
                                                 pattern=c.get("pattern"), repeats=c["repeats"]) for c in cases])
        reply = self._request(msg, timeout=self.timeouts.check)
        d = reply.record   # Checked, Failed, or None (the worker died or timed out)
        build = getattr(d, "build", None)
        at = getattr(d, "case", None)
        if reply.status in ("died", "timeout"):   # the worker's stage file says which case it was running
            stage = self.crash_info(reply)["at"] or ""
            at = int(stage.rsplit(" ", 1)[-1].rstrip(")")) if "case " in stage else None
        failed_case = cases[at] if isinstance(at, int) and 0 <= at < len(cases) else None
        if reply.status == "error" and d.stage == "compile":
            failure = BuildFailure(stage="compile", log=d.log, toolchain=self.toolchain)
            return failure, Verdict(status=Status.COMPILE_ERROR, message=(d.error or "compile failed")[:2000],
                                    case=case_label(failed_case) if failed_case else "",
                                    log=d.log), reply.seconds, failed_case
        if reply.status != "ok":
            verdict = self.failure_verdict(reply, "verification")
            if failed_case is not None:
                verdict = verdict.model_copy(update={"case": case_label(failed_case)})
            return build, verdict, reply.seconds, failed_case
        self._transport_used = d.transport
        self.transports.worker_said(d)
        shared = [[c.runs, c.inputs_before, c.inputs_after, c.scratch] for c in d.cases]
        early = self._early_verdict(d, cases, workload)
        if early is not None:   # the controller takes no copy: the worker may free what it shared
            self.transports.release(shared)
            return build, early[0], reply.seconds, early[1]
        try:
            own = self.transports.own_copy(shared)
        except Exception as e:  # noqa: BLE001 - this controller cannot open the worker's CUDA buffers: a host arena
            if d.transport != "cuda-ipc":
                raise
            self.transports.release(shared)
            self.transports.unopened(e)
            return self.verify(candidate, workload, job_dir)
        verdict = Verdict(status=Status.PASSED)
        for case, (runs, before, after, scratch) in zip(cases, own):
            runs, breach = open_guarded(self.spec, case["workload"], runs, scratch, case_label(case))
            verdict = breach or self._judge_case(case, {"runs": runs, "inputs_before": before, "inputs_after": after})
            if verdict.status is not Status.PASSED:
                return build, verdict, reply.seconds, case
        return build, verdict, reply.seconds, None

    def _early_verdict(self, d: P.Checked, cases: list[dict], workload: Workload
                       ) -> tuple[Verdict, dict | None] | None:
        """The verdict a Checked reply earns before any comparison (a returned value, a forbidden ATen operation,
        aliasing outputs, a thread left behind) and the case it failed on; None when the outputs are to be compared."""
        if d.returned is not None:
            r = d.returned
            failed_case = cases[r.case] if 0 <= r.case < len(cases) else None
            return Verdict(status=Status.REJECTED, case=case_label(failed_case) if failed_case else "",
                           message=f"launch-returned: launch returned a {r.type} instead of None: kernelloop never "
                                   f"reads a return value; write the results in place into the output tensors it "
                                   f"passes after the inputs"), failed_case
        aten = d.aten
        if aten.forbidden and self.aten_ops:
            failed_case = cases[aten.forbidden[0].case] if 0 <= aten.forbidden[0].case < len(cases) else None
            return Verdict(status=Status.REJECTED, case=case_label(failed_case) if failed_case else "",
                           message=aten.message, log="\n".join(aten.seen)), failed_case
        if d.alias:
            first = d.alias_case
            failed_case = cases[first] if isinstance(first, int) and 0 <= first < len(cases) else None
            return Verdict(status=Status.WRONG_SHAPE, case=case_label(failed_case) if failed_case else workload.label,
                           message="; ".join(d.alias)[:2000]), failed_case
        # The worker replied (every call returned); nothing may be left running that could still write the outputs
        # before the controller takes its own copy of them.
        threads = self._threads_verdict(d.threads, "the call")
        if threads is not None:
            return threads.model_copy(update={"case": f"{workload.label} after the verification calls"}), None
        return None

    def _failure(self, stage: str, workload: Workload, case: dict | None = None, reply: Reply | None = None
                 ) -> dict:
        """Where a trial failed, for the user's record (archived as a `failure` event by the controller): the
        stage, the case (execute.battery.case_record; for timing, the workload and the timed call) and, for a
        worker that died or hung, the stage it was in and the signal."""
        out = {"stage": stage, "case": case}
        if case is None:
            out["case"] = {"index": None, "kind": "timed" if stage == "timing" else "none", "workload": workload.label,
                           "workload_id": workload.id, "axes": dict(workload.axes), "dtype": workload.dtype.value,
                           **((self._timed_case or {}) if stage == "timing" else {})}
        if reply is not None and reply.status in ("died", "timeout"):
            info = self.crash_info(reply)
            out.update(at=info["at"], signal=info["signal"], exitcode=info["exitcode"])
        return out

    def shapes(self, candidate: Candidate, workload: Workload) -> list[Workload]:
        """Every distinct workload the candidate's battery on `workload` runs (what the build stage builds)."""
        out: dict[str, Workload] = {}
        for case in self.cases(candidate, workload):
            out.setdefault(case["workload"].id, case["workload"])
        return list(out.values())

    def evaluate(self, candidate: Candidate, workload: Workload, job_dir: Path, built: Built | None = None,
                 halving=None) -> Evaluation:
        """Build (unless the build stage did: `built`), verify and, when PASSED, time the candidate on the workload.
        A verdict of the build stage ends the trial here, before any call. `halving`
        (kernelloop.tune.search.budget.SuccessiveHalving): time with a few samples first, in full only when promoted (see
        `_timed`). Verification is never screened: the whole battery runs before any timing."""
        self._transport_used = ""
        ev = self._evaluate(candidate, workload, job_dir, built, halving)
        ev.transport = self._transport_used
        ev.transport_note = self.transport_note if ev.transport == "host-arena" else ""
        return ev

    def _evaluate(self, candidate: Candidate, workload: Workload, job_dir: Path, built: Built | None,
                  halving) -> Evaluation:
        t0 = time.perf_counter()
        self._timed_case = None
        label = workload.label
        if built is not None and built.verdict is not None:
            stage = "build" if built.verdict.status is Status.COMPILE_ERROR else \
                (built.steps[-1].step if built.steps else "static rules")   # the step whose verdict it is
            return Evaluation(built.failure, built.verdict, None, Costs(
                compile_s=built.failure.compile_s if built.failure else 0.0, wall_s=time.perf_counter() - t0),
                self._failure(stage, workload))
        job_dir.mkdir(parents=True, exist_ok=True)
        self._writable(job_dir)   # before the load: a worker restarted for it loads the candidate afresh
        try:
            rejected = self.screen(candidate) if built is None else None   # the build stage screened it
            if rejected is not None:
                v = rejected.model_copy(update={"case": f"{label}: static rules, before any call"})
                return Evaluation(None, v, None, Costs(wall_s=time.perf_counter() - t0),
                                  self._failure("static rules", workload))
            self.decide_transport()   # before the load: a failed probe replaces the worker
            loaded = self.load(candidate)
            if isinstance(loaded, BuildFailure):
                return Evaluation(loaded, Verdict(status=Status.COMPILE_ERROR, message="candidate failed to import",
                                                  case=f"{label}: import", log=loaded.log), None,
                                  Costs(wall_s=time.perf_counter() - t0), self._failure("import", workload))
            if isinstance(loaded, Verdict):
                return Evaluation(None, loaded.model_copy(update={"case": f"{label}: import"}), None,
                                  Costs(wall_s=time.perf_counter() - t0),
                                  self._failure("import", workload, reply=self._last_reply))
            build, verdict, verify_s, failed_case = self.verify(candidate, workload, job_dir)
            build = merge_build(build, built, getattr(self._last_reply.record, "cubins", None))
            compile_s = build.compile_s if build is not None else 0.0

            def costs(bench_s: float = 0.0) -> Costs:
                return Costs(compile_s=compile_s, verify_s=verify_s, bench_s=bench_s, wall_s=time.perf_counter() - t0)

            if verdict.status is not Status.PASSED:
                if self.device.interpreted:
                    # In the interpreter an out-of-bounds write lands in the worker's own heap and may only crash a
                    # later call: the next candidate starts in a fresh process, so no failure is charged to it.
                    self.worker.kill()
                stage = "build" if verdict.status is Status.COMPILE_ERROR else "verify"
                return Evaluation(build, verdict, None, costs(),
                                  self._failure(stage, workload, case_record(failed_case) if failed_case else None,
                                                self._last_reply))
            ms, bad, reply = self._timed(candidate, workload, job_dir, halving)
            if bad is not None:
                return Evaluation(build, bad, None, costs(reply.seconds), self._failure("timing", workload,
                                                                                          reply=reply))
            m = ms["candidate"]
            if self.device.is_cuda and m.roofline_fraction is not None and m.roofline_fraction > 1 / PHYSICAL_FLOOR:
                # Faster than physics allows: measure again in a fresh process before believing either way.
                self.worker.kill()
                if self.load(candidate) is None:
                    ms, bad, reply = self._timed(candidate, workload, job_dir)
                    if bad is not None:
                        return Evaluation(build, bad, None, costs(reply.seconds),
                                          self._failure("timing", workload, reply=reply))
                    m = ms["candidate"]
                if m.roofline_fraction is not None and m.roofline_fraction > 1 / PHYSICAL_FLOOR:
                    return Evaluation(build, Verdict(
                        status=Status.REJECTED, case=f"{label} timed calls",
                        message=f"below-physical-floor: {m.kernel.median_us:.2f} µs is {m.roofline_fraction:.2f}x "
                                f"faster than a device copy of the op's minimum bytes, twice in fresh processes"),
                        None, costs(reply.seconds), self._failure("timing", workload))
            return Evaluation(build, verdict, m, costs(reply.seconds))
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
