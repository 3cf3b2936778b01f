"""kernelloop.schedule.lower: the generated template files are the lowering of the library's schedules, each embeds
its schedule, the lowering refuses what it cannot express (naming the field), and — built for sm_90 on this host —
every generated template gives the SASS, registers and shared memory of the hand-written template it re-expresses."""

import ast

import pytest

from schedule_fixtures import CONFIGS, GEMM
from kernelloop.schedule.compare import match
from kernelloop.schedule.library import GENERATED_FILES, LIBRARY, generated_template, gluon_ws
from kernelloop.schedule.lower import NotLowerable, lower, schedule_of
from kernelloop.schedule.records import Schedule


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_generated_files_are_the_lowered_library(name):
    text = (GEMM / GENERATED_FILES[name]).read_text()
    assert text == lower(LIBRARY[name]()), f"regenerate with `kernelloop schedule write` ({GENERATED_FILES[name]})"
    assert schedule_of(text) == LIBRARY[name]()
    launch = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "launch")
    assert [a.arg for a in launch.args.args] == ["a", "b", "c"]
    assert {a.arg for a in launch.args.kwonlyargs} >= set(LIBRARY[name]().config())


def test_lowering_follows_the_schedule_fields():
    base = lower(gluon_ws())
    halves = lower(gluon_ws().model_copy(update={"issue": gluon_ws().issue.model_copy(update={"accumulators": 2})}))
    assert base.count("warpgroup_mma(") == 1 and halves.count("warpgroup_mma(") == 2
    assert "warpgroup_mma_wait(1, deps=(acc,))" in base
    d = gluon_ws().model_dump()
    d["epilogue"]["store"] = "registers"
    regs = lower(Schedule.model_validate(d))
    assert "gl.store(C + offs_m" in regs and "_tma_store(" not in regs
    d = gluon_ws().model_dump()
    d["roles"][0]["k_step"][2]["pending"] = 0
    assert "warpgroup_mma_wait(0, deps=(acc,))" in lower(Schedule.model_validate(d)).split("for ks in")[1]
    assert schedule_of("x = 1") is None and schedule_of("def f(:") is None


def test_what_the_lowering_cannot_express_is_named():
    d = gluon_ws().model_dump()
    d["epilogue"]["fused"] = ["bias"]
    with pytest.raises(NotLowerable) as e:
        lower(Schedule.model_validate(d))
    assert e.value.field == "epilogue.fused"
    d = gluon_ws().model_dump()
    d["roles"][1]["k_step"].append({"op": "mma"})
    with pytest.raises(NotLowerable) as e:
        lower(Schedule.model_validate(d))
    assert e.value.field == "roles[1].k_step[2]"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_generated_template_builds_the_originals_sass(library_builds, name):
    """sm_90 builds on this host: identical normalised SASS (kernel names aside), registers and shared memory."""
    m = match(library_builds[name], library_builds[generated_template(name)])
    assert m.built, m.error
    assert m.identical, (m.first_difference, m.registers, m.shared_bytes)
    assert m.instructions > 500 and m.registers[0] == 168
