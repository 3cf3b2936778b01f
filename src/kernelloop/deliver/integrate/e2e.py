"""`kernelloop.e2e(model, package, inputs)`: is the patched model right, and is it faster?

Outputs: the patched model against the original on fresh seeded inputs (each seed its own draw of the example's
shape: token ids below the vocabulary, floats from a normal), with a task-level tolerance for language models --
max-abs difference and cosine similarity of the logits, and top-1 agreement of the next-token predictions, judged
over the decisive positions: those whose original top-2 gap exceeds twice the observed max |diff| (each of the two
logits may move by max |diff|, so a smaller gap can flip -- or tie -- within the numerical difference seen); the
others are counted as near-ties. By that bound a decisive position cannot flip unless the outputs are non-finite:
top-1 agreement is reported (with the count of near-ties) but the verdict rests on the cosine, finiteness and,
when set, max_abs. A run where no call of the model reached the package (no call site replaced, or none that ran)
is not delivered: the outputs compared are the model's own. The unpatched model raising on its inputs is a
ModelCallError.
Speed (CUDA only): original, patched, torch.compile of each, timed with CUDA events in rounds that visit the
variants in a seeded random order, medians with bootstrap intervals and the patched model's speed-up over the
original with a paired interval. In the interpreter the speed is "not measured": never reported as a win or a loss.
Delivered means: some call reached the package, outputs within tolerance and, on a GPU, the patched model not
slower than the original.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Callable

import torch
from pydantic import Field

from ...core.bench.stats import paired_speedup, summarize
from ..package.runtime import FROM_TORCH
from ...base.records import DType, Record
from ...base.records.measurement import SAME_MARGIN, Ratio, Stats
from .apply import Applied, apply


class Tolerance(Record):
    """Task-level tolerance on the model's output (logits for a language model)."""

    min_cosine: float = Field(0.999, description="Cosine similarity of patched and original logits, at least.")
    min_top1: float = Field(0.99, description="Share of positions whose arg-max token agrees, at least (among the "
                                              "decisive ones: original top-2 margin above twice the observed max "
                                              "|diff|).")
    max_abs: float | None = Field(None, description="Largest |patched - original| allowed (None: reported only).")


class OutputCheck(Record):
    seed: int
    max_abs: float = Field(description="Largest absolute difference of the outputs.")
    cosine: float = Field(description="Cosine similarity of the flattened outputs (in float64).")
    top1: float | None = Field(None, description="Share of positions whose arg-max over the last dim agrees.")
    top1_decisive: float | None = Field(None, description="The same over the decisive positions, whose original "
                                                          "top-2 margin exceeds twice max_abs (each of the two "
                                                          "logits may move by max_abs, so a smaller margin can "
                                                          "flip within the observed numerical difference): what "
                                                          "min_top1 judges.")
    ties: int = Field(0, description="Positions left out of top1_decisive as near-ties.")
    passed: bool


class ModelCallError(RuntimeError):
    """The unpatched model raised on its example inputs (or gave no output tensor): nothing to compare against."""


class VariantTime(Record):
    variant: str = Field(description="original, patched, compile(original) or compile(patched).")
    ms: Stats = Field(description="Per-call time in ms (the Stats fields are in ms here).")


class E2EReport(Record):
    model: str
    package: str
    device: str
    tolerance: Tolerance
    checks: list[OutputCheck]
    outputs_ok: bool
    times: list[VariantTime] = Field(default_factory=list)
    speedup: list[Ratio] = Field(default_factory=list, description="patched over original; compile(patched) over "
                                                                   "compile(original), paired intervals.")
    speed_note: str = Field("", description="Why speed was not measured, when it was not.")
    delivered: bool | None = Field(description="Outputs within tolerance and not slower on a GPU; None where speed "
                                               "was not measured (outputs alone decide nothing about delivery).")
    sites: dict = Field(default_factory=dict, description="apply's report: replaced and left sites with reasons.")
    patched: bool = Field(True, description="Whether any call of the model reached the package during the checks "
                                            "(a replaced call site that ran); when none did, the outputs compared "
                                            "are the model's own and the report is not delivered.")
    counts: dict = Field(default_factory=dict, description="The package's dispatch counts during the checks.")
    seconds: float = 0.0


def output_logits(out) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(f"cannot find the output tensor in a {type(out).__name__}")


def fresh_inputs(example: tuple, model, seed: int) -> tuple:
    """Inputs of the example's shapes and dtypes, drawn anew from `seed` (ids below the model's vocabulary)."""
    g = torch.Generator().manual_seed(seed)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    out = []
    for x in example:
        if not isinstance(x, torch.Tensor):
            out.append(x)
        elif x.dtype in (torch.int64, torch.int32):
            hi = vocab or int(x.max()) + 1
            out.append(torch.randint(0, hi, tuple(x.shape), generator=g, dtype=x.dtype).to(x.device))
        else:
            out.append(torch.randn(tuple(x.shape), generator=g, dtype=torch.float32).to(x.dtype).to(x.device))
    return tuple(out)


def decisive_positions(original: torch.Tensor, max_abs: float) -> torch.Tensor:
    """The near-tie rule: True where the original logits' top-2 gap exceeds twice `max_abs` (each of the top two may
    move by max_abs, so a smaller gap can flip -- or tie -- within the observed numerical difference); the others
    are near-ties. One bool per position (the last dim is the vocabulary)."""
    top2 = original.double().topk(2, dim=-1).values
    return (top2[..., 0] - top2[..., 1]) > 2 * max_abs


def compare(a: torch.Tensor, b: torch.Tensor, seed: int, tol: Tolerance) -> OutputCheck:
    a64, b64 = a.double().flatten(), b.double().flatten()
    max_abs = float((a64 - b64).abs().max()) if a64.numel() else 0.0
    cos = float(torch.nn.functional.cosine_similarity(a64, b64, dim=0)) if a64.numel() else 1.0
    top1 = decisive = None
    ties = 0
    if a.dim() >= 1 and a.shape[-1] > 1:
        agree = a.argmax(-1) == b.argmax(-1)
        top1 = float(agree.double().mean())
        clear = decisive_positions(a, max_abs)
        ties = int((~clear).sum())
        decisive = float(agree[clear].double().mean()) if clear.any() else 1.0
    ok = (torch.isfinite(b64).all().item() == torch.isfinite(a64).all().item() and cos >= tol.min_cosine
          and (decisive is None or decisive >= tol.min_top1) and (tol.max_abs is None or max_abs <= tol.max_abs))
    return OutputCheck(seed=seed, max_abs=max_abs, cosine=cos, top1=top1, top1_decisive=decisive, ties=ties,
                       passed=bool(ok))


def time_variants(variants: dict[str, Callable[[], object]], rounds: int, calls: int, seed: int,
                  before: Callable[[str], None] | None = None) -> dict[str, list[float]]:
    """Per-call ms of each variant, CUDA events around `calls` back-to-back calls, rounds in seeded random order;
    `before(name)` runs ahead of each variant's warm-up and samples (e.g. to patch or unpatch the model)."""
    rng = random.Random(seed)
    prepare = before or (lambda name: None)
    samples = {k: [] for k in variants}
    for name, fn in variants.items():   # warm-up: compilation and autotuning happen here, outside the samples
        prepare(name)
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            prepare(name)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(calls):
                variants[name]()
            end.record()
            end.synchronize()
            samples[name].append(start.elapsed_time(end) / calls)
    return samples


def variant_times(us: dict[str, list[float]]) -> list[VariantTime]:
    """Medians with bootstrap intervals of per-call times given in µs, reported in ms."""
    out = []
    for k, v in us.items():
        st = summarize(v, bootstrap=1000, confidence=0.95, seed=1)
        out.append(VariantTime(variant=k, ms=Stats(median_us=st.median_us / 1000, ci_low_us=st.ci_low_us / 1000,
                                                   ci_high_us=st.ci_high_us / 1000, iqr_us=st.iqr_us / 1000,
                                                   n=st.n)))
    return out


def _originals(model, make, seeds) -> tuple[dict, str]:
    """The unpatched model's outputs per seed and the inputs' device type; ModelCallError when the model raises."""
    try:
        first = make(seeds[0])
        device = next((x.device.type for x in first if isinstance(x, torch.Tensor)), "cpu")
        return {s: output_logits(model(*make(s))) for s in seeds}, device
    except Exception as e:  # noqa: BLE001 - the model's own failure on its inputs: said in one line
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ModelCallError(f"{type(model).__name__} raised on its example inputs: {type(e).__name__}: {text}") \
            from e


def mismatch(model, package, device: str) -> str:
    """Why `package` cannot serve `model` on `device` ('' when it can): the model's first floating parameter is not
    on `device` or is of a dtype no entry of the package takes, or the package was verified for another kind of
    device (in the interpreter: CPU tensors; on a GPU: CUDA tensors)."""
    param = next((p for p in model.parameters() if p.is_floating_point()), None)
    dtypes = sorted({e.guard.dtype.value for k in package.kernels.values() for e in k.table.entries})
    if param is not None and param.device.type != device:
        return f"the model's parameters are on {param.device.type}, not on {device}"
    if param is not None and dtypes and FROM_TORCH.get(param.dtype) not in {DType(d) for d in dtypes}:
        have = FROM_TORCH[param.dtype].value if param.dtype in FROM_TORCH else str(param.dtype)
        return f"the model is {have}; the package's kernels are for {', '.join(dtypes)} (pass --dtype {dtypes[0]})"
    archs = sorted({o.measured_on.arch for o in package.manifest.ops})
    want = "cpu" if archs == ["interpret"] else "cuda" if archs and "interpret" not in archs else device
    if want != device:
        where = "in the Triton interpreter (CPU tensors)" if want == "cpu" else "on " + ", ".join(archs)
        return f"the package was verified {where}; the model runs on {device}"
    return ""


def _set(applied: Applied, on: bool) -> None:
    applied.redo() if on else applied.undo()


def e2e(model, package, inputs, *, seeds=(0, 1, 2), tolerance: Tolerance | None = None, speed: bool | None = None,
        rounds: int = 15, calls: int = 5, name: str = "", compile_modes: tuple[str, ...] = ("default",)
        ) -> E2EReport:
    """Check and time `package` applied to `model` against the model itself; the model is left unpatched.
    `inputs`: an example tuple (fresh draws of its shapes are used) or a callable seed → inputs tuple.
    `compile_modes`: torch.compile modes timed for both (e.g. "reduce-overhead": CUDA graphs)."""
    t0 = time.perf_counter()
    tol = tolerance or Tolerance()
    example = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,) if isinstance(inputs, torch.Tensor) \
        else None
    make = (lambda s: fresh_inputs(example, model, s)) if example is not None else inputs
    checks = []
    with torch.no_grad():
        originals, device = _originals(model, make, seeds)
        applied = apply(model, package)
        for k in package.kernels.values():
            k.reset_counts()
        try:
            for s in seeds:
                checks.append(compare(originals[s], output_logits(model(*make(s))), s, tol))
            counts = package.counts()
            patched = any(k.hits or k.fallbacks for k in package.kernels.values())
            times, ratios, note = [], [], ""
            if speed is None:
                speed = device == "cuda"
            if speed and device != "cuda":
                note = "speed is measured on CUDA only: these are interpreter runs"
                speed = False
            elif not speed:
                note = "not measured (interpreter)" if device != "cuda" else "not measured (speed=False)"
            if speed:
                args = make(seeds[0])
                variants = {"original": lambda: model(*args), "patched": lambda: model(*args)}
                states = {"original": False, "patched": True}
                pairs = [("original", "patched")]
                for mode in compile_modes:
                    tag = "compile" if mode == "default" else f"compile:{mode}"
                    compiled = torch.compile(model) if mode == "default" else torch.compile(model, mode=mode)
                    for which, on in (("original", False), ("patched", True)):
                        variants[f"{tag}({which})"] = (lambda c=compiled: c(*args))
                        states[f"{tag}({which})"] = on
                    pairs.append((f"{tag}(original)", f"{tag}(patched)"))
                samples = time_variants(variants, rounds, calls, seed=seeds[0],
                                        before=lambda name: _set(applied, states[name]))
                us = {k: [v * 1000 for v in vals] for k, vals in samples.items()}
                times = variant_times(us)
                for base, subj in pairs:
                    ratios.append(paired_speedup(us[base], us[subj], name=base, bootstrap=1000, confidence=0.95,
                                                 margin=SAME_MARGIN, seed=2))
        finally:
            applied.undo()
    ok = all(c.passed for c in checks)
    delivered = None
    if ratios:
        delivered = ok and patched and ratios[0].verdict.value != "SLOWER"
    elif not ok or not patched:
        delivered = False
    return E2EReport(model=name or type(model).__name__, package=f"{package.manifest.name} {package.manifest.version}",
                     device=device, tolerance=tol, checks=checks, outputs_ok=ok, times=times, speedup=ratios,
                     speed_note=note, delivered=delivered, sites=applied.report.as_dict(), patched=patched,
                     counts=counts,
                     seconds=time.perf_counter() - t0)


def save(report: E2EReport, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "e2e.json"
    path.write_text(json.dumps(report.model_dump(mode="json"), indent=1))
    return path
