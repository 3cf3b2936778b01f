"""Shared fixture: every built-in op's templates built once for sm_90 (kernelloop.ptx.survey), for the whole
tests/ptx session."""

import pytest

from kernelloop.ptx.tools import toolchain_missing


@pytest.fixture(scope="session")
def surveyed():
    why = toolchain_missing()
    if why:
        pytest.skip(why)
    from kernelloop.ptx.survey import survey
    return survey(jobs=2)


@pytest.fixture(scope="session")
def kernels(surveyed):
    """{kernel name: RecoveredKernel} of a few distinct kernels (row-wise, persistent, TMA + warp-specialised)."""
    out = {}
    for row in surveyed:
        for rep in row.kernels:
            out.setdefault(f"{row.op}/{row.template}", rep.kernel)
    return out
