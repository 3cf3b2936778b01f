"""Rule-based PTX edits: real transformations of real PTX (the built-in templates' and a hand-written kernel's),
each confined to hot windows, assembled by Triton's ptxas and accepted by the static checks; the reorderings keep
every dependence; the patches apply back exactly."""

import re

import pytest

from kernelloop.tune.ptx import blocks as B
from kernelloop.tune.ptx.checks import check_edit
from kernelloop.tune.ptx.patch import PatchError, apply, edited_ptx, hunks
from kernelloop.tune.ptx.records import HotWindow
from kernelloop.tune.ptx.rules import Context, predications, propose
from kernelloop.tune.ptx.windows import hot_windows


def _changed_lines(c):
    return [h.start for h in c.hunks]


def test_every_rule_on_the_hand_written_kernel_is_assembled_and_accepted(scale_rows):
    k = scale_rows
    edits = propose(k, parent="c-parent", op="demo")
    rules = {c.rule.split(":")[0] for c in edits}
    assert {"cache_hint", "prefetch_size", "unroll", "hoist_loads"} <= rules
    windows = hot_windows(k)
    for c in edits:
        assert c.parent_candidate_id == "c-parent" and c.proposer == "rules" and c.hypothesis
        assert all(any(w.start <= h.start <= w.end + 1 for w in c.windows) for h in c.hunks), c.rule
        assert all(w.weight >= 0.05 for w in c.windows) and c.windows[0] in windows
        text = edited_ptx(c, k.ptx)
        assert check_edit(k.ptx, text, metadata=k.metadata) == [], c.rule


def test_unroll_duplicates_the_loop_with_the_exit_test_between(scale_rows):
    (c,) = [c for c in propose(scale_rows, parent="c-p", rules=["unroll"])]
    text = edited_ptx(c, scale_rows.ptx)
    body = text[text.index("$L__BB0_2:"):text.index("$L__BB0_3:")]
    assert body.count("st.global.b32") == 2 and body.count("fma.rn.f32") == 2
    assert re.search(r"@!%p4 bra \t\$L__BB0_2_kl0;", body) and body.rstrip().endswith("$L__BB0_2_kl0:")
    assert body.count("@%p4 bra \t$L__BB0_2;") == 1


def _position(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.split("\n")) if needle in ln)


def test_hoisting_keeps_every_dependence(scale_rows):
    (c,) = propose(scale_rows, parent="c-p", rules=["hoist_loads"])
    text = edited_ptx(c, scale_rows.ptx)
    ld_x, ld_w = _position(text, "ld.global.b32 \t%f2"), _position(text, "ld.global.b32 \t%f3")
    assert _position(text, "add.s64 \t%rd5") < ld_x < ld_w          # after its address, loads in order
    assert _position(text, "mov.b32 \t%f2, 0f00000000") == ld_x - 1  # the zeroing mov travels with its load
    assert ld_x < _position(text, "mul.wide.s32 \t%rd6")              # moved up past independent arithmetic
    assert _position(text, "add.s64 \t%rd7") < ld_w < _position(text, "fma.rn.f32")
    # a load never crosses a store or a barrier
    lines = ["\tst.global.b32 \t[ %rd9 + 0 ], %f9;", "\tadd.s32 \t%r9, %r9, 1;",
             "\tld.global.b32 \t%f8, [ %rd5 + 0 ];"]
    ptx = scale_rows.ptx.replace("\tfma.rn.f32", "\n".join(lines) + "\n\tfma.rn.f32", 1)
    from kernelloop.tune.ptx.recover import from_ptx
    k2 = from_ptx(ptx, origin="ptx", metadata={"shared": 0})
    for c in propose(k2, parent="c-p", rules=["hoist_loads"]):
        t = edited_ptx(c, ptx)
        assert _position(t, "st.global.b32 \t[ %rd9") < _position(t, "ld.global.b32 \t%f8")


def test_predication_turns_the_branch_around_a_block_into_predicates(scale_rows):
    k = scale_rows
    everything = [w.model_copy(update={"weight": 1.0}) for w in hot_windows(k)]   # every block counted hot
    (c,) = predications(Context(k, everything), "c-p")
    text = edited_ptx(c, k.ptx)
    assert "@%p1 bra" not in text
    assert "\t@!%p1 mov.b32 \t%f1, 0f00000000;" in text and "\t@!%p1 add.s32 \t%r19, %r1, 0;" in text
    assert check_edit(k.ptx, text, metadata=k.metadata) == []


def test_builtin_kernels_get_edits_in_their_hot_loops(kernels):
    for name, rules in (("rmsnorm/rowwise", {"cache_hint", "prefetch_size", "unroll", "hoist_loads"}),
                        ("gemm/tiled", {"prefetch_size", "unroll"})):
        k = kernels[name]
        edits = propose(k, parent="c-p")
        assert rules <= {c.rule.split(":")[0] for c in edits}, name
        assert all(w.loop for c in edits if not c.rule.startswith("cache_hint") for w in c.windows)
        # one edit per rule family assembled and checked (the rest are the same transformation)
        for fam in rules:
            c = next(c for c in edits if c.rule.startswith(fam))
            assert check_edit(k.ptx, edited_ptx(c, k.ptx), metadata=k.metadata) == [], (name, c.rule)


def test_patches_apply_exactly_and_refuse_other_text(scale_rows):
    (c,) = propose(scale_rows, parent="c-p", rules=["unroll"])
    assert apply(scale_rows.ptx, c.hunks) == edited_ptx(c, scale_rows.ptx)
    a, b = "x\ny\nz", "x\nY\nz\nw"
    assert apply(a, hunks(a, b)) == b
    with pytest.raises(PatchError, match="not the one"):
        edited_ptx(c, scale_rows.ptx + "\n")
    with pytest.raises(PatchError, match="not there"):
        apply("q\nr\ns", hunks(a, b))


def test_blocks_read_instructions_conservatively():
    ins = B.parse_instr(0, "@!%p3 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd6 + 0 ];")
    assert ins.negated and ins.pred == "%p3" and ins.defs == {"%r1", "%r2", "%r3", "%r4"}
    assert ins.uses == {"%rd6", "%p3"} and ins.is_global_load and ins.movable
    st = B.parse_instr(1, "st.global.v2.b32 [ %rd1 + 0 ], { %r5, %r6 };")
    assert st.defs == frozenset() and st.uses == {"%rd1", "%r5", "%r6"} and not st.movable
    assert not B.parse_instr(2, "ld.volatile.global.b32 %r1, [%rd1];").movable
    assert not B.parse_instr(3, "bar.sync 0;").movable
    assert B.parse_instr(4, "setp.lt.s32 %p1|%p2, %r1, %r2;").defs == {"%p1", "%p2"}


def test_windows_come_from_the_sass(kernels, scale_rows):
    ws = hot_windows(scale_rows)
    assert ws[0].label == "$L__BB0_2" and ws[0].loop and ws[0].weight > 0.9
    assert abs(sum(w.weight for w in ws) - 1) < 1e-3 and all(w.source == "sass" for w in ws)
    k = kernels["rmsnorm/rowwise"]
    ws = hot_windows(k)
    from kernelloop.tune.ptx.roundtrip import sass
    import base64
    n = len([ln for ln in sass(base64.b64decode(k.cubin_b64)) if not ln.startswith("Function")])
    assert abs(sum(w.sass_instructions for w in ws) - n) < 1   # every SASS instruction lands in one window
    assert ws[0].loop and ws[1].loop and ws[0].weight + ws[1].weight > 0.9
    # a profile's samples (per SASS address) decide instead: all samples on the entry block's code
    from kernelloop.tune.ptx.windows import sass_lines
    rows = sass_lines(base64.b64decode(k.cubin_b64))
    first = [a for a, src, loop, _ in rows if src and not loop][:3]
    prof = hot_windows(k, samples={a: 100.0 for a in first})
    assert prof[0].source == "profile" and not prof[0].loop and prof[0].weight > 0.5
    assert isinstance(prof[0], HotWindow)
