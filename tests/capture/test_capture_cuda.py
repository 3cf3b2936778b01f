"""capture() on CUDA (gpu tier): what SDPA runs there, and device times that add up."""

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.capture import capture, write_workloads  # noqa: E402
from kernelloop.deliver.capture.mapping import ATTENTION_PREFIXES  # noqa: E402
from kernelloop.deliver.capture.models import build  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402

OPS = ops_dir()
pytestmark = pytest.mark.gpu


def test_llama_tiny_on_cuda_is_profiled(tmp_path):
    report = capture(*build("llama-tiny", device="cuda"), ops_root=OPS)
    assert report.profiled and report.device.startswith("cuda") and report.device_name
    attn = [c for c in report.cards if c.target == "attention_causal"]
    # torch 2.11 on an H200 picks cuDNN (bf16, no mask); another backend must still be one of the SDPA overloads
    assert len(attn) == 1 and attn[0].overload.startswith(ATTENTION_PREFIXES)
    assert attn[0].op == "attention_causal" and attn[0].axes == {"B": 2, "H": 4, "HKV": 2, "S": 8, "D": 64}
    assert {c.op for c in report.mapped} == {"rmsnorm", "gemm_nt", "attention_causal"}
    assert all(c.device_time_us > 0 and 0 < c.share < 1 for c in report.mapped)
    attributed = sum(c.device_time_us for c in report.mapped) + sum(e.device_time_us for e in report.census)
    # every kernel of the forward is inside one recorded ATen call (the mapping's own checks are left out)
    assert attributed == pytest.approx(report.device_time_us, rel=0.02)
    timed = [e.device_time_us for e in report.census if not e.view]
    assert timed == sorted(timed, reverse=True)
    written = write_workloads(report, tmp_path, OPS)
    rms = load_workloads(written["rmsnorm"], load_op(OPS / "rmsnorm").spec)
    rms_card = next(c for c in report.mapped if c.op == "rmsnorm")
    assert [w.weight for w in rms] == [pytest.approx(rms_card.device_time_us)]   # weight = device time when measured
