"""GPU tier: a decode step of llama-tiny captured in a CUDA graph and replayed gives the eager step's logits, and its
time is set against the HBM roofline under the device's measured copy bandwidth; generate()'s step marks (CUDA
events) give ordered percentiles that fit in the call's wall time."""

import numpy as np
import pytest

from kernelloop.deliver.capture.models import llama_tiny
from kernelloop.deliver.integrate.decode_graph import graph_steps
from kernelloop.deliver.integrate.generate import generate_once

pytestmark = pytest.mark.gpu


def test_a_graph_replayed_decode_step_against_the_roofline():
    model, (ids,) = llama_tiny(device="cuda", dtype="bf16", batch=1, seq=32)
    (step,) = graph_steps(model, ids, 48, {"original": lambda: None})
    assert step.replay_max_abs <= 1e-2 and step.cache_len == 33   # the replayed step is the eager step
    assert step.weight_bytes > 0 and step.kv_bytes == 2 * 2 * 1 * 2 * 33 * 64 * 2
    assert step.copy_gbps > 100 and step.replay_us.median_us > 0
    assert 0 < step.roofline_fraction < 1.5
    assert step.roofline_fraction == pytest.approx(step.roofline_us / step.replay_us.median_us)


def test_generate_step_marks_on_cuda():
    model, (ids,) = llama_tiny(device="cuda", dtype="bf16", batch=2, seq=16)
    generate_once(model, ids, 8)                    # warm-up: the static cache, the kernels
    tokens, logits, prefill, steps, wall = generate_once(model, ids, 8)
    assert tokens.shape == (2, 8) and logits.shape[0] == 8 and len(steps) == 7
    p50, p90, p99 = np.percentile(steps, [50, 90, 99])
    assert 0 < p50 <= p90 <= p99
    assert prefill + sum(steps) <= wall
