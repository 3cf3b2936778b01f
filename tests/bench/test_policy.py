"""Timing policies: the shipped ones, and the flush mode a policy records."""

import pytest
from pydantic import ValidationError

from kernelloop.core.bench.policy import COLD_L2_EVENTS, COLD_L2_EVENTS_CONFIRM, policies_for


def test_cuda_policies_flush_by_writing_and_confirm_with_more_samples():
    search, confirm = policies_for("cuda")
    assert (search, confirm) == (COLD_L2_EVENTS, COLD_L2_EVENTS_CONFIRM)
    assert search.flush_mode == confirm.flush_mode == "write" and search.flush_bytes == 256 << 20
    assert confirm.samples > search.samples


def test_flush_mode_is_part_of_the_policy_identity():
    read = COLD_L2_EVENTS.model_copy(update={"flush_mode": "read"})
    assert read.id != COLD_L2_EVENTS.id
    assert type(COLD_L2_EVENTS).model_validate_json(read.model_dump_json()).flush_mode == "read"
    with pytest.raises(ValidationError):
        type(COLD_L2_EVENTS).model_validate({**COLD_L2_EVENTS.model_dump(), "flush_mode": "memset"})


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["write", "read"])
def test_both_flush_modes_time_a_copy_on_the_gpu(mode):
    import torch

    from kernelloop.core.bench.timer import sample
    src = torch.ones(16 << 20, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    policy = COLD_L2_EVENTS.model_copy(update={"samples": 5, "warmup": 2, "flush_mode": mode})
    out = sample({"copy": lambda: dst.copy_(src)}, policy, seed=1)
    assert len(out["copy"]["kernel_us"]) == 5 and min(out["copy"]["kernel_us"]) > 0
    assert torch.equal(dst, src)


@pytest.mark.parametrize("mode", ["write", "read"])
def test_flush_call_runs_in_both_modes(mode):
    """The flush's own torch calls (the GPU tier found `sum(out=)` without `dim` rejected by torch 2.11)."""
    from kernelloop.core.bench.timer import _Flush
    f = _Flush(4096, mode, device="cpu")
    f.buf.fill_(1)
    f()
    if mode == "read":
        assert int(f.sink) == 4096 and int(f.buf.sum()) == 4096
    else:
        assert int(f.buf.sum()) == 0


def test_launch_exposed_reads_the_start_event():
    """A start event already complete once the call is launched means the device idled before the call."""
    from kernelloop.core.bench.timer import launch_exposed

    class Event:
        def __init__(self, done):
            self.done = done

        def query(self):
            return self.done
    assert launch_exposed(Event(True)) is True and launch_exposed(Event(False)) is False


def test_output_sets_must_be_odd():
    """Two calls per round: an even number of rotating output sets would give each subject's kernel-time samples
    only half of the sets (the review found 2 sets tying candidate and twin to one set each)."""
    assert COLD_L2_EVENTS.output_sets == 3
    for bad in (0, 2, 4, 8):
        with pytest.raises(ValidationError):
            type(COLD_L2_EVENTS).model_validate({**COLD_L2_EVENTS.model_dump(), "output_sets": bad})
    assert type(COLD_L2_EVENTS).model_validate({**COLD_L2_EVENTS.model_dump(), "output_sets": 5}).output_sets == 5
