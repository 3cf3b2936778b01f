"""Shared fixture: the three hand-written Gluon GEMM templates and the templates generated from their schedules, built
once for sm_90 on this host (with their PTX and cubins), for the whole tests/schedule session."""

import pytest

from schedule_fixtures import CONFIGS, GEMM, PINNED, WORKLOAD


@pytest.fixture(scope="session")
def library_builds():
    """{template name: BuildOutcome} for every original and generated template (one batch, two build processes)."""
    from kernelloop.tune.ptx.tools import toolchain_missing
    from kernelloop.tune.schedule.compare import library_pairs
    from kernelloop.core.spec import load_op
    from kernelloop.core.build.aot import build_configs
    why = toolchain_missing()
    if why:
        pytest.skip(why)
    spec = load_op(GEMM).spec
    files = {t.name: GEMM / t.file for t in spec.templates if t.name.startswith(("gluon", "schedule"))}
    configs = []
    for orig, gen, c_orig, c_gen in library_pairs({k: {**v, **PINNED} for k, v in CONFIGS.items()}):
        configs += [{"template": orig, **c_orig}, {"template": gen, **c_gen}]
    outs = build_configs(spec, files, WORKLOAD, configs, jobs=2, keep_asm=True)
    if any("no Gluon" in o.error for o in outs):
        pytest.skip(outs[0].error)
    return {o.template: o for o in outs}


@pytest.fixture(scope="session")
def epilogue_builds(tmp_path_factory):
    """{(template, EPILOGUE): (bound schedule, BuildOutcome)}: the generated templates with fused epilogues (every
    epilogue on schedule_ws, the exact GELU on the other two, SiLU on a register-store lowering), built for sm_90 as
    gemm_bias (launch(a, b, bias, c)) in one batch."""
    from kernelloop.tune.ptx.tools import toolchain_missing
    from kernelloop.tune.schedule.library import LIBRARY
    from kernelloop.tune.schedule.lower import lower
    from kernelloop.core.spec import load_op
    from kernelloop.core.build.aot import build_configs
    why = toolchain_missing()
    if why:
        pytest.skip(why)
    op = load_op(GEMM.parent / "gemm_bias")
    files = {t.name: (op.folder / t.file).resolve() for t in op.spec.templates if t.name.startswith("schedule")}
    regs = LIBRARY["gluon_ws"]().model_copy(update={"name": "ws_registers"})
    regs = regs.model_validate({**regs.model_dump(), "epilogue": {"store": "registers"}})
    files["ws_registers"] = tmp_path_factory.mktemp("epilogue") / "ws_registers.py"
    files["ws_registers"].write_text(lower(regs))
    origin = {"schedule_ws": "gluon_ws", "schedule_subtiled": "gluon_subtiled", "schedule_pingpong": "gluon_pingpong"}
    wanted = [("schedule_ws", e) for e in ("bias", "bias_gelu", "bias_silu", "bias_relu")]
    wanted += [("schedule_subtiled", "bias_gelu"), ("schedule_pingpong", "bias_gelu"), ("ws_registers", "bias_silu")]
    configs, schedules = [], []
    for template, epilogue in wanted:
        base = regs if template == "ws_registers" else LIBRARY[origin[template]]()
        configs.append({"template": template, **base.config(), **PINNED, "EPILOGUE": epilogue})
        schedules.append(base.bind(configs[-1]))
    workload = WORKLOAD.model_copy(update={"op": "gemm_bias"})
    outs = build_configs(op.spec, files, workload, configs, jobs=2)
    if any("no Gluon" in o.error for o in outs):
        pytest.skip(outs[0].error)
    return {w: (s, o) for w, s, o in zip(wanted, schedules, outs)}
