"""The end-to-end check of a composition at one example shape: is the fused model right, and is it faster?

Outputs: the fused model against the original on fresh seeded inputs of the example's shape, with the delivery
path's task-level tolerance (`kernelloop.integrate.e2e`: cosine of the logits, decisive top-1 agreement) and the
package's dispatch counts (every composed op's kernel hits: a composition whose kernels never ran proves nothing).
Speed (CUDA only), in rounds that visit the variants in a seeded random order, CUDA events around `calls` calls:
`eager` (the model), `torch.compile` (of the model), `exported` (the exported graph, unfused: the composition's
own starting point), `fused`, `compile(fused)` and `fused-<op>` (the fused graph without that op's sites: its
end-to-end contribution); then, in a session of its own, `liger` (Liger-Kernel applied to a copy of the model, where
liger_kernel imports and knows the model) beside `fused`. Paired speed-ups with bootstrap intervals. In the
interpreter speed is not measured.
"""

from __future__ import annotations

import copy

import torch
from pydantic import Field

from ..bench.stats import paired_speedup
from ..integrate.e2e import OutputCheck, Tolerance, VariantTime, _logits, compare, fresh_inputs, time_variants, \
    variant_times
from ..records import Record
from ..records.measurement import Ratio
from .compose import rewrite


class EndToEnd(Record):
    shape: str
    tolerance: Tolerance
    checks: list[OutputCheck]
    outputs_ok: bool
    counts: dict = Field(default_factory=dict, description="Kernel hits per op and entry, reference fallbacks.")
    times: list[VariantTime] = Field(default_factory=list)
    speedups: list[Ratio] = Field(default_factory=list, description="Paired: fused over eager, compile(fused) over "
                                                                   "torch.compile, fused over exported, over liger.")
    contributions: dict[str, Ratio] = Field(default_factory=dict, description="Op -> the fused model without it "
                                            "over the fused model (above 1: the op makes the model faster).")
    liger_note: str = ""
    speed_note: str = ""
    kept: bool | None = Field(description="Outputs within tolerance and, on a GPU, fused not slower than eager; "
                                          "None where speed was not measured.")


def _liger_copy(model):
    """A copy of the model with Liger-Kernel applied; (None, why) where it does not apply."""
    try:
        from liger_kernel.transformers import _apply_liger_kernel_to_instance
    except ImportError as e:
        return None, f"not measured: liger_kernel does not import ({e})"
    twin = copy.deepcopy(model)
    try:
        _apply_liger_kernel_to_instance(model=twin)
    except Exception as e:  # noqa: BLE001 - a model Liger does not know is reported, not raised
        return None, f"not measured: Liger-Kernel does not apply ({type(e).__name__}: {e})"
    return twin, ""


def end_to_end(model, fused, example: tuple, ep, package, shape: str, chosen, *, seeds=(0, 1, 2),
               tolerance: Tolerance | None = None, rounds: int = 10, calls: int = 3, liger: bool = True,
               contributions: bool = True) -> EndToEnd:
    tol = tolerance or Tolerance()
    device = next((x.device.type for x in example if isinstance(x, torch.Tensor)), "cpu")
    for k in package.kernels.values():
        k.reset_counts()
    checks = []
    with torch.no_grad():
        for s in seeds:
            args = fresh_inputs(example, model, s)
            checks.append(compare(_logits(model(*args)), _logits(fused(*args)), s, tol))
    counts = {op: {"hits": sum(c["entries"].values()), "fallbacks": c["fallbacks"]}
              for op, c in package.counts()["ops"].items()}
    ok = all(c.passed for c in checks)
    if device != "cuda":
        return EndToEnd(shape=shape, tolerance=tol, checks=checks, outputs_ok=ok, counts=counts,
                        speed_note="not measured (interpreter)", kept=None if ok else False)
    args = fresh_inputs(example, model, seeds[0])
    key = shape.replace(",", "_")
    graph = fused.graphs[key]
    exported = ep.module()
    variants = {"eager": lambda: model(*args), "torch.compile": (lambda c=torch.compile(model): c(*args)),
                "exported": lambda: exported(*args), "fused": lambda: graph(*args),
                "compile(fused)": (lambda c=torch.compile(graph): c(*args))}
    drop = {}
    if contributions:
        for op in sorted({c.realisation.op for c in chosen}):
            gm, _ = rewrite(ep, [c for c in chosen if c.realisation.op != op], package, shape)
            drop[op] = gm
            variants[f"fused-{op}"] = (lambda g=gm: g(*args))
    with torch.no_grad():
        samples = time_variants(variants, rounds, calls, seed=seeds[0])
    us = {k: [v * 1000 for v in vals] for k, vals in samples.items()}
    pairs = [("eager", "fused"), ("torch.compile", "compile(fused)"), ("exported", "fused"), ("eager", "compile(fused)")]
    liger_note = ""
    if liger:
        # last and in a session of its own: Liger-Kernel patches transformers' module-level functions (rotary
        # embedding) as it applies, which the model itself would then call too; the fused graph calls ATen ops
        twin, liger_note = _liger_copy(model)
        if twin is not None:
            with torch.no_grad():
                more = time_variants({"fused": lambda: graph(*args), "liger": lambda: twin(*args)}, rounds, calls,
                                     seed=seeds[0] + 1)
            us["liger"] = [v * 1000 for v in more["liger"]]
            us["fused (beside liger)"] = [v * 1000 for v in more["fused"]]
            pairs.append(("liger", "fused (beside liger)"))
            liger_note = "timed after the other variants, beside the fused graph (Liger patches module functions)"
            del twin
    ratios = [paired_speedup(us[a], us[b], name=f"{b} over {a}", bootstrap=1000, confidence=0.95, margin=0.01, seed=2)
              for a, b in pairs]
    contrib = {op: paired_speedup(us[f"fused-{op}"], us["fused"], name=f"fused over fused-{op}", bootstrap=1000,
                                  confidence=0.95, margin=0.01, seed=3) for op in drop}
    kept = ok and ratios[0].verdict.value != "SLOWER"
    return EndToEnd(shape=shape, tolerance=tol, checks=checks, outputs_ok=ok, counts=counts, times=variant_times(us),
                    speedups=ratios, contributions=contrib, liger_note=liger_note, kept=kept)
