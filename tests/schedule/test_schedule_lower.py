"""kernelloop.tune.schedule.lower: the generated template files are the lowering of the library's schedules, each embeds
its schedule, the lowering refuses what it cannot express (naming the field), and — built for sm_90 on this host —
every generated template gives the SASS, registers and shared memory of the hand-written template it re-expresses,
and every fused epilogue (bias, then exact GELU, SiLU or ReLU) builds, spilling only where the gate says it would."""

import ast

import pytest

from schedule_fixtures import CONFIGS, GEMM
from kernelloop.tune.schedule.compare import match
from kernelloop.tune.schedule.library import (GENERATED_FILES, LIBRARY, generated_template, gluon_pingpong,
                                         gluon_subtiled, gluon_ws)
from kernelloop.tune.schedule.lower import EPILOGUES, NotLowerable, lower, schedule_of
from kernelloop.tune.schedule.records import Schedule


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_generated_files_are_the_lowered_library(name):
    text = (GEMM / GENERATED_FILES[name]).read_text()
    assert text == lower(LIBRARY[name]()), f"regenerate with `kernelloop schedule write` ({GENERATED_FILES[name]})"
    assert schedule_of(text) == LIBRARY[name]()
    launch = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == "launch")
    assert [a.arg for a in launch.args.args] == ["a", "b", "x", "y"]   # launch(a, b, c) or launch(a, b, bias, c)
    assert {a.arg for a in launch.args.kwonlyargs} >= set(LIBRARY[name]().config())



def _defs(path) -> dict[str, str]:
    """Top-level function sources of a file, decorators included."""
    text = path.read_text()
    lines = text.splitlines()
    return {n.name: "\n".join(lines[min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1:n.end_lineno])
            for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}


def test_generated_modules_paste_the_frame_module_and_pass_the_candidate_rules():
    # The shared Gluon functions come from one real module (kernelloop/tune/schedule/gluon_frame.py), pasted because
    # candidates may not import it; the hand-written gluon_kernel.py keeps copies of the same text.
    import importlib
    lowering = importlib.import_module("kernelloop.tune.schedule.lower")
    from kernelloop.core.spec import load_op
    from kernelloop.core.verify.rules import ALLOWED_IMPORT_ROOTS, check_source
    frame = _defs(lowering._FRAME)
    assert "kernelloop" not in ALLOWED_IMPORT_ROOTS
    assert lowering._TEMPLATE.suffix == ".j2" and lowering._TEMPLATE.is_file()
    hand = _defs(GEMM / "gluon_kernel.py")
    for name in ("_mma_layout", "_tile_coords", "_b_slice"):
        assert hand[name] == frame[name], f"ops/gemm/gluon_kernel.py's {name} differs from gluon_frame.py's"
    bundle = load_op(GEMM)
    for name, file in GENERATED_FILES.items():
        text = (GEMM / file).read_text()
        pasted = _defs(GEMM / file)
        for fn in ("_mma_layout", "_tile_coords", "_fused", *(["_b_slice"] if "_b_slice(" in text else [])):
            assert pasted[fn] == frame[fn], (file, fn)
        assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) and "kernelloop" in ast.unparse(n)
                       for n in ast.walk(ast.parse(text)))
        assert check_source(text, bundle.spec) == [], file


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


def test_fused_epilogue_is_lowered_per_accumulator():
    for make, accs in ((gluon_ws, ["acc"]), (gluon_subtiled, ["left", "right"]), (gluon_pingpong, ["acc"])):
        s = make().bind({"EPILOGUE": "bias_gelu"})
        text = lower(s)
        assert schedule_of(text) == s and 'EPILOGUE="bias_gelu"' in text
        for i, a in enumerate(accs):   # the fused operations, then the unchanged store of that accumulator
            col = "pid_n * BLOCK_N" + (f" + {i} * WIDTH" if i else "")
            fused = f"{a} = _fused({a}, Bias, {col}, N, WIDTH, layout, HAS_BIAS, ACT)"
            assert fused in text
            assert text.index(fused) < text.index(f"c_smem.store({a}.to(c_desc.dtype))")
        # the kernel is the plain schedule's apart from what the config selects (SCHEDULE, launch's default)
        plain = lower(make())
        assert [ln for ln in text.splitlines() if "EPILOGUE=" not in ln and not ln.startswith(("SCHEDULE", "a pers"))] \
            == [ln for ln in plain.splitlines() if "EPILOGUE=" not in ln and not ln.startswith(("SCHEDULE", "a pers"))]
    assert "gl.erf(acc * 0.7071067811865476)" in text and "gl.exp(-acc)" in text and "gl.maximum(acc, 0.0)" in text
    assert set(EPILOGUES) == {"none", "bias", "gelu", "silu", "relu", "bias_gelu", "bias_silu", "bias_relu"}
    d = gluon_ws().model_dump()
    d["epilogue"] = {"store": "registers", "fused": ["bias", "silu"]}
    regs = lower(Schedule.model_validate(d))
    assert regs.index("acc = _fused(acc, Bias") < regs.index("gl.store(C + offs_m")


def test_what_the_lowering_cannot_express_is_named():
    for fused in (["gelu", "bias"], ["bias", "silu", "relu"], ["bias", "bias"]):
        d = gluon_ws().model_dump()
        d["epilogue"]["fused"] = fused
        with pytest.raises(NotLowerable) as e:
            lower(Schedule.model_validate(d))
        assert e.value.field == "epilogue.fused" and "a 'bias' first, then at most one activation" in str(e.value)
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


def test_fused_epilogues_build_for_sm90_as_the_gate_predicts(epilogue_builds):
    """Each library schedule with each fused epilogue (and a register-store schedule with one), built for sm_90 on this
    host: every one builds, with the plain store's shared memory, and it spills exactly where the static gate's
    footprint check rejects it (epilogue.fused)."""
    from kernelloop.tune.schedule.resources import check_resources, footprint
    assert len(epilogue_builds) == 7
    for (template, epilogue), (schedule, out) in epilogue_builds.items():
        assert out.status == "built", (template, epilogue, out.error[:500])
        rejected = [f.field for f in check_resources(schedule)]
        assert rejected in ([], ["epilogue.fused"] * len(schedule.math_roles)), (template, epilogue, rejected)
        assert out.spills == bool(rejected), (template, epilogue, out.spills, rejected)
        assert out.registers == 168 and out.shared_bytes <= footprint(schedule).shared_bytes
