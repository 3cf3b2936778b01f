"""kernelloop.tune.schedule.protocol: the library's schedules hold on every interleaving; deliberately broken schedules
(a missing arrive, a wrong phase, a ring slot reused too early, counts that do not match, ping-pong without its turn
barriers) are each found, with the field to change."""

import pytest

from kernelloop.tune.schedule.library import LIBRARY, gluon_pingpong, gluon_ws
from kernelloop.tune.schedule.protocol import check_balance, check_protocol, instances
from kernelloop.tune.schedule.records import Schedule


def edit(s: Schedule, fn) -> Schedule:
    d = s.model_dump()
    fn(d)
    return Schedule.model_validate(d)


@pytest.mark.parametrize("name", sorted(LIBRARY))
@pytest.mark.parametrize("stages", [2, 3, 5])
def test_library_schedules_hold(name, stages):
    s = LIBRARY[name]().bind({"num_stages": stages})
    assert check_protocol(s) == []
    # the instances make the ring wrap at least twice, each alternating role getting two tiles
    for tiles, k in instances(s):
        assert tiles * k >= 2 * stages or k > stages


def test_one_slot_ring_deadlocks():
    """With one MMA in flight the math role holds the previous slot while it waits for the next: one slot is not
    enough (a true deadlock, found on the smallest instance)."""
    (f,) = check_protocol(gluon_ws().bind({"num_stages": 1}))
    assert "never completes" in f.message


def test_missing_arrive():
    no_release = edit(gluon_ws(), lambda d: (d["roles"][0]["k_step"].pop(4), d["roles"][0]["tile_end"].pop(2)))
    (f,) = check_protocol(no_release)
    assert f.field == "roles[1].k_step[0]" and "no other role arrives" in f.message
    in_loop = edit(gluon_ws(), lambda d: d["roles"][0]["k_step"].pop(4))
    assert [f.field for f in check_protocol(in_loop)] == ["roles[0].k_step"]
    at_end = edit(gluon_ws(), lambda d: d["roles"][0]["tile_end"].pop(2))
    assert [f.field for f in check_protocol(at_end)] == ["roles[0].tile_end"]
    no_turn_arrive = edit(gluon_pingpong(), lambda d: d["roles"][1]["tile_end"].pop(1))
    assert check_protocol(no_turn_arrive)[0].field == "roles[0].tile_begin[0]"


@pytest.mark.parametrize("role,section,expect", [
    (1, "k_step", "roles[1].k_step[0].parity"),           # the loader waits for the empty phase not yet done
    (0, "k_step", "roles[0].k_step[0].parity"),           # the math role's wait on the data
])
def test_wrong_phase(role, section, expect):
    flip = {"phase": "phase^1", "phase^1": "phase"}
    broken = edit(gluon_ws(), lambda d: d["roles"][role][section][0].update(
        parity=flip[d["roles"][role][section][0]["parity"]]))
    (f,) = check_protocol(broken)
    assert f.field == expect, f


def test_pingpong_turn_parity_and_missing_turn():
    wrong = edit(gluon_pingpong(stages=3), lambda d: d["roles"][1]["tile_begin"][0].update(parity="phase^1"))
    assert check_protocol(wrong)[0].field.endswith(".tile_begin[0].parity")
    # without the turn pair a consumer reaches a slot whose previous lap is the other consumer's, unfinished: its
    # parity wait passes on the lap before (an mbarrier parity cannot tell laps two apart)
    def drop_turn(d):
        for r in d["roles"][:2]:
            r["tile_begin"] = []
            r["tile_end"] = r["tile_end"][2:]
        d["barriers"] = []
    (f,) = check_protocol(edit(gluon_pingpong(stages=3), drop_turn))
    assert f.field.endswith("k_step[0].parity") and "before those bytes have landed" in f.message


def test_ring_reused_too_early():
    # the slot of the MMA still in flight is released (the current one instead of the previous)
    current = edit(gluon_ws(), lambda d: (d["roles"][0]["k_step"][4].update(slot="current", skip_first=False),
                                          d["roles"][0]["tile_end"].pop(2)))
    (f,) = check_protocol(current)
    assert f.field == "roles[0].k_step[4]" and "while an MMA still reads it" in f.message
    # two k-steps' MMAs left in flight, the previous slot released all the same
    deep = edit(gluon_ws(), lambda d: d["roles"][0]["k_step"][2].update(pending=2))
    (f,) = check_protocol(deep)
    assert f.field == "roles[0].k_step[4]" and "too early" in f.message


def test_counts():
    assert [f.field for f in check_balance(edit(gluon_ws(), lambda d: d["ring"].update(empty_count=2)))] == \
        ["ring.empty_count"]
    two = edit(gluon_pingpong(), lambda d: d["barriers"][0].update(count=2))
    assert {f.field for f in check_balance(two)} == {"barriers[0].count"}
    over = edit(gluon_ws(), lambda d: d["roles"][0]["tile_end"][2].update(count=2))
    assert check_protocol(over)[0].field == "roles[0].tile_end"
