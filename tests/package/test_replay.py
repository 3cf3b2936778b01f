"""Launch replay (deliver/package/replay.py) on the CPU: Triton's JIT run stands in for the compiled-kernel lookup, and a
fake compiled kernel records what its launcher was handed. What is checked: the replay hands the launcher the new
call's tensors in the recorded places and everything else as recorded; launches that a replay would not reproduce
(ATen work, a tensor that is not the call's, calls that differ) keep the JIT path with the reason. The real
launcher runs in the GPU tier (tests/package/test_gpu_package.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from triton.runtime.jit import JITFunction

from kernelloop.deliver.package import replay as rp


def _body(X, Y, N, eps, BLOCK: "tl.constexpr"):  # noqa: F821 - never compiled
    """Only its signature is read."""


class FakeCompiled:
    """A compiled kernel whose launcher notes its arguments."""

    def __init__(self):
        self.function, self.packed_metadata, self.calls = object(), object(), []

    @property
    def run(self):
        def launcher(g0, g1, g2, stream, function, metadata, launch_metadata, enter, exit_, *args):
            assert function is self.function and metadata is self.packed_metadata
            self.calls.append(((g0, g1, g2), stream, args))
        return launcher


@pytest.fixture
def jit(monkeypatch):
    """A JITFunction whose run returns one fake compiled kernel (per specialisation: here, always the same)."""
    compiled = FakeCompiled()
    calls = []

    def run(self, *args, grid, warmup, **kwargs):
        calls.append(args)
        return compiled

    monkeypatch.setattr(JITFunction, "run", run)
    monkeypatch.setattr(rp, "_raw_stream", lambda index: 1234)
    monkeypatch.setattr(rp, "replay_possible", lambda: "")
    return JITFunction(_body), compiled, calls


class Plan:
    replay = recording = replay_scalars = None


def _launch_fn(kernel):
    def launch(x, y, *, eps, BLOCK=64):
        M, N = x.shape
        kernel[(M, 2)](x, y, N, eps, BLOCK=BLOCK)
    return launch


def _tensors(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 8, generator=g), torch.empty(4, 8)]


def _observe_twice(plan, launch, scalars):
    whys = []
    for seed in (1, 2):
        t = _tensors(seed)
        whys.append(rp.observe(plan, t, scalars, lambda t=t: launch(*t, **scalars)))
    return whys


def test_replay_hands_the_launcher_the_new_calls_tensors(jit):
    kernel, compiled, jit_calls = jit
    plan = Plan()
    launch = _launch_fn(kernel)
    assert _observe_twice(plan, launch, {"eps": 1e-5}) == ["", ""]
    assert plan.replay is not None and plan.recording is None
    x, y = _tensors(3)
    plan.replay([x, y], 0)
    assert len(jit_calls) == 2        # the replayed call went past the JIT
    grid, stream, args = compiled.calls[-1]
    assert grid == (4, 2, 1) and stream == 1234
    assert args[0] is x and args[1] is y and args[2:] == (8, 1e-5, 64)


def test_a_launch_with_aten_work_keeps_the_jit_path(jit):
    kernel, _, _ = jit

    def launch(x, y, *, eps):
        y.zero_()                     # work a replay would skip
        kernel[(1,)](x, y, 8, eps, BLOCK=64)

    plan = Plan()
    whys = _observe_twice(plan, launch, {"eps": 1e-5})
    assert "ATen work" in whys[0] and "zero_" in whys[0]
    assert plan.replay is None


def test_a_tensor_that_is_not_the_calls_keeps_the_jit_path(jit):
    kernel, _, _ = jit

    def launch(x, y, *, eps):
        kernel[(1,)](x[1:], y, 8, eps, BLOCK=64)     # a view at an offset: not a call tensor, whole

    whys = _observe_twice(Plan(), launch, {"eps": 1e-5})
    assert "not one of the call's" in whys[0]


def test_calls_that_differ_keep_the_jit_path(jit):
    kernel, _, _ = jit
    state = {"n": 0}

    def launch(x, y, *, eps):
        state["n"] += 1
        kernel[(state["n"],)](x, y, 8, eps, BLOCK=64)   # the grid depends on something besides the shape

    plan = Plan()
    assert _observe_twice(plan, launch, {"eps": 1e-5})[1] == "two calls of the same shape issued different launches"
    assert plan.replay is None


def test_other_scalars_between_the_recordings_keep_the_jit_path(jit):
    kernel, _, _ = jit
    plan = Plan()
    launch = _launch_fn(kernel)
    t = _tensors(1)
    assert rp.observe(plan, t, {"eps": 1e-5}, lambda: launch(*t, eps=1e-5)) == ""
    t = _tensors(2)
    assert rp.observe(plan, t, {"eps": 1e-6}, lambda: launch(*t, eps=1e-6)) != ""


@dataclasses.dataclass
class Descriptor:
    base: object
    shape: list
    block_shape: list


def test_a_descriptor_is_rebuilt_over_the_new_tensor(jit):
    kernel, compiled, _ = jit

    def launch(x, y, *, eps):
        kernel[(1,)](Descriptor(x, list(x.shape), [2, 8]), y, 8, eps, BLOCK=64)

    plan = Plan()
    assert _observe_twice(plan, launch, {"eps": 1e-5}) == ["", ""]
    x, y = _tensors(5)
    plan.replay([x, y], 0)
    d = compiled.calls[-1][2][0]
    assert isinstance(d, Descriptor) and d.base is x and d.shape == [4, 8] and d.block_shape == [2, 8]
    assert plan.replay.steps[0][4][0].base is None      # the recording keeps no tensor alive


def test_no_replay_without_the_launcher_protocol(monkeypatch):
    import triton
    monkeypatch.setattr(triton, "__version__", "3.2.0")
    assert "predates" in rp.replay_possible()
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    assert rp.replay_possible() == ""


def test_a_launch_hook_keeps_the_jit_path(monkeypatch):
    from triton import knobs
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", lambda metadata: None)
    assert rp.replay_possible() == "a Triton launch hook is set"
