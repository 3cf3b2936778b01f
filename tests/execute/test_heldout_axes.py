"""Held-out draws on every free axis (issue 24, item 4): below the visible sizes (small, odd, non-power-of-two)
and beyond them (for a source that is not a template's own, into the next power-of-two bucket), inside the op's
domain, a bounded number of cases, and `fixed_axes` to opt an axis out."""

import shutil

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.device import device_properties
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.spec import SpecError, load_op, load_workloads
from kernelloop.core.spec.loader import in_domain
from kernelloop.core.spec.space import prune, why_pruned
from layernorm_source import LN_KERNEL

OPS = ops_dir()
CANDS = [Candidate(op="x", template="custom", source=f"# {i}") for i in range(16)]


def heldout(ev, cand, w):
    return [c for c in ev.cases(cand, w) if c["heldout"]]


@pytest.mark.parametrize("op", sorted(p.name for p in OPS.iterdir() if (p / "spec.toml").is_file()))
def test_every_free_axis_moves_below_and_beyond_inside_the_domain(op):
    bundle = load_op(OPS / op)
    spec = bundle.spec
    ev = Evaluator(bundle, "interpret", None, INTERPRETER_WALLCLOCK, secret="axes", checks=2)
    primary = spec.heldout_axes or [spec.inputs[0].shape[0]]
    for w in load_workloads(OPS / op / "workloads-interpret.toml", spec):
        moved_below, moved_above = set(), set()
        for cand in CANDS:
            cases = heldout(ev, cand, w)
            assert len(cases) <= 2 + 2 * len(primary), "a bounded number of held-out cases"
            for c in cases:
                axes = c["workload"].axes
                assert in_domain(spec, axes, w.dtype), (op, axes)
                for ax, v in axes.items():
                    if v < w.axes[ax]:
                        moved_below.add(ax)
                    elif v > w.axes[ax]:
                        moved_above.add(ax)
                        # a source that is not a template's own: in the power-of-two bucket above the workload's
                        # (or, where that does not fit the domain or the interpreter's cost cap, just beyond it)
                        bucket = 1 << (w.axes[ax] - 1).bit_length()
                        assert v <= max(2 * bucket, w.axes[ax] + max(2, w.axes[ax] // 4 + 1)), (op, ax, v)
                        assert v <= 2 or v & (v - 1), "beyond: not a power of two"
        free = [a for a in spec.axes if a not in bundle.fixed_axes]
        # every free axis that has room in the domain moves, across candidates
        for ax in free:
            if ax in ("D",):   # attention's head dim: 64 or 128 only ('D == 64 or D == 128' in every template)
                assert ax not in moved_below | moved_above
                continue
            # (an MHA workload's H cannot shrink alone: H % HKV == 0; its HKV shrinks instead, into GQA)
            mha_heads = ax == "H" and w.axes["H"] == w.axes.get("HKV")   # (a stencil's H is grid rows)
            if w.axes[ax] > max(1, spec.axes[ax].min) and not mha_heads:
                assert ax in moved_below, (op, w.axes, ax)
            assert ax in moved_above, (op, w.axes, ax)


def test_gqa_heads_keep_dividing():
    bundle = load_op(OPS / "attention")
    ev = Evaluator(bundle, "interpret", None, INTERPRETER_WALLCLOCK, secret="gqa", checks=1)
    w = Workload(op="attention", axes={"B": 1, "H": 4, "HKV": 2, "S": 77, "D": 64}, dtype="fp16")
    heads = {(c["workload"].axes["H"], c["workload"].axes["HKV"]) for cand in CANDS for c in heldout(ev, cand, w)}
    assert all(h % kv == 0 for h, kv in heads) and len(heads) > 2
    assert all(c["workload"].axes["D"] == 64 for cand in CANDS for c in heldout(ev, cand, w))


def test_a_templates_own_configuration_is_judged_only_where_pruning_keeps_it():
    bundle = load_op(OPS / "layernorm")
    props = device_properties("interpret")
    w = Workload(op="layernorm", axes={"M": 33, "N": 1000}, dtype="fp16")
    ev = Evaluator(bundle, "interpret", None, INTERPRETER_WALLCLOCK, secret="own", checks=1)
    for t in bundle.spec.templates:
        kept, _ = prune(t, w, props)
        for cfg in kept[:: max(1, len(kept) // 6)]:
            cand = Candidate(op="layernorm", template=t.name, source=bundle.template_sources[t.name], config=cfg)
            for c in heldout(ev, cand, w):
                if c["heldout"]["kind"] != "primary":   # the primary cases (1, odd) stay as they always were
                    assert why_pruned(t, c["workload"], props, cfg) is None, (t.name, cfg, c["workload"].axes)


def test_fixed_axes_opt_out_and_are_checked(tmp_path):
    op = tmp_path / "layernorm"
    shutil.copytree(OPS / "layernorm", op)
    text = (op / "spec.toml").read_text()
    (op / "spec.toml").write_text('fixed_axes = ["N"]\n' + text)
    bundle = load_op(op)
    assert bundle.fixed_axes == ("N",)
    ev = Evaluator(bundle, "interpret", None, INTERPRETER_WALLCLOCK, secret="fixed", checks=1)
    w = Workload(op="layernorm", axes={"M": 33, "N": 1000}, dtype="fp16")
    assert all(c["workload"].axes["N"] == 1000 for cand in CANDS for c in ev.cases(cand, w))
    assert any(c["workload"].axes["M"] > 33 for cand in CANDS for c in ev.cases(cand, w))
    for bad, field in (('fixed_axes = ["Q"]\n', "fixed_axes.0"), ('fixed_axes = "N"\n', "fixed_axes"),
                       ('fixed_axes = ["M"]\nheldout_axes = ["M"]\n', "fixed_axes.0")):
        (op / "spec.toml").write_text(bad + text)
        with pytest.raises(SpecError) as e:
            load_op(op)
        assert e.value.field == field


NARROW = LN_KERNEL + '''

def launch(x, weight, bias, y, *, eps, **config):
    # over-fitted to the visible row length: the workload's 200 columns, whatever N is
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, 200, eps, BLOCK=256)
'''


def test_a_kernel_overfitted_to_a_non_leading_axis_is_caught(layernorm, tmp_path):
    worker = Worker("interpret", tmp_path / "w")
    try:
        for rules in (True, False):
            ev = Evaluator(layernorm, "interpret", worker, INTERPRETER_WALLCLOCK, secret=f"narrow-{rules}", checks=2,
                           timeouts=Timeouts(check=60.0, bench=60.0), static_rules=rules)
            w = Workload(op="layernorm", axes={"M": 8, "N": 200}, dtype="fp32")
            v = ev.evaluate(Candidate(op="layernorm", template="custom", source=NARROW), w, tmp_path / "j").verdict
            # wrong values, unwritten columns, or (reading past a smaller row) a crash: never PASSED
            assert v.status is not Status.PASSED, v
            assert "held-out: a held-out" in v.case and "N (normalized features)" in v.case, v
    finally:
        worker.close()
