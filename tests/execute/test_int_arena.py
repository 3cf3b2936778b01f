"""Integer and bool tensors through the worker's arena, and the sparsity patterns of a trial's cases."""

import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import HELDOUT_PATTERNS, Workload
from kernelloop.core.execute.battery import case_label, case_record, cases
from kernelloop.core.execute.shared import Arena, read_all
from kernelloop.core.spec import load_op

SPMV = load_op(ops_dir() / "spmv_csr")
W = Workload(op="spmv_csr", axes={"M": 33, "N": 40, "NNZ": 200}, dtype="fp32")


def test_the_arena_carries_integer_and_bool_tensors_bit_for_bit(tmp_path):
    tensors = [torch.arange(-5, 300, dtype=torch.int32), torch.tensor([2 ** 40, -3], dtype=torch.int64),
               torch.tensor([True, False, True]), torch.arange(0, 250, dtype=torch.uint8),
               torch.tensor([-128, 127], dtype=torch.int8)]
    arena = Arena(tmp_path / "case0.arena", tensors)
    arena.views[0][0] = 77                      # the candidate writes into the arena's pages
    back = read_all(arena.records)
    assert [r.dtype for r in arena.records] == ["int32", "int64", "bool", "uint8", "int8"]
    assert int(back[0][0]) == 77 and torch.equal(back[0][1:], tensors[0][1:])
    assert all(torch.equal(b, t) and b.dtype == t.dtype for b, t in zip(back[1:], tensors[1:]))


def test_every_trial_meets_every_held_out_pattern_and_the_visible_ones_cycle():
    for cand in ("c-1", "c-2", "c-3"):
        got = cases(SPMV.spec, "secret", 3, cand, W)
        visible = [c["pattern"] for c in got if c["heldout"] is None]
        held = [c["pattern"] for c in got if c["heldout"] is not None]
        assert visible == ["uniform", "power_law", "banded"]
        assert set(HELDOUT_PATTERNS) <= set(held)
        assert [c["index"] for c in got] == list(range(len(got)))
        assert all(f"pattern={c['pattern']}" in case_label(c) and case_record(c)["pattern"] == c["pattern"]
                   for c in got)


def test_held_out_patterns_are_drawn_even_where_no_shape_can_move():
    one = SPMV.spec.model_copy(update={"heldout_axes": ["NNZ"]})
    w = Workload(op="spmv_csr", axes={"M": 1, "N": 1, "NNZ": 1}, dtype="fp32")
    got = cases(one, "s", 1, "c", w, fixed=("M", "N", "NNZ"))
    assert [c["pattern"] for c in got if c["heldout"]] == list(HELDOUT_PATTERNS)
    assert all(c["heldout"]["kind"] == "pattern" for c in got if c["heldout"])


def test_an_op_without_a_csr_input_has_no_pattern(layernorm):
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")
    assert {c["pattern"] for c in cases(layernorm.spec, "s", 2, "c", w)} == {None}
