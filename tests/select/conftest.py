"""Shared by the confirmation and sanitizer tests: interpreter runs of LayerNorm on one small workload, and one such
run (one trial) confirmed in two fresh processes with the sanitizer step on as on a device and no compute-sanitizer
installed, which both test modules read."""

import functools
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Workload
from kernelloop.core.spec import load_op
from kernelloop.core.verify.sanitizer import sanitize

# sanitize() as on a CUDA host (the candidate cannot launch here: warm=False), with whatever tool the environment names
ON_A_DEVICE = functools.partial(sanitize, cuda_available=True, warm=False)


def _layernorm_run(run_dir: Path, evals: int, sanitizer=None, **options) -> tuple[Path, Workload]:
    bundle = load_op(ops_dir() / "layernorm")
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")
    opts = RunOptions(device="interpret", budget=Budget(evals=evals), strategy="random", checks=1,
                      timeouts=Timeouts(check=120.0, bench=120.0), **options)
    Controller(bundle, [w], opts, run_dir, sanitizer=sanitizer).run()
    return run_dir, w


@pytest.fixture
def layernorm_run():
    """layernorm_run(run_dir, evals, sanitizer=None, **options) -> (run_dir, workload): a random-search interpreter
    run of LayerNorm (M 4, N 64, fp16), `evals` trials, confirmed."""
    return _layernorm_run


@pytest.fixture(scope="session")
def confirmed_run(tmp_path_factory) -> tuple[Path, Workload]:
    """One trial, confirmed in two fresh worker processes; the sanitizer step on as on a device, with
    $KERNELLOOP_COMPUTE_SANITIZER naming a tool that does not exist (so it records not_run and goes on)."""
    with pytest.MonkeyPatch.context() as m:
        m.setenv("KERNELLOOP_COMPUTE_SANITIZER", str(tmp_path_factory.mktemp("no-tool") / "absent"))
        return _layernorm_run(tmp_path_factory.mktemp("confirmed") / "run", 1, ON_A_DEVICE)
