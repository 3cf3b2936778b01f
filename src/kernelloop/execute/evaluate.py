"""compile -> verify -> benchmark of one candidate on one workload, driven from the trusted controller.

The worker builds and runs; this module generates the same inputs itself, computes the reference in higher
precision, reads the worker's output files and decides the verdict. Only PASSED candidates are timed.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..bench.stats import paired_speedup, summarize
from ..records import (BuildArtifact, BuildFailure, Candidate, Costs, Measurement, Status, TimingPolicy, Verdict,
                       Workload)
from ..reference.inputs import make_inputs
from ..reference.truth import truth
from ..spec import OpBundle
from ..verify import check_outputs
from .pool import Reply, Worker, describe_exit


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


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (run secret, workload id, candidate id, check index)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


class Evaluator:
    def __init__(self, bundle: OpBundle, device: str, worker: Worker, policy: TimingPolicy, secret: str,
                 checks: int = 2, timeouts: Timeouts | None = None):
        self.bundle = bundle
        self.spec = bundle.spec
        self.device = device
        self.worker = worker
        self.policy = policy
        self.secret = secret
        self.checks = checks
        self.timeouts = timeouts or Timeouts()
        # The trusted parent recomputes inputs and the reference on the same kind of device as the worker.
        self.tensor_device = "cuda" if device == "cuda" else "cpu"
        self.toolchain = f"triton {__import__('triton').__version__}"

    # -- messages -------------------------------------------------------------------------------------------
    def _common(self, candidate: Candidate | None, workload: Workload) -> dict:
        msg = {"spec": self.spec.model_dump_json(), "workload": workload.model_dump_json()}
        if candidate is not None:
            msg.update(source_hash=candidate.source_hash, config=candidate.config)
        return msg

    def _failure_verdict(self, reply: Reply, what: str) -> Verdict:
        if reply.status == "timeout":
            return Verdict(status=Status.TIMEOUT, message=f"{what} exceeded its deadline; worker killed",
                           log=reply.log_tail)
        if reply.status == "died":
            return Verdict(status=Status.RUNTIME_ERROR, message=f"{describe_exit(reply.exitcode)} during {what}",
                           log=reply.log_tail)
        d = reply.data
        return Verdict(status=Status.RUNTIME_ERROR, message=(d.get("error") or f"{what} failed")[:2000],
                       log=(d.get("log") or "") + ("\n" + reply.log_tail if reply.log_tail else ""))

    # -- stages ---------------------------------------------------------------------------------------------
    def load(self, candidate: Candidate) -> BuildFailure | Verdict | None:
        reply = self.worker.request({"op": "load", "source": candidate.source, "source_hash": candidate.source_hash},
                                    timeout=self.timeouts.check)
        if reply.status == "ok":
            return None
        if reply.status == "error" and reply.data.get("stage") == "import":
            return BuildFailure(stage="import", log=reply.data.get("log", ""), toolchain=self.toolchain)
        return self._failure_verdict(reply, "import")

    def verify(self, candidate: Candidate, workload: Workload, job_dir: Path
               ) -> tuple[BuildArtifact | BuildFailure | None, Verdict, float]:
        seeds = [derive_seed(self.secret, workload.id, candidate.id, k) for k in range(self.checks)]
        msg = {"op": "check", **self._common(candidate, workload), "seeds": seeds, "job_dir": str(job_dir)}
        reply = self.worker.request(msg, timeout=self.timeouts.check)
        d = reply.data
        build = BuildArtifact(**d["build"]) if d.get("build") else None
        if reply.status == "error" and d.get("stage") == "compile":
            failure = BuildFailure(stage="compile", log=d.get("log", ""), toolchain=self.toolchain)
            return failure, Verdict(status=Status.COMPILE_ERROR, message=d.get("error", "compile failed")[:2000],
                                    log=d.get("log", "")), reply.seconds
        if reply.status != "ok":
            return build, self._failure_verdict(reply, "verification"), reply.seconds
        ref_file = self.bundle.folder / self.spec.reference
        for seed, path in zip(seeds, d["files"]):
            inputs = make_inputs(self.spec, workload, seed, self.tensor_device)
            refs = truth(self.spec, ref_file, inputs)
            got = torch.load(path, weights_only=True, map_location=self.tensor_device)
            case = f"{workload.label} seed={seed}"
            verdict = check_outputs(self.spec, workload, got["outputs"], refs, inputs, got["inputs_after"], case)
            if verdict.status is not Status.PASSED:
                return build, verdict, reply.seconds
        return build, verdict, reply.seconds

    def bench(self, candidate: Candidate | None, workload: Workload, subjects: list[str], policy: TimingPolicy
              ) -> tuple[dict[str, Measurement], dict[str, str], Reply]:
        """Interleaved samples of the subjects; a Measurement per subject with ratios over every other one."""
        seed = derive_seed(self.secret, "bench", workload.id, candidate.id if candidate else "-")
        baselines_file = self.bundle.folder / "baselines.py"
        msg = {"op": "bench", **self._common(candidate, workload), "policy": policy.model_dump_json(),
               "subjects": subjects, "seed": seed,
               "reference_file": str(self.bundle.folder / self.spec.reference),
               "baselines_file": str(baselines_file) if baselines_file.is_file() else "",
               "bytes_moved": self.spec.bytes_moved(workload.axes, workload.dtype)}
        reply = self.worker.request(msg, timeout=self.timeouts.bench)
        if reply.status != "ok":
            return {}, {}, reply
        samples, notes = reply.data["samples"], reply.data["notes"]
        env = {"before": reply.data.get("gpu_before", {}), "after": reply.data.get("gpu_after", {})}
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
                roofline_fraction=roof, ratios=ratios, environment=env)
        return out, notes, reply

    def evaluate(self, candidate: Candidate, workload: Workload, job_dir: Path) -> Evaluation:
        t0 = time.perf_counter()
        job_dir.mkdir(parents=True, exist_ok=True)
        try:
            loaded = self.load(candidate)
            if isinstance(loaded, BuildFailure):
                return Evaluation(loaded, Verdict(status=Status.COMPILE_ERROR, message="candidate failed to import",
                                                  log=loaded.log), None, Costs(wall_s=time.perf_counter() - t0))
            if isinstance(loaded, Verdict):
                return Evaluation(None, loaded, None, Costs(wall_s=time.perf_counter() - t0))
            build, verdict, verify_s = self.verify(candidate, workload, job_dir)
            compile_s = build.compile_s if build is not None else 0.0
            if verdict.status is not Status.PASSED:
                return Evaluation(build, verdict, None, Costs(compile_s=compile_s, verify_s=verify_s,
                                                              wall_s=time.perf_counter() - t0))
            ms, _notes, reply = self.bench(candidate, workload, ["candidate", "eager", "copy"], self.policy)
            if reply.status != "ok":
                return Evaluation(build, self._failure_verdict(reply, "benchmark"), None,
                                  Costs(compile_s=compile_s, verify_s=verify_s, wall_s=time.perf_counter() - t0))
            return Evaluation(build, verdict, ms["candidate"],
                              Costs(compile_s=compile_s, verify_s=verify_s, bench_s=reply.seconds,
                                    wall_s=time.perf_counter() - t0))
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
