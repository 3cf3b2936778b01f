"""The profiling harness' jobs: candidate mode and baseline mode (the baseline callable is the worker's own)."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.profile import harness
from kernelloop.tune.profile.ncu import NVTX_RANGE, NcuOptions, baseline_job, harness_job, ncu_command
from kernelloop.base.records import DType, Workload
from kernelloop.core.reference.inputs import make_inputs

OPS = ops_dir()
W = Workload(op="layernorm", axes={"M": 8, "N": 64}, dtype=DType.fp32)


def test_candidate_job_has_the_candidate_mode():
    job = harness_job(OPS / "layernorm", OPS / "layernorm" / "kernel.py", {"BLOCK_N": 64}, W.model_dump_json(), 5)
    assert job["mode"] == "candidate" and job["seed"] == 5 and job["nvtx_range"] == NVTX_RANGE
    assert job["source_file"].endswith("kernel.py") and job["config"] == {"BLOCK_N": 64}


def test_baseline_job_carries_what_the_worker_gets_for_baselines(layernorm):
    job = baseline_job(OPS / "layernorm", "eager", W, seed=7)
    assert json.loads(json.dumps(job)) == job                                # JSON-able: written for the harness
    assert job["mode"] == "baseline" and job["baseline"] == "eager" and job["seed"] == 7
    assert Workload.model_validate_json(job["workload"]) == W
    assert Path(job["reference_file"]) == OPS / "layernorm" / "reference.py"
    assert Path(job["baselines_file"]) == OPS / "layernorm" / "baselines.py"
    assert job["bytes_moved"] == layernorm.spec.bytes_moved(W.axes, W.dtype)
    assert "source_file" not in job and "config" not in job


def test_baseline_job_of_an_op_without_baselines_py(tmp_path):
    op = tmp_path / "layernorm"
    shutil.copytree(OPS / "layernorm", op, ignore=shutil.ignore_patterns("__pycache__", "baselines.py"))
    assert baseline_job(op, "copy", W, seed=1)["baselines_file"] == ""


def test_baseline_mode_builds_the_same_inputs_and_calls_the_baseline(layernorm):
    """On CPU tensors (no ncu here): the harness' eager call is the reference on the job's seeded inputs."""
    job = baseline_job(OPS / "layernorm", "eager", W, seed=11)
    call, what = harness.build_call(job, device="cpu")
    assert what == {"mode": "baseline", "baseline": "eager", "workload": W.label}
    x, weight, bias = make_inputs(layernorm.spec, W, 11, "cpu")
    expected = torch.nn.functional.layer_norm(x, (64,), weight, bias, layernorm.spec.scalars["eps"])
    assert torch.equal(call(), expected)
    copy, _ = harness.build_call(baseline_job(OPS / "layernorm", "copy", W, seed=11), device="cpu")
    out = copy()
    assert out.dtype == torch.uint8 and out.numel() == int(job["bytes_moved"] // 2)


def test_unavailable_baselines_and_modes_raise():
    with pytest.raises(KeyError):
        harness.build_call(baseline_job(OPS / "layernorm", "no-such-baseline", W, seed=1), device="cpu")
    with pytest.raises(ValueError, match="unknown harness mode"):
        harness.build_call({**baseline_job(OPS / "layernorm", "eager", W, seed=1), "mode": "other"}, device="cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_harness_refuses_without_cuda(tmp_path, capsys):
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(baseline_job(OPS / "layernorm", "eager", W, seed=1)))
    assert harness.main([str(job_file)]) == 2
    assert json.loads(capsys.readouterr().out)["ok"] is False


def test_every_launch_in_the_range_is_profiled_without_a_kernel_name():
    everything = ncu_command("ncu", ["python"], "/r/p", NcuOptions(launch_count=None))
    assert "--launch-count" not in everything and "--kernel-name" not in everything
    assert everything[everything.index("--nvtx-include") + 1] == f"{NVTX_RANGE}/"
    one = ncu_command("ncu", ["python"], "/r/p", NcuOptions(kernel_regex="k"))
    assert one[one.index("--launch-count") + 1] == "1"
