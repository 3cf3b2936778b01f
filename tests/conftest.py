import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "ops"
FIXTURES = Path(__file__).parent / "fixtures"


def has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_configure(config):
    # The GPU tier (`pytest -m gpu`): test modules that interpret Triton on the CPU set TRITON_INTERPRET=1 at import,
    # which would make every kernel imported after them run in the interpreter on the GPU host too.
    if (config.getoption("markexpr", "") or "").strip() == "gpu":
        os.environ["KERNELLOOP_GPU_TIER"] = "1"
        os.environ.pop("TRITON_INTERPRET", None)


def pytest_collection_finish(session):
    # Collection imports every test module; one that sets TRITON_INTERPRET unconditionally would otherwise leave it
    # set for the in-process GPU tests that define kernels later.
    if os.environ.get("KERNELLOOP_GPU_TIER") == "1":
        os.environ.pop("TRITON_INTERPRET", None)


def pytest_collection_modifyitems(config, items):
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (gpu tier: scripts/gpu_tier.sh on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def layernorm():
    from kernelloop.spec import load_op
    return load_op(OPS / "layernorm")


@pytest.fixture(scope="session")
def interp_device() -> str:
    return "interpret"
