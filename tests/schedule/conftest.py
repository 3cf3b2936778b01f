"""Shared fixture: the three hand-written Gluon GEMM templates and the templates generated from their schedules, built
once for sm_90 on this host (with their PTX and cubins), for the whole tests/schedule session."""

import pytest

from schedule_fixtures import CONFIGS, GEMM, PINNED, WORKLOAD


@pytest.fixture(scope="session")
def library_builds():
    """{template name: BuildOutcome} for every original and generated template (one batch, two build processes)."""
    from kernelloop.ptx.tools import toolchain_missing
    from kernelloop.schedule.compare import library_pairs
    from kernelloop.spec import load_op
    from kernelloop.spec.aot import build_configs
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
