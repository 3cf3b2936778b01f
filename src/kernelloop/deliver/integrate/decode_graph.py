"""One decode step of a generating model, on a static KV cache, as a callable with static inputs -- run eagerly here,
captured in a CUDA graph and replayed on a GPU -- and the bytes such a step must read (the HBM roofline's numerator).

The step: a transformers `StaticCache` of `max_len` positions is filled by one prefill forward of the prompt; the
step is then one forward of the greedy next token at cache position P (the prompt's length) with static buffers
(token ids [B, 1], position ids, and the 4-D attention mask transformers builds for that position, made once before
capture so no mask logic -- and no host synchronisation of it -- runs inside the graph), followed by moving the
cache's write position back by one, so every replay rewrites position P and reads the same cache: replays are
identical work and identical logits.

Bytes a step must read: every parameter once (shared ones once), except the input embedding table, of which a step
reads B rows (a tied LM head reads the table: then it is counted), plus the KV cache up to the step's length (P + 1
positions of every layer's keys and values). The static cache's attention reads all `max_len` positions under a
mask; the roofline counts only the ones a step needs.

Replay timing: CUDA events around `calls` back-to-back replays, `rounds` rounds after warm-up, median with a
bootstrap interval; the roof is the device's measured copy bandwidth (kernelloop.tune.profile.ceilings: the cached
ceilings of this device, driver and torch when present, else the copy measured now).
"""

from __future__ import annotations

import inspect
from typing import Callable

import torch
from pydantic import Field

from ...base.records import Record
from ...base.records.measurement import Stats
from ...core.bench.stats import summarize


class GraphStep(Record):
    """One decode step captured in a CUDA graph and replayed, against the HBM roofline."""

    variant: str = Field(description="original or patched.")
    cache_len: int = Field(description="Positions of the KV cache the step attends to (prompt + the new token).")
    replay_us: Stats = Field(description="Time per replay, µs.")
    weight_bytes: int = Field(description="Parameters a step reads: all but the input embedding table (a tied LM "
                                          "head's table counted once).")
    kv_bytes: int = Field(description="Keys and values of every layer up to cache_len.")
    copy_gbps: float = Field(description="The device's measured copy bandwidth, GB/s.")
    copy_source: str = Field(description="Where copy_gbps came from: cached ceilings, measured now, or given.")
    roofline_us: float = Field(description="(weight_bytes + kv_bytes) / copy bandwidth, µs.")
    roofline_fraction: float = Field(description="roofline_us over the median replay: 1.0 is the roof.")
    matches_eager: bool = Field(description="The replay's logits equal the same step run eagerly (bit for bit).")
    replay_max_abs: float = Field(description="Largest |replay - eager| of the step's logits.")


def _cache_kwarg(model) -> str:
    """transformers renamed `past_key_values` to `cache`; the name this model's forward takes."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _static_layers(cache) -> list:
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "cumulative_length") for layer in layers):
        raise RuntimeError("this transformers' StaticCache keeps no per-layer write position (cumulative_length): "
                           "the decode step cannot rewind it")
    return list(layers)


class DecodeStep:
    """The static-input decode step of `model` after `prompt` (see the module docstring); `run()` returns the step's
    last-position logits [B, V] and leaves the cache as it found it."""

    def __init__(self, model, prompt: torch.Tensor, max_len: int):
        from transformers import StaticCache
        self.model, self.batch, self.prompt_len = model, prompt.shape[0], prompt.shape[1]
        self.cache = StaticCache(config=model.config, max_cache_len=max_len)
        self.key = _cache_kwarg(model)
        dev = prompt.device
        with torch.no_grad():
            pos = torch.arange(self.prompt_len, device=dev).unsqueeze(0).expand(self.batch, -1)
            first = model(input_ids=prompt, position_ids=pos, use_cache=True, **{self.key: self.cache}).logits
        self.layers = _static_layers(self.cache)
        self.first_logits = first[:, -1].float()
        self.token = first[:, -1].argmax(-1, keepdim=True).to(prompt.dtype)
        self.position = torch.full((self.batch, 1), self.prompt_len, dtype=torch.long, device=dev)
        self.mask = self._mask()

    def _mask(self):
        """The 4-D mask transformers makes for position P on this cache (None where the model builds none)."""
        from transformers.masking_utils import create_causal_mask
        emb = self.model.get_input_embeddings()
        with torch.no_grad():
            embeds = emb(self.token)
        return create_causal_mask(config=self.model.config, inputs_embeds=embeds, attention_mask=None,
                                  cache=self.cache, position_ids=self.position)

    def run(self) -> torch.Tensor:
        kwargs = {"attention_mask": self.mask} if self.mask is not None else {}
        logits = self.model(input_ids=self.token, position_ids=self.position, use_cache=True,
                            **{self.key: self.cache}, **kwargs).logits[:, -1]
        for layer in self.layers:
            layer.cumulative_length.sub_(1)   # the next run writes position P again
        return logits

    def step_bytes(self) -> tuple[int, int]:
        """(weight bytes, KV-cache bytes) a step must read (module docstring)."""
        return weight_bytes(self.model), kv_bytes(self.layers, self.prompt_len + 1)


def weight_bytes(model) -> int:
    """Bytes of every distinct parameter but the input embedding table, unless the output embeddings share it."""
    inp = model.get_input_embeddings()
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    skip = inp.weight.data_ptr() if inp is not None else None
    if out is not None and skip is not None and out.weight.data_ptr() == skip:
        skip = None   # a tied LM head reads the whole table every step
    seen, total = set(), 0
    for p in model.parameters():
        ptr = p.data_ptr()
        if ptr in seen or ptr == skip:
            continue
        seen.add(ptr)
        total += p.numel() * p.element_size()
    return total


def kv_bytes(layers, length: int) -> int:
    """Keys and values of every static layer ([B, heads, max_len, D]) up to `length` positions."""
    total = 0
    for layer in layers:
        for t in (layer.keys, layer.values):
            total += t.numel() // t.shape[-2] * length * t.element_size()
    return total


def copy_bandwidth() -> tuple[float, str]:
    """This device's copy bandwidth (GB/s) and where it came from: the cached ceilings, else measured now."""
    from ...core.device import driver_version
    from ...tune.profile.ceilings import cached_ceilings, measure_copy_gbps
    hit = cached_ceilings(torch.cuda.get_device_properties(0).name, driver_version(), torch.__version__)
    if hit is not None:
        return hit.copy_gbps, "cached ceilings (kernelloop.tune.profile.ceilings)"
    return measure_copy_gbps(), "measured now (dst.copy_(src) of 1 GiB, kernelloop.tune.profile.ceilings)"


def _replay_us(graph, rounds: int, calls: int) -> Stats:
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / calls)
    return summarize(samples, bootstrap=1000, confidence=0.95, seed=3)


def graph_step(variant: str, step: DecodeStep, *, copy: tuple[float, str], rounds: int = 20,
               calls: int = 20) -> GraphStep:
    """Capture `step.run` in a CUDA graph (after warm-up on a side stream), replay and time it; needs CUDA."""
    with torch.no_grad():
        eager = step.run().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step.run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step.run()
        graph.replay()
        torch.cuda.synchronize()
        same = bool(torch.equal(out, eager))
        diff = float((out.float() - eager.float()).abs().max())
        stats = _replay_us(graph, rounds, calls)
    wb, kb = step.step_bytes()
    gbps, source = copy
    roof = (wb + kb) / (gbps * 1e9) * 1e6
    return GraphStep(variant=variant, cache_len=step.prompt_len + 1, replay_us=stats, weight_bytes=wb, kv_bytes=kb,
                     copy_gbps=gbps, copy_source=source, roofline_us=roof,
                     roofline_fraction=roof / stats.median_us, matches_eager=same, replay_max_abs=diff)


def graph_steps(model, prompt: torch.Tensor, max_len: int, states: dict[str, Callable[[], None]],
                copy_gbps: float | None = None) -> list[GraphStep]:
    """A GraphStep per variant: `states[name]()` puts the model in that variant (patched or not) before its step
    is built and captured."""
    copy = (copy_gbps, "given") if copy_gbps is not None else copy_bandwidth()
    out = []
    for name, enter in states.items():
        enter()
        out.append(graph_step(name, DecodeStep(model, prompt, max_len), copy=copy))
    return out
