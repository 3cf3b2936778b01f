"""Rows shorter than the blocks of the row-op templates (N = 1, 3, 8: softmax over a short sequence, a tiny norm)
keep a configuration in every op's pruned space and pass the evaluator battery in the interpreter; rmsnorm_offset
(Gemma's (1 + weight)) runs rmsnorm's three templates with the offset applied in-kernel.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.records import Workload  # noqa: E402
from kernelloop.core.device import device_properties  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402
from kernelloop.core.spec.space import selected_space  # noqa: E402
from kernelloop.tune.loop.checks import empty_spaces  # noqa: E402

from battery import assert_battery_passes  # noqa: E402
from rowops import DT, OPS, template_module  # noqa: E402

ROW_OPS = ["softmax", "rmsnorm", "layernorm", "rmsnorm_offset"]
SHORT = [1, 3, 8]


@pytest.mark.parametrize("op", ROW_OPS)
def test_every_short_row_keeps_a_configuration(op):
    bundle = load_op(OPS / op)
    workloads = [Workload(op=op, axes={"M": m, "N": n}, dtype="fp16") for n in SHORT for m in (1, 16)]
    assert empty_spaces(bundle, workloads, "interpret") == {}


@pytest.mark.parametrize("op", ["softmax", "rmsnorm_offset"])   # the persistent kernels at N = 1 and 17 directly:
def test_short_rows_pass_the_battery(op, tmp_path):                # tests/ops/test_persistent_templates.py
    bundle = load_op(OPS / op)
    w = Workload(op=op, axes={"M": 5, "N": 8}, dtype="fp16")
    (t, kept, _), = [part for part in selected_space(bundle.spec.templates, w, device_properties("interpret"))
                     if part[1]]
    config = {k: v for k, v in kept[-1].items() if k != "template"}
    assert_battery_passes(bundle, t.name, config, [({"M": 5, "N": n}, "fp16") for n in SHORT], tmp_path)


# the streamed path of the rowwise template (BLOCK_N < N) through the whole battery; every template's math below
def test_rmsnorm_offset_passes_the_battery(tmp_path):
    bundle = load_op(OPS / "rmsnorm_offset")
    assert bundle.spec.scalars == {"eps": 1e-6, "offset": 1.0}
    assert [t.name for t in bundle.spec.templates] == ["rowwise", "chunked", "persistent"]
    config = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 1, "STREAM_STORE": 0}
    assert_battery_passes(bundle, "rowwise", config, [({"M": 3, "N": 1000}, "fp16")], tmp_path)


def test_rmsnorm_templates_scale_by_offset_plus_weight():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 300, generator=gen).to(DT["fp16"])
    w = (torch.randn(300, generator=gen) * 0.1).to(DT["fp16"])
    xd = x.double()
    want = xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + w.double())
    for file, kw in (("kernel.py", {"BLOCK_N": 512, "ROWS": 1, "num_warps": 2}), ("chunked.py", {}),
                     ("persistent.py", {"num_warps": 2})):
        y = torch.empty_like(x)
        template_module("rmsnorm", file).launch(x, w, y, eps=1e-6, offset=1.0, **kw)
        torch.testing.assert_close(y.double(), want, atol=1e-2, rtol=1e-2, msg=file)
