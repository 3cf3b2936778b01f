"""kernelloop.tune.schedule.resources: the footprint of each library schedule against its sm_90 build, and the limits a
schedule breaks named by field (shared memory over the limit, a register budget overrun, an accumulator beyond its
role's budget, warps that do not stack)."""

import pytest

from kernelloop.tune.schedule.library import LIBRARY, generated_template, gluon_pingpong, gluon_subtiled, gluon_ws
from kernelloop.tune.schedule.records import Schedule
from kernelloop.tune.schedule.resources import check_resources, footprint
from schedule_fixtures import CONFIGS


def edit(s: Schedule, fn) -> Schedule:
    d = s.model_dump()
    fn(d)
    return Schedule.model_validate(d)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_footprint_covers_the_build(library_builds, name):
    s = LIBRARY[name]().bind(CONFIGS[name])
    f = footprint(s)
    built = library_builds[generated_template(name)]
    assert 0 <= f.shared_bytes - built.shared_bytes <= 300, (f.shared_bytes, built.shared_bytes)
    assert f.threads == built.threads and f.registers == built.registers == 168
    assert f.ctas_per_sm == 1 and f.register_file <= 65536
    assert check_resources(s) == []


def test_shared_memory_over_the_limit():
    (f,) = check_resources(gluon_ws(stages=4))
    assert f.field == "ring.stages" and "262464 bytes" in f.message and "232448" in f.message
    assert check_resources(gluon_pingpong(stages=5)) == []
    assert [f.field for f in check_resources(gluon_pingpong(stages=6))] == ["ring.stages"]


def test_register_budget_overrun():
    greedy = edit(gluon_pingpong(), lambda d: d["roles"][1].update(registers=256))
    found = {f.field: f.message for f in check_resources(greedy)}
    assert "roles[1].registers" in found and "register file" in found["roles[1].registers"]
    odd = edit(gluon_ws(), lambda d: d["roles"][1].update(registers=44))
    assert [f.field for f in check_resources(odd)] == ["roles[1].registers"]
    # a 128x256 accumulator on one warpgroup: 256 registers a thread
    (f,) = check_resources(gluon_ws(num_warps=4))
    assert f.field == "roles[0].registers" and "256 registers a thread" in f.message


def test_warps_must_stack_along_m():
    found = [f.field for f in check_resources(gluon_ws(block_m=64, block_n=128, num_warps=8))]
    assert found == ["tile.block_m"]


def test_fused_epilogue_registers():
    """The exact GELU over a whole 128-register accumulator is refused (its sm_90 builds spill:
    test_schedule_lower.py), over two half-width ones, or a 64-register accumulator, it is not; bias, SiLU and ReLU
    add nothing."""
    for epilogue in ("bias", "bias_silu", "bias_relu", "relu"):
        assert check_resources(gluon_ws().bind({"EPILOGUE": epilogue})) == [], epilogue
    (f,) = check_resources(gluon_ws().bind({"EPILOGUE": "bias_gelu"}))
    assert f.field == "epilogue.fused" and "64 more registers" in f.message and "issue.accumulators" in f.message
    assert [f.field for f in check_resources(gluon_pingpong().bind({"EPILOGUE": "gelu"}))] == ["epilogue.fused"] * 2
    assert check_resources(gluon_subtiled().bind({"EPILOGUE": "bias_gelu"})) == []
    assert check_resources(gluon_ws(block_m=64, block_n=128, num_warps=4).bind({"EPILOGUE": "bias_gelu"})) == []
