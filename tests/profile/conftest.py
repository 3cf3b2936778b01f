from pathlib import Path

import pytest

from kernelloop.tune.profile.ncu_csv import read_details_csv

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NCU_CSV = FIXTURES / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"


@pytest.fixture(scope="session")
def h200_profiles():
    """The recorded H200 Nsight Compute CSV, parsed (7 launches)."""
    return read_details_csv(NCU_CSV)
