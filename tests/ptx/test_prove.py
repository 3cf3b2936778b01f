"""The proof before timing, driven by the CPU stand-in executor (the template in Triton's interpreter on both sides,
an effect applied to the "edited" side; no PTX is executed here): the order of the stages, the bitwise comparison,
the tolerance where an edit declares that it reorders floating point, crashes, edits that never ran, and refusal
before anything runs. The same `prove` runs on a GPU with the IR-override executor (tests/gpu, benchmarks/ptx_proof.py).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines."""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.tune.ptx.mutate import mutations, wrong_edits  # noqa: E402
from kernelloop.tune.ptx.patch import hunks  # noqa: E402
from kernelloop.tune.ptx.prove import StandInExecutor, bit_equal, proof_cases, prove  # noqa: E402
from kernelloop.tune.ptx.rules import propose  # noqa: E402
from kernelloop.base.records import Candidate, Workload  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="the CPU stand-in")

W = Workload(op="rmsnorm", axes={"M": 3, "N": 1024}, dtype="fp16")


@pytest.fixture(scope="module")
def setup(kernels, surveyed):
    bundle = load_op(ops_dir() / "rmsnorm")
    row = next(r for r in surveyed if r.op == "rmsnorm" and r.template == "rowwise")
    parent = Candidate(op="rmsnorm", template="rowwise", source=bundle.template_sources["rowwise"], config=row.config)
    k = kernels["rmsnorm/rowwise"]
    edit = next(c for c in propose(k, parent=parent.id, rules=["cache_hint"]))
    cases = proof_cases(bundle, parent, W, edit.id, "secret", checks=3, device="interpret")
    return bundle, parent, k, edit, cases


def _prove(setup, effect=None, applies=None, edit=None, time_it=False):
    bundle, parent, k, e, cases = setup
    ex = StandInExecutor(bundle.spec, parent.source, parent.config, effect=effect, applies=applies)
    return prove(edit or e, k.ptx, bundle.spec, bundle.folder / bundle.spec.reference, ex, cases,
                 metadata=k.metadata, time_it=time_it)


def test_the_cases_are_the_verifiers_battery(setup):
    *_, cases = setup
    assert [c.heldout == "" for c in cases[:3]] == [True] * 3 and any(c.heldout for c in cases)
    assert len({c.seed for c in cases}) == len(cases) and len({c.distribution for c in cases[:3]}) > 1


def test_an_edit_that_matches_bit_for_bit_is_proved_then_verified_then_timed(setup):
    r = _prove(setup, time_it=True)
    assert r.verdict in ("same", "faster", "slower") and r.stage == "done" and r.passed
    assert [c.status for c in r.cases] == ["identical"] * len(setup[4]) and r.verifier == "passed"
    assert r.timing.samples == 5 and "not kernel time" in r.timing.policy and "stand-in" in r.executor
    assert r.environment["arch"] == "interpret" and r.compare == "bitwise"


def test_one_changed_element_is_rejected_naming_the_case(setup):
    def effect(case, outs):
        if case.index == 1:
            outs[0].view(-1)[7] = outs[0].view(-1)[7] * 1.001 + 0.01
        return outs
    r = _prove(setup, effect=effect)
    assert r.verdict == "rejected" and r.stage == "differential" and not r.passed
    assert [c.status for c in r.cases] == ["identical", "differs"]
    assert "1 of 3072 elements differ (first at [0, 7]" in r.cases[-1].detail and "seed=" in r.message


def test_a_declared_reordering_is_held_to_the_tolerance(setup):
    def effect(case, outs):   # one ulp of fp16 on every element: what a reordered sum could give
        o = outs[0]
        o.view(torch.int16).add_(1)
        return outs
    assert _prove(setup, effect=effect).verdict == "rejected"
    bundle, parent, k, e, cases = setup
    r = _prove(setup, effect=effect, edit=e.model_copy(update={"reorders_fp": True}))
    assert r.verdict == "proved" and r.compare == "tolerance"
    assert {c.status for c in r.cases} == {"within_tolerance"}


def test_a_crash_and_an_edit_that_never_ran(setup):
    def boom(case, outs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    r = _prove(setup, effect=boom)
    assert r.verdict == "crashed" and "illegal memory access" in r.cases[0].detail
    r = _prove(setup, applies=lambda case: bool(case.heldout) is False)   # another specialisation on held-out shapes
    assert r.verdict == "proved" and {c.status for c in r.cases if c.label.endswith(")")} == {"not_exercised"}
    r = _prove(setup, applies=lambda case: False)
    assert r.verdict == "not_exercised" and not r.passed


def test_a_statically_broken_edit_is_refused_before_anything_runs(setup):
    bundle, parent, k, e, cases = setup
    m = next(m for m in mutations(k.ptx, 0) if m.kind == "retype_param")
    bad = e.model_copy(update={"hunks": hunks(k.ptx, m.ptx)})
    ex = StandInExecutor(bundle.spec, parent.source, parent.config)
    r = prove(bad, k.ptx, bundle.spec, bundle.folder / bundle.spec.reference, ex, cases, metadata=k.metadata)
    assert r.verdict == "refused" and r.stage == "static" and r.violations[0].rule == "params" and ex.calls == 0


def test_wrong_edits_pass_every_static_check(kernels, scale_rows):
    """What the mutation generator's wrong edits are for: they keep the ABI, so only the differential proof on a
    GPU can refuse them (benchmarks/ptx_proof.py runs that)."""
    from kernelloop.tune.ptx.checks import check_edit
    for k in (scale_rows, kernels["rmsnorm/rowwise"]):
        got = wrong_edits(k.ptx, seed=1)
        assert {m.kind for m in got} == {"drop_store", "negate_predicate", "store_offset", "load_offset",
                                         "change_compare"}
        for m in got:
            assert m.expect == "differential" and m.ptx != k.ptx
            assert check_edit(k.ptx, m.ptx, metadata=k.metadata) == [], m.kind
    assert wrong_edits(scale_rows.ptx, 1) == wrong_edits(scale_rows.ptx, 1)


def test_bit_equal_sees_nan_payloads():
    a = torch.tensor([1.0, float("nan")], dtype=torch.float16)
    b = a.clone()
    b.view(torch.int16)[1] = 0x7E5A   # another NaN
    assert bit_equal([a], [a.clone()]) == (True, "") and not bit_equal([a], [b])[0]
