"""Choosing among overlapping sites: measured gain first (a measured loss never), else the number of model ops
replaced; and the shape key FusedModel dispatches on."""

from __future__ import annotations

import torch

from kernelloop.deliver.fuse.compose import Choice, choose, shape_key
from kernelloop.deliver.fuse.evidence import Evidence, Realisation, WorkloadEvidence
from kernelloop.deliver.fuse.plans import OpPlan, PortPlan

WL = {"M": 16, "N": 128, "K": 64}


def _realisation(kind: str, steps: list[int], device: str, kernel_us: float | None, eager_us: float | None):
    plan = OpPlan(kind=kind, family="gemm_gate", signature="sig", steps=steps, dtype="bf16",
                  inputs=[PortPlan(name="x", axes=["M", "K"], operand="in0")],
                  outputs=[PortPlan(name="out", axes=["M", "N"], operand="%3")], axes={"M": "s0"}, workloads=[WL])
    ev = Evidence(run_id="r", run_dir="/x", device=device, source="search", proposer="search:staged", trials=1,
                  workloads=[WorkloadEvidence(axes=WL, dtype="bf16", status="PASSED", kernel_us=kernel_us,
                                              eager_us=eager_us)])
    return Realisation(op=kind, folder="/x", pattern="pat", plan=plan, evidence=ev)


NODES = ["linear", "silu", "linear_1", "mul"]


def test_measured_gain_decides_and_a_loss_is_never_taken():
    dual = Choice(_realisation("dual_gemm", [0, 1, 2, 3], "cuda", 100.0, 110.0), 0, NODES, WL, [])
    tail = Choice(_realisation("gate_mul", [1, 3], "cuda", 5.0, 30.0), 0, NODES, WL, [])
    chosen, left = choose([dual, tail])
    assert chosen == [tail] and left == [(dual, "overlaps a site with a larger gain")]
    slower = Choice(_realisation("dual_gemm", [0, 1, 2, 3], "cuda", 120.0, 110.0), 0, NODES, WL, [])
    chosen, left = choose([slower])
    assert chosen == [] and left[0][1].startswith("measured no gain")


def test_without_a_measurement_the_larger_site_wins():
    dual = Choice(_realisation("dual_gemm", [0, 1, 2, 3], "interpret", None, None), 0, NODES, WL, [])
    tail = Choice(_realisation("gate_mul", [1, 3], "interpret", None, None), 0, NODES, WL, [])
    assert dual.gain_us() is None and choose([tail, dual])[0] == [dual]
    other = Choice(_realisation("gate_mul", [1, 3], "interpret", None, None), 1, ["l2", "s2", "l3", "m2"], WL, [])
    assert len(choose([dual, tail, other])[0]) == 2          # another occurrence does not overlap


def test_shape_key():
    assert shape_key((torch.zeros(2, 8, dtype=torch.long),)) == "2x8"
    assert shape_key((torch.zeros(2, 8), 3), {"mask": torch.zeros(2, 8)}) == "2x8,2x8"


def test_fused_model_counts_its_fallbacks_per_reason():
    from torch import fx

    from kernelloop.deliver.fuse.compose import FusedModel

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    fused = FusedModel(Double())
    fused.add_graph("2x8", fx.symbolic_trace(Double()))
    x = torch.ones(2, 8)
    assert torch.equal(fused(x), x * 2) and not fused.fallbacks
    fused(torch.ones(1, 5))
    fused(torch.ones(1, 5))
    fused(torch.ones(3))
    assert fused.fallbacks == {"no fused graph for shape 1x5": 2, "no fused graph for shape 3": 1}
