"""`kernelloop.accelerate(..., fuse=True)` and `kernelloop accelerate --fuse` where nothing is fused: a residual add
+ LayerNorm without affine parameters has nothing capture maps and nothing fuse takes; the summary gives fuse's own
reason, through the API and the CLI, and is otherwise what it is without fusion. llama-tiny's fused graph is checked
in test_accelerate.py, beside the module's shared accelerate run (its finished runs reused).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("transformers")

import kernelloop  # noqa: E402
from kernelloop.deliver import api  # noqa: E402
from kernelloop.deliver.accelerate import FusionStatus  # noqa: E402
from kernelloop.deliver.capture.models import build  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")]

PLAIN_NORM = """import torch


class AddNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(64, elementwise_affine=False)

    def forward(self, x, y):
        return self.norm(x + y)    # no weight, no bias: capture maps no op, fuse's add_norm plan refuses it


def make():
    return AddNorm(), (torch.randn(4, 64), torch.randn(4, 64))
"""
REFUSED = "residual_add_norm (add_norm): layer_norm without a weight and a bias parameter"


def test_nothing_to_fuse_reports_fuses_reasons(tmp_path):
    ns: dict = {}
    exec(PLAIN_NORM, ns)
    model, example = ns["make"]()
    plain = kernelloop.accelerate(model, example, budget=1, out=tmp_path / "plain", device="cpu")
    result = kernelloop.accelerate(model, example, budget=1, out=tmp_path / "fused", device="cpu", fuse=True)
    f = result.summary.fusion
    assert f.status is FusionStatus.NOTHING_TO_FUSE and f.patterns == [] and REFUSED in f.reasons
    assert result.fused is None and f.outputs_ok is None and f.speed == ""
    assert plain.summary.fusion.status is FusionStatus.NOT_TRIED and plain.fused is None
    keep = {"cards", "ops", "package", "replaced", "verdict"}
    assert result.summary.model_dump(include=keep) == plain.summary.model_dump(include=keep)


def test_the_cli_says_why_nothing_was_fused(tmp_path):
    (tmp_path / "addnorm.py").write_text(PLAIN_NORM)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "kernelloop.cli.app", "accelerate", "addnorm.py:make", "--device", "cpu",
                        "--budget", "1", "--out", "o", "--fuse"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 1, p.stderr[-3000:]           # nothing patched: the exit code fusion does not change
    assert "fusion: nothing to fuse" in p.stdout and f"not fused: {REFUSED}" in p.stdout, p.stdout


def test_an_unknown_fusion_family_is_refused_before_any_work(tmp_path):
    model, example = build("llama-tiny")
    with pytest.raises(api.UsageError, match="nope"):
        kernelloop.accelerate(model, example, budget=1, out=tmp_path / "o", device="cpu", fuse=True,
                              fuse_families=["nope"])
    assert not (tmp_path / "o").exists()
