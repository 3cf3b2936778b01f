"""Judge a candidate's outputs against the reference.

Order of checks, first failure wins: output type/shape/dtype, unwritten (still poisoned) elements,
non-finite values where the reference is finite, degenerate (constant / all-zero) outputs where the reference
varies, values outside `atol + rtol*|ref|` (every element: matched ratio 1.0), a biased output or a ULP-distance
distribution wider than honest rounding explains (core/verify/semantics.py), mutated inputs.

Integer and bool outputs (indices, counts, masks) are compared exactly: any element that differs from the reference
fails, the message naming how many and the first one's index and values; no tolerance, degeneracy or statistic
applies. Their poison is a fixed value (core/reference/inputs.py): an element holding it where the truth is another
value is reported unwritten.
"""

from __future__ import annotations

import torch

from ...base.records import DType, ErrorMetrics, OpSpec, Status, Tolerance, Verdict, Workload
from ..reference.inputs import POISON_VALUES, TORCH_DTYPES, is_poison, tensor_shape
from .semantics import semantic_problem


def error_metrics(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> ErrorMetrics:
    o = out.to(ref.dtype)
    diff = (o - ref).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    allowed = tol.atol + tol.rtol * ref.abs()
    bad = diff > allowed
    rel = diff / ref.abs().clamp_min(torch.finfo(ref.dtype).tiny)
    cap = diff / allowed.clamp_min(torch.finfo(ref.dtype).tiny)
    worst = int(torch.argmax(diff.flatten()).item()) if diff.numel() else 0
    idx = list(torch.unravel_index(torch.tensor(worst), diff.shape)) if diff.numel() else []
    return ErrorMetrics(output=name, max_abs=float(diff.max()) if diff.numel() else 0.0,
                        max_rel=float(rel.max()) if rel.numel() else 0.0,
                        mismatched=int(bad.sum()), total=diff.numel(), worst_index=[int(i) for i in idx],
                        matched_ratio=1.0 - float(bad.sum()) / max(1, diff.numel()),
                        error_cap_ratio=min(float(cap.max()) if cap.numel() else 0.0, 1e300))


def exact_mismatch(name: str, out: torch.Tensor, ref: torch.Tensor) -> tuple[ErrorMetrics, str | None]:
    """An integer or bool output against its exact truth: its metrics, and a message naming the count of differing
    elements and the first one's index and values (None: every element equal)."""
    o, r = out.to(torch.int64), ref.to(out.device).to(torch.int64)
    differ = o != r
    n = int(differ.sum())
    diff = (o - r).abs()
    first = [int(i) for i in torch.nonzero(differ)[0]] if n else []
    m = ErrorMetrics(output=name, max_abs=float(diff.max()) if diff.numel() else 0.0, max_rel=0.0 if not n else
                     float((diff.double() / r.abs().double().clamp_min(1)).max()), mismatched=n, total=differ.numel(),
                     worst_index=first, matched_ratio=1.0 - n / max(1, differ.numel()),
                     error_cap_ratio=1e300 if n else 0.0)
    if not n:
        return m, None
    at = tuple(first)
    return m, (f"{name}: {n} of {differ.numel()} elements differ from the exact reference (first at {first}: got "
               f"{out[at].item()}, expected {ref[at].item()})")


# An output whose spread is below this share of the reference's spread is "constant" (zeros included).
DEGENERATE_SPREAD = 1e-3


def is_degenerate(out: torch.Tensor, ref: torch.Tensor) -> bool:
    """True when the reference varies but the output (almost) does not: constant or all-zero answers.

    A reference whose whole range is within one unit in the last place of the output's dtype (at the reference's
    largest magnitude) does not vary in that dtype: its correctly rounded answer is a constant, which is then not
    degenerate (e.g. gemm_bias_gelu with N = K = 1 on near-zero inputs: every row is gelu(bias) + ~1e-6, one fp16
    value). Every element still has to pass the value check."""
    if ref.numel() < 2:
        return False
    r = ref.double()
    ref_spread = float(r.std())
    if not ref_spread > 0:
        return False
    if out.is_floating_point() and float(r.max() - r.min()) <= torch.finfo(out.dtype).eps * float(r.abs().max()):
        return False
    return float(out.double().std()) < DEGENERATE_SPREAD * ref_spread


def check_outputs(spec: OpSpec, workload: Workload, outputs: list, references: list[torch.Tensor],
                  inputs_before: list[torch.Tensor], inputs_after: list, case: str) -> Verdict:
    tol = spec.tolerance_for(workload)
    if len(references) != len(spec.outputs):   # truth() raises a SpecError first; never compare fewer outputs
        raise ValueError(f"{len(references)} reference result(s) for {len(spec.outputs)} declared output(s)")
    if len(outputs) != len(spec.outputs):
        return Verdict(status=Status.WRONG_SHAPE, case=case,
                       message=f"expected {len(spec.outputs)} output(s), got {len(outputs)}")
    for t, out in zip(spec.outputs, outputs):
        want_shape = tensor_shape(t, workload)
        want_dtype = TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)]
        if type(out) is not torch.Tensor:
            return Verdict(status=Status.WRONG_SHAPE, case=case, message=f"{t.name}: not a plain torch.Tensor")
        if tuple(out.shape) != want_shape or out.dtype != want_dtype:
            return Verdict(status=Status.WRONG_SHAPE, case=case,
                           message=f"{t.name}: got {tuple(out.shape)} {out.dtype}, expected {want_shape} {want_dtype}")
    metrics = []
    for t, out, ref in zip(spec.outputs, outputs, references):
        ref = ref.to(out.device)
        unwritten = is_poison(out)
        if out.dtype in POISON_VALUES:   # an integer poison value is also a value: unwritten only where truth differs
            unwritten &= ref.to(torch.int64) != POISON_VALUES[out.dtype]
        if bool(unwritten.any()):
            n = int(unwritten.sum())
            first = [int(i) for i in torch.nonzero(unwritten)[0]]
            return Verdict(status=Status.WRONG_INCOMPLETE, case=case,
                           message=f"{t.name}: {n} of {out.numel()} elements never written (first at {first})")
        nonfinite = ~torch.isfinite(out) & torch.isfinite(ref)
        if bool(nonfinite.any()):
            first = [int(i) for i in torch.nonzero(nonfinite)[0]]
            return Verdict(status=Status.WRONG_NONFINITE, case=case,
                           message=f"{t.name}: {int(nonfinite.sum())} NaN/Inf element(s) where the reference is "
                                   f"finite (first at {first})")
        if not out.is_floating_point():
            m, problem = exact_mismatch(t.name, out, ref)
            metrics.append(m)
            if problem:
                return Verdict(status=Status.WRONG_VALUES, case=case, metrics=metrics, message=problem)
            continue
        m = error_metrics(t.name, out, ref, tol)
        metrics.append(m)
        if is_degenerate(out, ref):
            return Verdict(status=Status.WRONG_VALUES, case=case, metrics=metrics,
                           message=f"{t.name}: degenerate output (constant or zero) where the reference varies")
        if m.mismatched:
            return Verdict(status=Status.WRONG_VALUES, case=case, metrics=metrics,
                           message=f"{t.name}: {m.mismatched} of {m.total} elements outside atol={tol.atol} "
                                   f"rtol={tol.rtol} (max abs err {m.max_abs:.3g} at {m.worst_index})")
        problem = semantic_problem(t.name, out, ref, spec.reduction_length(workload.axes))
        if problem:
            return Verdict(status=Status.WRONG_VALUES, case=case, metrics=metrics, message=problem)
    if len(inputs_after) != len(inputs_before):
        return Verdict(status=Status.WRONG_INPUT_MUTATED, case=case, metrics=metrics, message="inputs missing")
    for t, before, after in zip(spec.inputs, inputs_before, inputs_after):
        if type(after) is not torch.Tensor or after.shape != before.shape or after.dtype != before.dtype:
            return Verdict(status=Status.WRONG_INPUT_MUTATED, case=case, metrics=metrics,
                           message=f"input {t.name} changed during the call (replaced: shape or dtype)")
        if before.numel() == 0:   # an empty input holds nothing to change (and may have stride 0: no byte view)
            continue
        a, b = (after.view(torch.uint8), before.view(torch.uint8)) if after.dtype != torch.bool else (after, before)
        if not torch.equal(a, b):
            return Verdict(status=Status.WRONG_INPUT_MUTATED, case=case, metrics=metrics,
                           message=f"input {t.name} changed during the call: {_changed(before, after)}")
    return Verdict(status=Status.PASSED, case=case, metrics=metrics)


def open_guarded(spec: OpSpec, workload: Workload, runs: list, scratch: list, case: str, label: str = "call"
                 ) -> tuple[list[list[torch.Tensor]], Verdict | None]:
    """Each call's outputs as views of the guarded backings the controller copied (core/reference/guards.py), and the
    verdict (REJECTED: memory-safety) of the first guard zone a call wrote into (before or after an output or a
    workspace), or of a backing that is not the size the controller expects; (outputs, None) when every guard holds
    its sentinel. A buffer is named by its output (or "scratch") and `label` with the 1-based index of its call
    ("y (call 2)"; the timed calls' output sets: "y (timed set 2)")."""
    from ..reference.guards import guard_breach, unguard
    shapes = [(t.name, tensor_shape(t, workload), TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)])
              for t in spec.outputs]
    out = []
    for k, backings in enumerate(runs, start=1):
        if len(backings) != len(shapes):
            return out, Verdict(status=Status.WRONG_SHAPE, case=case,
                                message=f"expected {len(shapes)} output(s), got {len(backings)}")
        views = []
        for (name, shape, dtype), b in zip(shapes, backings):
            try:
                view = unguard(b, shape, dtype)
            except ValueError as e:
                return out, Verdict(status=Status.WRONG_SHAPE, case=case, message=f"{name}: {e}")
            breach = guard_breach(f"{name} ({label} {k})", b, view.numel() * view.element_size())
            if breach:
                return out, Verdict(status=Status.REJECTED, case=case, message=breach)
            views.append(view)
        out.append(views)
    for k, b in enumerate(scratch, start=1):
        if spec.scratch is None:
            break
        dtype = TORCH_DTYPES[DType(spec.scratch.dtype)]
        n = spec.scratch_numel(workload.axes)
        try:
            unguard(b, (n,), dtype)
        except ValueError as e:
            return out, Verdict(status=Status.WRONG_SHAPE, case=case, message=f"scratch: {e}")
        breach = guard_breach(f"scratch ({label} {k})", b, n * torch.empty((), dtype=dtype).element_size())
        if breach:
            return out, Verdict(status=Status.REJECTED, case=case, message=breach)
    return out, None


def check_repeats(spec: OpSpec, first: list[torch.Tensor], repeats: list[list[torch.Tensor]], case: str
                  ) -> Verdict | None:
    """WRONG_NONDETERMINISTIC if any repeated run on the same inputs differs bitwise from the first run."""
    for k, outs in enumerate(repeats, start=2):
        for t, a, b in zip(spec.outputs, first, outs):
            if type(b) is not torch.Tensor or a.shape != b.shape or a.dtype != b.dtype:
                return Verdict(status=Status.WRONG_NONDETERMINISTIC, case=case,
                               message=f"{t.name}: run {k} returned a different shape or dtype")
            differ = a.contiguous().view(torch.uint8) != b.contiguous().view(torch.uint8)
            if bool(differ.any()):
                return Verdict(status=Status.WRONG_NONDETERMINISTIC, case=case,
                               message=f"{t.name}: run {k} on identical inputs differs from run 1 in "
                                       f"{int(differ.sum())} byte(s)")
    return None


def _changed(before: torch.Tensor, after: torch.Tensor) -> str:
    """How many elements of an input changed (compared bit for bit), the first one's index and its values."""
    if before.is_floating_point():
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[before.element_size()]
        differ = before.contiguous().view(width) != after.contiguous().view(width)
    else:
        differ = before != after
    where = torch.nonzero(differ)
    if not len(where):
        return "its bytes differ"
    first = tuple(int(i) for i in where[0])
    return (f"{len(where)} of {before.numel()} elements differ (first at {list(first)}: "
            f"{before[first].item()} -> {after[first].item()})")


def input_drift(regenerated: list[torch.Tensor], seen: list[torch.Tensor]) -> tuple[int, int]:
    """How the inputs the worker held just before the candidate's call (`seen`) differ from the controller's
    regeneration of the same seeded inputs: (elements that differ, the largest distance in units in the last place;
    a sign change, a shape or dtype change or a non-float difference counts as 2**31)."""
    far = 2 ** 31
    n, worst = 0, 0
    for a, b in zip(regenerated, seen):
        b = b.to(a.device)
        if a.shape != b.shape or a.dtype != b.dtype:
            return max(a.numel(), 1), far
        if not a.is_floating_point():
            k = int((a != b).sum())
            n, worst = n + k, max(worst, far if k else 0)
            continue
        width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        ia, ib = a.contiguous().view(width).long(), b.contiguous().view(width).long()
        differ = ia != ib
        k = int(differ.sum())
        if k:
            same_sign = (ia < 0) == (ib < 0)
            dist = torch.where(same_sign, (ia - ib).abs(), torch.full_like(ia, far))
            n, worst = n + k, max(worst, int(dist[differ].max()))
    if len(regenerated) != len(seen):
        return max(n, 1), far
    return n, worst

