"""Shared fixture: every built-in op's templates built once for sm_90 (kernelloop.tune.ptx.survey), for the whole
tests/ptx session."""

from pathlib import Path

import pytest

from kernelloop.tune.ptx.tools import toolchain_missing


@pytest.fixture(scope="session")
def surveyed():
    why = toolchain_missing()
    if why:
        pytest.skip(why)
    from kernelloop.tune.ptx.survey import survey
    return survey(jobs=2)


@pytest.fixture(scope="session")
def kernels(surveyed):
    """{kernel name: RecoveredKernel} of a few distinct kernels (row-wise, persistent, TMA + warp-specialised)."""
    out = {}
    for row in surveyed:
        for rep in row.kernels:
            out.setdefault(f"{row.op}/{row.template}", rep.kernel)
    return out


FIXTURE_PTX = Path(__file__).parents[1] / "fixtures" / "ptx" / "scale_rows.ptx"


@pytest.fixture(scope="session")
def scale_rows():
    """A hand-written kernel (tests/fixtures/ptx/scale_rows.ptx): a loop with masked loads and a store, a branch
    around a short block; recovered from its text."""
    from kernelloop.tune.ptx.recover import from_ptx
    return from_ptx(FIXTURE_PTX.read_text(), origin="ptx", path=str(FIXTURE_PTX), metadata={"shared": 0})
