"""kernelloop.tune.schedule.patch: schedule edits as JSON patches; a valid edit becomes a lowered candidate, an invalid
one comes back with the message (and field) of whatever refused it: the patch, the record, the gate."""

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.schedule.lower import schedule_of
from kernelloop.tune.gate.edit import materialize_edit
from kernelloop.tune.schedule.patch import EditInvalid, ScheduleEdit, apply_patch, base_schedule
from kernelloop.core.spec import load_op

SPEC = load_op(ops_dir() / "gemm").spec


def test_valid_edit_becomes_a_candidate():
    edit = ScheduleEdit(base="schedule_ws", patch=[{"op": "replace", "path": "/issue/accumulators", "value": 2},
                                                   {"op": "replace", "path": "/ring/stages", "value": 4}])
    sched, cand = materialize_edit(edit, SPEC, proposer="test")
    assert sched.name == "gluon_ws_edit" and sched.ring.stages == 4
    assert schedule_of(cand.source) == sched and cand.config["num_stages"] == 4 and cand.config["TRANS_B"] == 0
    assert cand.source.count("warpgroup_mma(") == 2 and cand.template == "schedule"
    # the edited candidate is itself a base for the next edit
    again = ScheduleEdit(base=cand.id, patch=[{"op": "replace", "path": "/ring/stages", "value": 3}], name="sub3")
    s2, _ = materialize_edit(again, SPEC, sources={cand.id: cand.source})
    assert s2.name == "sub3" and s2.issue.accumulators == 2


@pytest.mark.parametrize("patch,field,check,text", [
    ([{"op": "replace", "path": "/ring/depth", "value": 4}], "patch", "schedule", "does not apply"),
    ([{"op": "replace", "path": "/ring/stages", "value": 0}], "ring.stages", "schedule", "greater than or equal"),
    ([{"op": "replace", "path": "/ring/stages", "value": 4}], "ring.stages", "resources", "shared memory"),
    ([{"op": "remove", "path": "/roles/0/k_step/4"}], "roles[0].k_step", "protocol", "missing or extra arrive"),
    ([{"op": "replace", "path": "/roles/1/k_step/0/parity", "value": "phase"}], "roles[1].k_step[0].parity",
     "protocol", "never completes"),
    ([{"op": "add", "path": "/epilogue/fused/-", "value": "gelu"}], "epilogue.fused", "schedule",
     "is not the epilogue of gemm"),
])
def test_invalid_edits_say_why(patch, field, check, text):
    with pytest.raises(EditInvalid) as e:
        materialize_edit(ScheduleEdit(base="gluon_ws", patch=patch), SPEC)
    assert (e.value.field, e.value.check) == (field, check) and text in str(e.value)


def test_edits_take_the_ops_epilogue():
    """On gemm_bias_gelu an edited schedule is bound to the op's EPILOGUE: checked with it (the exact GELU over the
    whole 128x256 accumulator is refused, named epilogue.fused), lowered with it and launched with it."""
    spec = load_op(ops_dir() / "gemm_bias_gelu").spec
    deeper = ScheduleEdit(base="schedule_ws", patch=[{"op": "replace", "path": "/ring/stages", "value": 2}])
    with pytest.raises(EditInvalid) as e:
        materialize_edit(deeper, spec)
    assert (e.value.field, e.value.check) == ("epilogue.fused", "resources") and "spill" in str(e.value)
    halves = ScheduleEdit(base="schedule_ws", patch=[{"op": "replace", "path": "/issue/accumulators", "value": 2}])
    sched, cand = materialize_edit(halves, spec)
    assert sched.epilogue.fused == ["bias", "gelu"] and cand.config["EPILOGUE"] == "bias_gelu"
    assert schedule_of(cand.source) == sched and 'EPILOGUE="bias_gelu"' in cand.source
    other = ScheduleEdit(base="schedule_ws", patch=[{"op": "add", "path": "/epilogue/fused", "value": ["bias"]}])
    with pytest.raises(EditInvalid, match="is not the epilogue of gemm_bias_gelu"):
        materialize_edit(other, spec)


def test_unknown_base():
    with pytest.raises(EditInvalid, match="no schedule 'tiled'"):
        base_schedule("tiled", {"tiled": "import triton"})
    assert apply_patch(base_schedule("gluon_pingpong"), [{"op": "test", "path": "/name", "value": "gluon_pingpong"}],
                       name="same").name == "same"
