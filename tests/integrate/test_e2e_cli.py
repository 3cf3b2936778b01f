"""`kernelloop e2e` with a factory model against the integrate package: the dtype comes from the package, a model
the package does not fit or patches nothing in is not passed, and a model that raises or inputs of another form
get one line and the shared exit codes.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kernelloop.cli.app import app  # noqa: E402
from kernelloop.cli.common import ExitCode  # noqa: E402

FACTORIES = Path(__file__).resolve().parent / "e2e_factories.py"
pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")
runner = CliRunner()


def _e2e(package_dir, out, factory, *args):
    return runner.invoke(app, ["e2e", f"{FACTORIES}:{factory}", str(package_dir), "--device", "cpu", "--seeds", "1",
                               "--out", str(out), *args])


def test_without_dtype_the_model_gets_the_packages_and_is_patched(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "fp16_by_default")
    assert r.exit_code == ExitCode.OK, r.output
    report = json.loads((tmp_path / "e2e.json").read_text())
    assert report["sites"]["replaced"] >= 2 and report["patched"]
    assert report["counts"]["ops"]["gemm_nt"]["entries"] == {"e0": 1}


def test_a_model_of_another_dtype_than_the_package_is_bad_input(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "fp16_by_default", "--dtype", "bf16")
    assert r.exit_code == ExitCode.BAD_INPUT, r.output
    assert "the model is bf16; the package's kernels are for fp16 (pass --dtype fp16)" in r.output
    assert not (tmp_path / "e2e.json").exists()


def test_nothing_patched_is_not_delivered(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "uncovered")
    assert r.exit_code == ExitCode.FAILED, r.output
    assert "NOT delivered: no call site was replaced" in r.output
    assert json.loads((tmp_path / "e2e.json").read_text())["delivered"] is False


def test_a_model_that_raises_is_one_line_and_exit_3(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "raises")
    assert r.exit_code == ExitCode.STOPPED, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    assert "the model raised: Raises raised on its example inputs: ValueError: boom in forward" in \
        " ".join(r.output.split())


def test_example_inputs_as_a_list_are_positional_arguments(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "as_list")
    assert r.exit_code == ExitCode.OK, r.output
    assert json.loads((tmp_path / "e2e.json").read_text())["patched"]


def test_example_inputs_as_a_dict_are_bad_input(package_dir, tmp_path):
    r = _e2e(package_dir, tmp_path, "as_dict")
    assert r.exit_code == ExitCode.BAD_INPUT, r.output
    assert "example_inputs is a dict of keyword arguments" in " ".join(r.output.split())
