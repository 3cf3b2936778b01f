"""Statistical checks of an output against the truth, beyond the per-element box of `atol + rtol*|ref|`.

A per-element box wide enough for an honest kernel's worst element admits a kernel whose every element is off by a
little in the same direction: an output scaled by 1.0099 (fp16), 1.0199 (bf16) or 1.000099 (fp32) stays inside
rtol = 1e-2, 2e-2, 1e-4. Honest rounding errors are small on most elements and have no common sign, so two
statistics over the whole output separate them:

- **bias**: the mean signed relative error, weighted by |ref| (sum of sign(ref) * (out - ref) over the sum of |ref|,
  each |ref| at least the output dtype's smallest normal): a uniform scale by 1 + s reads s exactly. An honest
  kernel's bias is bounded by its rounding: one rounding of the output (unit roundoff u of the output dtype, with
  directed rounding -- the interpreter truncates to bf16 -- up to 2u) plus the accumulation in float32 over the
  reduction of length L (u32 * sqrt(L): rounding errors of a sum grow like sqrt(L) when they have no common sign).
  Bound: BIAS_ROUNDINGS x u_out + BIAS_MARGIN x u32 sqrt(L) (BIAS_ROUNDINGS = 3: directed rounding's mean error
  of up to 2u with a margin; an honest truncating bf16 store reads about -2.6e-3, against a bound of 1.2e-2).
- **ULP distance**: the distance, in units in the last place of the output dtype, between each output element and
  the float64 truth rounded to that dtype (the ordered integer images of the two values). An honest kernel is within
  a unit or two on most elements (elements near zero where the truth comes from cancellation may be far in ULPs, and
  are a minority), so the ULP_QUANTILE quantile must stay under ULP_MARGIN x (1 + u32 sqrt(L) / u_out).

L is the op's `reduction` expression (base/records/spec.py; the largest axis where an op does not say). The margins were
calibrated on the honest templates of every built-in op over many seeds and every distribution (tests/verify/
gallery3/test_gallery3_semantics.py runs them): none comes within a factor of 2 of either bound, while each scaled
output above exceeds the bias bound on every interpreter workload of the norm and softmax ops.
"""

from __future__ import annotations

import math

import torch

UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8, torch.float32: 2.0 ** -24,
                 torch.float64: 2.0 ** -53}
ACCUMULATION_ROUNDOFF = 2.0 ** -24   # every built-in template (and the contract) accumulates in float32
BIAS_ROUNDINGS = 3.0
BIAS_MARGIN = 2.0
ULP_QUANTILE = 0.5
ULP_MARGIN = 4.0
MIN_ELEMENTS = 16   # outputs smaller than this carry too few elements for a statistic: the per-element box judges


def bias_bound(dtype: torch.dtype, length: int) -> float:
    """The largest |mean signed relative error| an honest kernel's rounding explains (see the module docstring)."""
    return BIAS_ROUNDINGS * UNIT_ROUNDOFF[dtype] + BIAS_MARGIN * ACCUMULATION_ROUNDOFF * math.sqrt(max(1, length))


def ulp_bound(dtype: torch.dtype, length: int) -> float:
    """The largest ULP_QUANTILE quantile of the ULP distance an honest kernel's rounding explains."""
    return ULP_MARGIN * (1.0 + ACCUMULATION_ROUNDOFF * math.sqrt(max(1, length)) / UNIT_ROUNDOFF[dtype])


def signed_bias(out: torch.Tensor, ref: torch.Tensor) -> float:
    """sum(sign(ref) * (out - ref)) / sum(max(|ref|, tiny)) over the elements where both are finite."""
    o, r = out.double().flatten(), ref.double().flatten()
    keep = torch.isfinite(o) & torch.isfinite(r)
    o, r = o[keep], r[keep]
    if not r.numel():
        return 0.0
    den = r.abs().clamp_min(torch.finfo(out.dtype).tiny).sum()
    return float((torch.sign(r) * (o - r)).sum() / den)


_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _ordered(x: torch.Tensor) -> torch.Tensor:
    """The floats of `x` as integers in the order of their values (adjacent floats differ by 1; -0 == +0)."""
    i = x.contiguous().view(_INT[x.element_size()]).long()
    top = 1 << (8 * x.element_size() - 1)
    return torch.where(i < 0, -(i + top), i)


def ulp_distances(out: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|out - round(ref)| in units in the last place of out's dtype, as float64, over the elements where both are
    finite."""
    r = ref.to(out.device).to(out.dtype)
    keep = (torch.isfinite(out) & torch.isfinite(r)).flatten()
    a, b = _ordered(out).flatten()[keep], _ordered(r).flatten()[keep]
    return (a - b).abs().double()


def semantic_problem(name: str, out: torch.Tensor, ref: torch.Tensor, length: int) -> str | None:
    """A message naming the failed check (bias or ULP distribution) of one output, or None."""
    if not out.is_floating_point() or out.dtype not in UNIT_ROUNDOFF or out.numel() < MIN_ELEMENTS:
        return None
    ref = ref.to(out.device)
    bias, bound = signed_bias(out, ref), bias_bound(out.dtype, length)
    if abs(bias) > bound:
        return f"{name}: bias: mean relative error {bias:+.2e} over bound {bound:.2e} (reduction length {length})"
    ulps = ulp_distances(out, ref)
    if ulps.numel() >= MIN_ELEMENTS:
        k = max(1, math.ceil(ULP_QUANTILE * ulps.numel()))
        q, bound = float(torch.kthvalue(ulps, k).values), ulp_bound(out.dtype, length)
        if q > bound:
            return (f"{name}: ulp: {ULP_QUANTILE:.0%} quantile of the distance to the rounded truth {q:.3g} ulp over "
                    f"bound {bound:.3g} (reduction length {length})")
    return None


__all__ = ["bias_bound", "semantic_problem", "signed_bias", "ulp_bound", "ulp_distances"]
