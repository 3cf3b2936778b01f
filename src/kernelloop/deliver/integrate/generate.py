"""`kernelloop.e2e_generate(model, package, input_ids)`: does the patched model generate the same tokens, and how
fast is its generation loop?

Generation: transformers' `generate()`, greedy, with a static KV cache (`cache_implementation="static"`), the prompt
`input_ids` [B, P], exactly N new tokens (`min_new_tokens = max_new_tokens = N`: an end-of-sequence token does not
stop it), eager: transformers' automatic torch.compile of the decode forward (on GPUs, with a static cache) is
turned off (`disable_compile=True`), so the figures are of the model's own forward. The original and the patched
model (the package applied with `apply`) each generate `runs` times, in rounds that visit the two in a seeded random
order, after `warmup` untimed calls each.

Timing, per call: a logits processor appended to generate's own marks each step, once the step's logits exist (one
mark per new token: the first after the prefill forward, each later one after a decode forward). On CUDA the mark
records a CUDA event on the current stream -- no synchronisation, so generate's host and device overlap as they
would without it -- and the intervals are read after the call; on the CPU it reads `time.perf_counter()`. The
prefill time is from a mark before `generate()` to the first step's mark (so it holds generate's own set-up: the
static cache's reset, the masks); the N - 1 decode-step latencies are the intervals between consecutive marks,
pooled over the runs for p50/p90/p99. Tokens per second: B x N over the wall time of the whole `generate()` call
(device synchronised before and after), median over the runs. generate keeps each step's raw logits
(`output_logits=True`) in every call of both variants, for the check below.

Tokens: the patched model's greedy tokens against the original's, step by step. Steps are compared up to and
including the first step where a row's token differs (after it the two continue from different prefixes); each
compared step's logits go through e2e's `compare` (cosine, decisive top-1 under its near-tie rule). The tokens pass
when they are identical, or when they first differ only at rows that are near-ties under that rule -- and every
compared step's check passes. `first_failure` names the first step whose check fails or whose tokens differ at a
decisive row.

Verdict, as e2e's: not delivered when the tokens fail or no call reached the package; on CUDA, delivered when they
pass and the patched generate() is not slower than the original's (paired interval of the per-call times); in the
interpreter, speed decides nothing (delivered is None). On CUDA only, one decode step of each variant is captured in
a CUDA graph and replayed against the HBM roofline (`decode_graph`); elsewhere `graph_note` says why not.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from pydantic import Field

from ...base.records import Record
from ...base.records.measurement import SAME_MARGIN, Ratio
from ...core.bench.stats import paired_speedup
from .apply import Applied, apply
from .decode_graph import GraphStep, graph_steps
from .e2e import ModelCallError, OutputCheck, Tolerance, compare, decisive_positions

TIMING_METHOD = ("a logits processor marks each step once its logits exist: CUDA events on the current stream "
                 "(no synchronisation inside generate) on CUDA, time.perf_counter() on the CPU; prefill = call to "
                 "first mark, decode step = interval between consecutive marks; tokens/s = B x N over the "
                 "synchronised wall time of generate()")


class StepLatency(Record):
    """Decode-step latencies, ms, pooled over the runs."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    n: int = Field(description="Step intervals pooled: (N - 1) x runs.")


class GenerationTiming(Record):
    variant: str = Field(description="original or patched.")
    runs: int
    prefill_ms: float = Field(description="Median over the runs: from the call of generate() to the first logits.")
    step: StepLatency
    generate_ms: float = Field(description="Median wall time of one generate() call.")
    tokens_per_s: float = Field(description="batch x new_tokens / (generate_ms / 1000).")
    generate_ms_runs: list[float] = Field(description="Each run's wall time, in the order run.")


class StepCheck(Record):
    step: int = Field(description="0: the token after the prefill; k: the k-th decode step's.")
    rows_differ: list[int] = Field(description="Batch rows whose token differs at this step.")
    near_tie_rows: list[int] = Field(description="Of those, the rows that are near-ties under e2e's rule.")
    check: OutputCheck = Field(description="e2e's compare of this step's logits (its `seed` is the step).")


class TokenCheck(Record):
    identical: bool
    passed: bool
    compared_steps: int
    first_divergence: int | None = Field(description="First step whose tokens differ in some row (None: none).")
    first_failure: int | None = Field(description="First step whose logits check fails or whose tokens differ at "
                                                  "a decisive row (None: none).")
    steps: list[StepCheck]
    note: str = ""


class GenerateReport(Record):
    model: str
    package: str
    device: str
    batch: int
    prompt: int = Field(description="Prompt length P.")
    new_tokens: int = Field(description="N, generated greedily with the static cache.")
    tolerance: Tolerance
    tokens: TokenCheck
    outputs_ok: bool
    timings: list[GenerationTiming]
    timing_method: str = TIMING_METHOD
    speedup: list[Ratio] = Field(default_factory=list, description="Patched generate() over the original's, "
                                                                   "paired by round (CUDA).")
    speed_note: str = ""
    graph: list[GraphStep] = Field(default_factory=list)
    graph_note: str = Field("", description="Why no decode step was captured in a CUDA graph, when none was.")
    delivered: bool | None
    patched: bool
    sites: dict = Field(default_factory=dict)
    counts: dict = Field(default_factory=dict)
    seconds: float = 0.0


class _Marks:
    """The logits processor that marks each step (CUDA events, or perf_counter on the CPU)."""

    def __init__(self, cuda: bool):
        self.cuda, self.marks = cuda, []

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def __call__(self, input_ids, scores):
        self.mark()
        return scores

    def intervals_ms(self) -> list[float]:
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1000 for a, b in zip(self.marks, self.marks[1:])]


def generate_once(model, ids: torch.Tensor, new_tokens: int):
    """(tokens [B, N], logits [N, B, V] float, prefill ms, decode-step ms, wall ms) of one greedy generate()."""
    from transformers import LogitsProcessorList
    cuda = ids.device.type == "cuda"
    marks = _Marks(cuda)
    cfg = model.config
    pad = cfg.pad_token_id if cfg.pad_token_id is not None else (cfg.eos_token_id or 0)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    marks.mark()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, cache_implementation="static", use_cache=True,
                         return_dict_in_generate=True, output_logits=True, pad_token_id=pad, disable_compile=True,
                         logits_processor=LogitsProcessorList([marks]))
    if cuda:
        torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) * 1000
    gaps = marks.intervals_ms()
    logits = torch.stack([s.float() for s in out.logits])
    return out.sequences[:, ids.shape[1]:], logits, gaps[0], gaps[1:], wall


def _timing(variant: str, runs: list, batch: int, new_tokens: int) -> GenerationTiming:
    steps = [s for r in runs for s in r[3]] or [0.0]
    p50, p90, p99 = (float(v) for v in np.percentile(steps, [50, 90, 99]))
    wall = float(np.median([r[4] for r in runs]))
    return GenerationTiming(variant=variant, runs=len(runs), prefill_ms=float(np.median([r[2] for r in runs])),
                            step=StepLatency(p50_ms=p50, p90_ms=p90, p99_ms=p99, mean_ms=float(np.mean(steps)),
                                             n=sum(len(r[3]) for r in runs)),
                            generate_ms=wall, tokens_per_s=batch * new_tokens / (wall / 1000),
                            generate_ms_runs=[r[4] for r in runs])


def check_tokens(orig_tokens, orig_logits, new_tokens, new_logits, tol: Tolerance) -> TokenCheck:
    """Step-by-step comparison of two greedy generations (module docstring): tokens [B, N], logits [N, B, V]."""
    steps, first_div, first_fail = [], None, None
    for k in range(orig_tokens.shape[1]):
        check = compare(orig_logits[k], new_logits[k], k, tol)
        differ = (orig_tokens[:, k] != new_tokens[:, k]).nonzero().flatten().tolist()
        ties = (~decisive_positions(orig_logits[k], check.max_abs)).nonzero().flatten().tolist()
        near = [r for r in differ if r in ties]
        steps.append(StepCheck(step=k, rows_differ=differ, near_tie_rows=near, check=check))
        if first_fail is None and (not check.passed or len(near) < len(differ)):
            first_fail = k
        if differ:
            first_div = k
            break
    note = "" if first_div is None else (f"tokens differ from step {first_div} on; later steps continue from "
                                         f"different prefixes and are not compared")
    return TokenCheck(identical=first_div is None, passed=first_fail is None, compared_steps=len(steps),
                      first_divergence=first_div, first_failure=first_fail, steps=steps, note=note)


def _rounds(model, applied: Applied, ids, new_tokens: int, runs: int, warmup: int, seed: int) -> dict[str, list]:
    """Each variant's generate() results: `warmup` untimed calls each, then `runs` rounds in seeded random order."""
    states = {"original": applied.undo, "patched": applied.redo}
    for name, enter in states.items():
        enter()
        for _ in range(warmup):
            generate_once(model, ids, new_tokens)
    rng = random.Random(seed)
    results = {k: [] for k in states}
    for _ in range(runs):
        order = list(states)
        rng.shuffle(order)
        for name in order:
            states[name]()
            results[name].append(generate_once(model, ids, new_tokens))
    return results


def _original_runs(model, ids, new_tokens: int):
    """The unpatched model's first generate(); ModelCallError when it raises."""
    try:
        with torch.no_grad():
            return generate_once(model, ids, new_tokens)
    except Exception as e:  # noqa: BLE001 - the model's own failure: said in one line
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ModelCallError(f"{type(model).__name__} raised generating from its prompt: {type(e).__name__}: "
                             f"{text}") from e


def _speed(results: dict[str, list], device: str) -> tuple[list[Ratio], str]:
    if device != "cuda":
        return [], "not measured (interpreter): the timings above are interpreter runs, no verdict"
    base = [r[4] * 1000 for r in results["original"]]
    subj = [r[4] * 1000 for r in results["patched"]]
    if len(base) < 3:
        return [], f"not judged: {len(base)} runs, a paired interval needs at least 3"
    return [paired_speedup(base, subj, name="original generate()", bootstrap=1000, confidence=0.95,
                           margin=SAME_MARGIN, seed=2)], ""


def e2e_generate(model, package, input_ids: torch.Tensor, *, new_tokens: int = 16, tolerance: Tolerance | None = None,
                 runs: int | None = None, warmup: int | None = None, graph: bool | None = None, seed: int = 0,
                 copy_gbps: float | None = None, name: str = "") -> GenerateReport:
    """Greedy static-cache generation of `model` with `package` applied against the model itself (module
    docstring); the model is left unpatched. `input_ids` [B, P]; `runs` timed generate() calls per variant (default
    5 on CUDA, 1 elsewhere); `graph`: capture a decode step in a CUDA graph (default: on CUDA); `copy_gbps`: the
    roof's bandwidth (default: the device's measured copy bandwidth)."""
    t0 = time.perf_counter()
    tol = tolerance or Tolerance()
    device = input_ids.device.type
    cuda = device == "cuda"
    runs = runs if runs is not None else (5 if cuda else 1)
    warmup = warmup if warmup is not None else (1 if cuda else 0)
    first = _original_runs(model, input_ids, new_tokens)
    applied = apply(model, package)
    for k in package.kernels.values():
        k.reset_counts()
    try:
        with torch.no_grad():
            results = _rounds(model, applied, input_ids, new_tokens, runs, warmup, seed)
            counts = package.counts()
            patched = any(k.hits or k.fallbacks for k in package.kernels.values())
            steps, note = _graph(model, applied, input_ids, new_tokens, graph, cuda, copy_gbps)
    finally:
        applied.undo()
    orig, mine = results["original"][0] if results["original"] else first, results["patched"][0]
    tokens = check_tokens(orig[0], orig[1], mine[0], mine[1], tol)
    if not torch.equal(first[0], orig[0]):
        tokens = tokens.model_copy(update={"note": "; ".join(filter(None, [tokens.note, "the original model's "
                                                                           "own generate() calls differ"]))})
    speedup, speed_note = _speed(results, device)
    delivered = None
    if not tokens.passed or not patched:
        delivered = False
    elif speedup:
        delivered = speedup[0].verdict.value != "SLOWER"
    batch, prompt = input_ids.shape
    return GenerateReport(
        model=name or type(model).__name__, package=f"{package.manifest.name} {package.manifest.version}",
        device=device, batch=batch, prompt=prompt, new_tokens=new_tokens, tolerance=tol, tokens=tokens,
        outputs_ok=tokens.passed, timings=[_timing(k, v, batch, new_tokens) for k, v in results.items()],
        speedup=speedup, speed_note=speed_note, graph=steps, graph_note=note, delivered=delivered, patched=patched,
        sites=applied.report.as_dict(), counts=counts, seconds=time.perf_counter() - t0)


def _graph(model, applied: Applied, ids, new_tokens: int, graph: bool | None, cuda: bool, copy_gbps):
    if graph is False:
        return [], "not captured (graph=False)"
    if not cuda:
        return [], "skipped: CUDA graphs need a CUDA device (this run is on the CPU / Triton interpreter)"
    return graph_steps(model, ids, ids.shape[1] + new_tokens, {"original": applied.undo, "patched": applied.redo},
                       copy_gbps=copy_gbps), ""


def save(report: GenerateReport, out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "generate.json"
    path.write_text(json.dumps(report.model_dump(mode="json"), indent=1))
    return path
