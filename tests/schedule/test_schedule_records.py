"""kernelloop.tune.schedule.records: the schedule's invariants, its numbers as template parameters, and field paths."""

import pytest
from pydantic import ValidationError

from kernelloop.tune.schedule.library import LIBRARY, gluon_pingpong, gluon_ws
from kernelloop.tune.schedule.records import Schedule


def test_config_and_bind_round_trip():
    s = gluon_pingpong()
    assert s.config() == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                          "num_stages": 5}
    b = s.bind({"BLOCK_M": 64, "num_warps": 8, "num_stages": 3, "TRANS_B": 1})
    assert b.config()["BLOCK_M"] == 64 and [r.warps for r in b.math_roles] == [4, 4] and b.ring.stages == 3
    assert b.launch_warps == 12 and b.max_registers == 168
    assert gluon_ws(num_warps=4).max_registers == 248
    for make in LIBRARY.values():
        assert Schedule.from_json(make().to_json()) == make()
    assert gluon_ws().op_paths()[0] == ("roles[0].k_step[0]", gluon_ws().roles[0].k_step[0])


def test_epilogue_is_a_template_parameter():
    s = gluon_ws()
    assert s.epilogue.name == "none" and s.bind({"EPILOGUE": "none"}) == s
    b = s.bind({"EPILOGUE": "bias_silu", "num_stages": 4})
    assert b.epilogue.fused == ["bias", "silu"] and b.epilogue.name == "bias_silu" and b.epilogue.store == "tma"
    assert b.bind({"EPILOGUE": "none"}).epilogue.fused == [] and b.bind({"BLOCK_M": 64}).epilogue == b.epilogue
    with pytest.raises(ValidationError, match="epilogue.fused"):
        s.bind({"EPILOGUE": "bias_tanh"})


@pytest.mark.parametrize("change,where", [
    (lambda d: d["roles"][0]["k_step"][0].update(barrier="full"), "roles[0].k_step[0].barrier"),
    (lambda d: d["roles"][0]["tile_end"][2].update(slot="current"), "roles[0].tile_end[2].slot"),
    (lambda d: d["roles"].append(dict(d["roles"][1], name="loader2")), "exactly one loader"),
    (lambda d: d["roles"].reverse(), "roles[0]"),
    (lambda d: d["barriers"].append({"name": "empty", "size": 1}), "barriers[0].name"),
])
def test_invalid_schedules_name_the_field(change, where):
    d = gluon_ws().model_dump()
    change(d)
    with pytest.raises(ValidationError, match=where.replace("[", r"\[").replace("]", r"\]")):
        Schedule.model_validate(d)
    d = gluon_pingpong().model_dump()
    d["roles"][0]["tile_begin"][0]["index"] = 2
    with pytest.raises(ValidationError, match="has 2 barrier"):
        Schedule.model_validate(d)
