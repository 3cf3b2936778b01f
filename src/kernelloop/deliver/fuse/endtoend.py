"""The end-to-end check of a composition at one example shape: is the fused model right, and is it faster?

Outputs: the fused model against the original on fresh seeded inputs of the example's shape, with the delivery
path's task-level tolerance (`kernelloop.deliver.integrate.e2e`: cosine of the logits, decisive top-1 agreement) and the
package's dispatch counts (every composed op's kernel hits: a composition whose kernels never ran proves nothing).
Speed (CUDA only), in rounds that visit the variants in a seeded random order, CUDA events around `calls` calls:
`eager` (the model), `torch.compile` and `torch.compile(reduce-overhead)` (of the model; the second replays CUDA
graphs), `exported` (the exported graph, unfused: the composition's own starting point), `exported+causal` (the
same with export's explicit causal masks given back to SDPA as `is_causal`, masks.py: what the composition gains
before any kernel), `fused`, `compile(fused)`, `compile-ro(fused)` (reduce-overhead) and `fused-<op>` (the fused
graph without that op's sites: its end-to-end contribution); a variant whose first call fails is named in the
speed note and not timed; then, in a session of its own, `liger` (Liger-Kernel applied to a copy of the model, where
liger_kernel imports and knows the model) beside `fused`. Paired speed-ups with bootstrap intervals. In the
interpreter speed is not measured.
"""

from __future__ import annotations

import copy

import torch
from pydantic import Field

from ...core.bench.stats import paired_speedup
from ..integrate.e2e import OutputCheck, Tolerance, VariantTime, output_logits, compare, fresh_inputs, time_variants, \
    variant_times
from ...base.records import Record
from ...base.records.measurement import SAME_MARGIN, Ratio
from .compose import rewrite
from .masks import causal_sdpa


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
            checks.append(compare(output_logits(model(*args)), output_logits(fused(*args)), s, tol))
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
    causal = ep.module()
    causal_sdpa(causal, shape)
    causal.graph.eliminate_dead_code()
    causal.recompile()
    variants = {"eager": lambda: model(*args), "torch.compile": _compiled(model, args),
                "torch.compile(reduce-overhead)": _compiled(model, args, "reduce-overhead"),
                "exported": lambda: exported(*args), "exported+causal": lambda: causal(*args),
                "fused": lambda: graph(*args), "compile(fused)": _compiled(graph, args),
                "compile-ro(fused)": _compiled(graph, args, "reduce-overhead")}
    variants, failed = _runnable(variants)
    drop = {}
    if contributions:
        for op in sorted({c.realisation.op for c in chosen}):
            gm, _ = rewrite(ep, [c for c in chosen if c.realisation.op != op], package, shape)
            drop[op] = gm
            variants[f"fused-{op}"] = (lambda g=gm: g(*args))
    with torch.no_grad():
        samples = time_variants(variants, rounds, calls, seed=seeds[0])
    us = {k: [v * 1000 for v in vals] for k, vals in samples.items()}
    pairs = [(a, b) for a, b in (("eager", "fused"), ("torch.compile", "compile(fused)"), ("exported", "fused"),
                                 ("eager", "compile(fused)"), ("exported+causal", "fused"),
                                 ("torch.compile(reduce-overhead)", "compile-ro(fused)"),
                                 ("torch.compile(reduce-overhead)", "compile(fused)")) if a in us and b in us]
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
    ratios = [paired_speedup(us[a], us[b], name=f"{b} over {a}", bootstrap=1000, confidence=0.95, margin=SAME_MARGIN, seed=2)
              for a, b in pairs]
    contrib = {op: paired_speedup(us[f"fused-{op}"], us["fused"], name=f"fused over fused-{op}", bootstrap=1000,
                                  confidence=0.95, margin=SAME_MARGIN, seed=3) for op in drop}
    first = next((r for r, (a, b) in zip(ratios, pairs) if (a, b) == ("eager", "fused")), None)
    kept = ok and first is not None and first.verdict.value != "SLOWER"
    return EndToEnd(shape=shape, tolerance=tol, checks=checks, outputs_ok=ok, counts=counts, times=variant_times(us),
                    speedups=ratios, contributions=contrib, liger_note=liger_note, kept=kept,
                    speed_note="; ".join(f"{k} not timed: {why}" for k, why in failed.items()))


def _compiled(module, args, mode: str | None = None):
    """A call of torch.compile(module, mode=mode) on `args`; under CUDA graphs (reduce-overhead) each call starts a
    new step, so a replay may overwrite the last call's outputs (the timing loop never reads them)."""
    c = torch.compile(module, mode=mode) if mode else torch.compile(module)
    if mode == "reduce-overhead":
        def call():
            torch.compiler.cudagraph_mark_step_begin()
            return c(*args)
        return call
    return lambda: c(*args)


def _runnable(variants: dict) -> tuple[dict, dict[str, str]]:
    """The variants whose first call runs (compilation happens there), and why each of the others failed: a peer
    that cannot run is reported, not fatal to the check."""
    ok, failed = {}, {}
    for name, fn in variants.items():
        try:
            with torch.no_grad():
                fn()
            ok[name] = fn
        except Exception as e:  # noqa: BLE001 - reported in the check's speed note
            failed[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
    return ok, failed
