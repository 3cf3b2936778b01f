"""Proof before timing: an edited PTX runs beside the original kernel on the same launches and must give the
original's results before anything else is asked of it.

Order (each stage only when the one before passed):
1. static: the checks of `checks.py` (ABI, declarations, resources) and ptxas itself (its errors verbatim);
2. differential: every case (the verifier's battery: many seeded inputs over the op's value distributions, and
   its held-out shapes, drawn for this edit) runs the original twice and the edit once on the same inputs; the
   edit's outputs must equal the original's bit for bit, or, where the original is not bitwise deterministic or
   the proposal declares that it reorders floating-point work (`reorders_fp`), lie within the op's tolerance of
   them. A case where the launch compiled to other PTX than the edited one's original (another specialisation of
   the kernel: the override applies only to the PTX it was made from) is counted as not exercised; the proof
   needs the edit to have run on every case of the workload itself;
3. verifier: the edit's outputs against the float64 reference (`verify.compare.check_outputs`), as any candidate;
4. timing: the original and the edit interleaved in random rounds in the same process (`bench.timer.sample`), the
   paired speed-up with its bootstrap interval and the 2 % band (`bench.stats.paired_speedup`).

Who runs the kernels is an `Executor`: `gpu.TritonOverrideExecutor` launches the template with Triton's IR
override on a GPU; `StandInExecutor` (CPU) runs the template in Triton's interpreter on both sides and applies a
stated effect to the "edited" side: it executes no PTX, it exists to test this module's logic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Literal, Protocol

import torch
from pydantic import Field

from ...base.records import OpSpec, Record, Workload
from .checks import check_edit
from .patch import edited_ptx
from .records import PtxCandidate, Violation

Stage = Literal["static", "differential", "verifier", "timing", "done"]
ProofVerdict = Literal["refused", "rejected", "crashed", "not_exercised", "wrong", "proved", "faster", "same",
                       "slower", "no_sass_change"]


class ProofCase(Record):
    index: int
    workload: Workload
    seed: int
    distribution: str
    heldout: str = Field("", description="Empty for the workload itself; else what kind of held-out shape")


class CaseOutcome(Record):
    index: int
    label: str
    status: Literal["identical", "within_tolerance", "differs", "crashed", "not_exercised"]
    detail: str = ""
    original_deterministic: bool = True


class TimingComparison(Record):
    workload: str
    original_us: float
    edited_us: float
    speedup: float = Field(description="median(original) / median(edited)")
    ci_low: float
    ci_high: float
    verdict: str = Field(description="FASTER / SAME / SLOWER by the bootstrap interval and the 2 % band")
    samples: int
    policy: str


class ProofReport(Record):
    candidate_id: str
    parent_candidate_id: str
    kernel: str
    rule: str
    executor: str = Field(description="Who ran the kernels (a stand-in says so in its name)")
    stage: Stage = Field(description="The last stage reached")
    verdict: ProofVerdict
    compare: Literal["bitwise", "tolerance"] = "bitwise"
    violations: list[Violation] = Field(default_factory=list)
    sass_changed: bool | None = Field(None, description="The edit's SASS differs from the original's")
    cases: list[CaseOutcome] = Field(default_factory=list)
    verifier: str = Field("", description="The ordinary verifier's verdict on the edit's outputs")
    timing: TimingComparison | None = None
    message: str = ""
    environment: dict[str, str] = Field(default_factory=dict, description="triton, torch, arch, device of the run")

    @property
    def passed(self) -> bool:
        return self.verdict in ("proved", "faster", "same", "slower")


class Executor(Protocol):
    """Runs the op's template on one case, as the original or with the edited PTX substituted."""

    name: str
    arch: str          # "sm_90", or "interpret" for the stand-in
    device_name: str

    def run(self, edited: str | None, case: ProofCase) -> tuple[list[torch.Tensor], list[torch.Tensor], bool]:
        """(inputs, outputs on the CPU, whether the edited PTX ran) for the original (`edited` None) or the edit."""
        ...

    def time(self, edited: str, case: ProofCase, seed: int) -> tuple[dict, str]:
        """({"original": [µs...], "edited": [µs...]} sampled interleaved, the policy's name)."""
        ...


def proof_cases(bundle, parent, workload: Workload, candidate_id: str, secret: str, checks: int = 8,
                heldout: bool = True, device: str = "cuda") -> list[ProofCase]:
    """The verifier's own battery (core/execute/battery.py through `Evaluator.cases`: the op's domain and the template's
    constraints decide where held-out shapes may go) for the parent candidate, drawn with a secret of this edit:
    `checks` seeded cases over the value distributions on the workload, then its held-out shapes."""
    from ...core.bench.policy import policies_for
    from ...core.execute.evaluate import Evaluator
    ev = Evaluator(bundle, device, None, policies_for(device)[0], f"{secret}:{candidate_id}", checks=checks)
    out = []
    for c in ev.cases(parent, workload):
        if c["heldout"] and not heldout:
            continue
        out.append(ProofCase(index=len(out), workload=c["workload"], seed=c["seed"], distribution=c["distribution"],
                             heldout=c["heldout"]["class"] if c["heldout"] else ""))
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    itype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(itype)


def bit_equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[bool, str]:
    """Whether two output lists are identical bit for bit (NaN payloads included); else where they first differ."""
    for k, (x, y) in enumerate(zip(a, b)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, f"output {k}: {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"
        diff = _bits(x) != _bits(y)
        if bool(diff.any()):
            at = [int(i) for i in torch.nonzero(diff)[0]]
            return False, (f"output {k}: {int(diff.sum())} of {x.numel()} elements differ (first at {at}: "
                           f"{x[tuple(at)].item()!r} vs {y[tuple(at)].item()!r})")
    return len(a) == len(b), "" if len(a) == len(b) else f"{len(a)} vs {len(b)} outputs"


def within_tolerance(spec: OpSpec, workload: Workload, a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[bool, str]:
    from ...core.verify.compare import error_metrics
    tol = spec.tolerance_for(workload)
    for t, x, y in zip(spec.outputs, a, b):
        m = error_metrics(t.name, y.double(), x.double(), tol)
        if m.mismatched:
            return False, f"{t.name}: {m.mismatched} of {m.total} elements outside the tolerance of the original's"
    return True, ""


def _label(case: ProofCase) -> str:
    return f"{case.workload.label} seed={case.seed} {case.distribution}" + (f" ({case.heldout})" if case.heldout else "")


def _differential(edited: str, spec: OpSpec, executor: Executor, cases: list[ProofCase], tolerant: bool, base: dict,
                  changed: bool | None) -> ProofReport | tuple[list[CaseOutcome], list[tuple]]:
    """The differential proof: on each case the original twice (is it deterministic?) and the edit once, compared
    bit for bit (within tolerance where the edit reorders floating point or the original is not deterministic).
    The outcomes and the (case, inputs, edited outputs) it kept, or the report of the first failure."""
    outcomes: list[CaseOutcome] = []
    kept = []
    for case in cases:
        label = _label(case)
        try:
            inputs, first, _ = executor.run(None, case)
            _, second, _ = executor.run(None, case)
        except Exception as e:  # noqa: BLE001 - the original itself failed: nothing to prove against
            return ProofReport(**base, stage="differential", verdict="crashed", cases=outcomes,
                               message=f"the original failed on {label}: {type(e).__name__}: {e}"[:2000])
        deterministic, _ = bit_equal(first, second)
        try:
            _, out, applied = executor.run(edited, case)
        except Exception as e:  # noqa: BLE001
            outcomes.append(CaseOutcome(index=case.index, label=label, status="crashed",
                                        detail=f"{type(e).__name__}: {e}"[:2000], original_deterministic=deterministic))
            return ProofReport(**base, stage="differential", verdict="crashed", sass_changed=changed, cases=outcomes,
                               message=f"the edit failed on {label}")
        if not applied:
            outcomes.append(CaseOutcome(index=case.index, label=label, status="not_exercised",
                                        detail="the launch compiled to other PTX (another specialisation): the edit "
                                               "does not apply there", original_deterministic=deterministic))
            continue
        same, where = bit_equal(first, out)
        if same:
            status = "identical"
        elif (tolerant or not deterministic) and within_tolerance(spec, case.workload, first, out)[0]:
            status = "within_tolerance"
        else:
            outcomes.append(CaseOutcome(index=case.index, label=label, status="differs", detail=where,
                                        original_deterministic=deterministic))
            return ProofReport(**base, stage="differential", verdict="rejected", sass_changed=changed, cases=outcomes,
                               message=f"differs from the original on {label}: {where}")
        outcomes.append(CaseOutcome(index=case.index, label=label, status=status, original_deterministic=deterministic))
        kept.append((case, inputs, out))
    return outcomes, kept


def prove(candidate: PtxCandidate, original_ptx: str, spec: OpSpec, reference_file: Path, executor: Executor,
          cases: list[ProofCase], *, metadata: dict | None = None, time_it: bool = True, seed: int = 0,
          sass_changed: Callable[[str], bool] | None = None) -> ProofReport:
    """Static checks, the differential proof on `cases`, the ordinary verifier, then timing (see the module)."""
    import triton
    env = {"triton": triton.__version__, "torch": torch.__version__, "arch": executor.arch,
           "device": executor.device_name}
    base = dict(candidate_id=candidate.id, parent_candidate_id=candidate.parent_candidate_id,
                kernel=candidate.kernel, rule=candidate.rule, executor=executor.name,
                compare="tolerance" if candidate.reorders_fp else "bitwise", environment=env)
    edited = edited_ptx(candidate, original_ptx)
    violations = check_edit(original_ptx, edited, metadata=metadata)
    if violations:
        return ProofReport(**base, stage="static", verdict="refused", violations=violations,
                           message="; ".join(f"{v.rule}: {v.message[:300]}" for v in violations))
    changed = sass_changed(edited) if sass_changed is not None else None
    differential = _differential(edited, spec, executor, cases, candidate.reorders_fp, base, changed)
    if isinstance(differential, ProofReport):
        return differential
    outcomes, kept = differential
    if any(o.status == "not_exercised" for o in outcomes if not cases[o.index].heldout) or not kept:
        return ProofReport(**base, stage="differential", verdict="not_exercised", sass_changed=changed,
                           cases=outcomes, message="the edited PTX did not run on the workload's own cases")
    from ...core.reference.truth import truth
    from ...core.verify.compare import check_outputs
    for case, inputs, out in kept:
        refs = truth(spec, reference_file, [i.cpu() for i in inputs], case.workload)
        v = check_outputs(spec, case.workload, out, refs, inputs, inputs, _label(case))
        if v.status.value != "PASSED":
            return ProofReport(**base, stage="verifier", verdict="wrong", sass_changed=changed, cases=outcomes,
                               verifier=f"{v.status.value}: {v.message}", message=f"the reference disagrees: {v.message}")
    report = dict(**base, sass_changed=changed, cases=outcomes, verifier="passed")
    if not time_it:
        return ProofReport(**report, stage="verifier", verdict="proved")
    if changed is False:
        return ProofReport(**report, stage="verifier", verdict="no_sass_change",
                           message="ptxas made the same SASS as the original's: nothing to time")
    main = next(c for c in cases if not c.heldout)
    samples, policy = executor.time(edited, main, seed)
    from ...core.bench.stats import paired_speedup
    from ...base.records.measurement import SAME_MARGIN
    r = paired_speedup(samples["original"], samples["edited"], name="original", bootstrap=2000, confidence=0.95,
                       margin=SAME_MARGIN, seed=seed)
    t = TimingComparison(workload=main.workload.label, original_us=float(torch.tensor(samples["original"]).median()),
                         edited_us=float(torch.tensor(samples["edited"]).median()), speedup=r.speedup,
                         ci_low=r.ci_low, ci_high=r.ci_high, verdict=r.verdict.value, samples=len(samples["edited"]),
                         policy=policy)
    verdict = {"FASTER": "faster", "SLOWER": "slower"}.get(t.verdict.upper(), "same")
    return ProofReport(**report, stage="done", verdict=verdict, timing=t)


class StandInExecutor:
    """CPU stand-in for the GPU executor: runs the op's template in Triton's interpreter for the original and
    for the "edit" alike, then applies `effect(case, outputs)` to the edit's outputs (default: none). No PTX is
    executed here: this tests the proof's plumbing (cases, comparisons, verdicts, ordering), nothing about PTX."""

    name = "stand-in (CPU interpreter, no PTX executed)"
    arch = "interpret"
    device_name = "cpu"

    def __init__(self, spec: OpSpec, template_source: str, config: dict,
                 effect: Callable[[ProofCase, list[torch.Tensor]], list[torch.Tensor]] | None = None,
                 applies: Callable[[ProofCase], bool] | None = None):
        import importlib.util
        import os
        import tempfile
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise RuntimeError("the stand-in executor runs Triton's interpreter: set TRITON_INTERPRET=1 before "
                               "Triton is imported")
        self.spec, self.config = spec, config
        self.effect, self.applies = effect, applies
        self._dir = tempfile.TemporaryDirectory(prefix="kernelloop-ptx-standin-")
        path = Path(self._dir.name) / "template.py"
        path.write_text(template_source)
        mod_spec = importlib.util.spec_from_file_location("kernelloop_ptx_standin", path)
        self.module = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(self.module)
        self.calls = 0

    def run(self, edited: str | None, case: ProofCase):
        from ...core.reference.inputs import alloc_outputs, alloc_scratch, make_inputs
        inputs = make_inputs(self.spec, case.workload, case.seed, "cpu", case.distribution)
        outputs = alloc_outputs(self.spec, case.workload, "cpu")
        scratch = alloc_scratch(self.spec, case.workload, "cpu")
        self.module.launch(*inputs, *outputs, **scratch, **self.spec.scalars, **self.config)
        self.calls += 1
        if edited is None:
            return inputs, outputs, False
        applied = self.applies(case) if self.applies else True
        if applied and self.effect is not None:
            outputs = self.effect(case, [o.clone() for o in outputs])
        return inputs, outputs, applied

    def time(self, edited: str, case: ProofCase, seed: int):
        import time as _time
        out = {"original": [], "edited": []}
        for _ in range(5):
            for name in ("original", "edited"):
                t0 = _time.perf_counter()
                self.run(None if name == "original" else edited, case)
                out[name].append((_time.perf_counter() - t0) * 1e6)
        return out, "stand-in wall-clock (interpreter; not kernel time)"
