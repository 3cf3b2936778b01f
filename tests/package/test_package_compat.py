"""A package exported by kernelloop 0.1.0 before the source tree was regrouped into floor folders
(tests/fixtures/packages/rmsnorm-0.1.0: `kernelloop optimize rmsnorm --device interpret --budget 2`, then
`kernelloop export`) still loads, passes its signature and digest checks, and runs its kernels.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import kernelloop  # noqa: E402
from kernelloop.deliver.package import PackageError  # noqa: E402

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "packages" / "rmsnorm-0.1.0"
pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


def signer() -> bytes:
    return bytes.fromhex(json.loads((OLD / "kernelloop-package.json").read_text())["signature"]["public_key"])


def test_a_package_from_before_the_move_loads_and_runs_its_kernels():
    pkg = kernelloop.load_package(OLD, trust=[signer()])
    k = pkg["rmsnorm"]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=g).half()
    w = (1 + 0.1 * torch.randn(256, generator=g)).half()
    y = k(x, w)
    ref = torch.nn.functional.rms_norm(x.double(), (256,), w.double(), 1e-6)
    assert (y.double() - ref).abs().max() < 1e-2
    assert k.hits.get("e1") == 1 and not k.fallbacks    # the kernel ran, not the reference


def test_the_old_package_is_still_refused_when_edited(tmp_path):
    copy = tmp_path / "pkg"
    shutil.copytree(OLD, copy)
    kernel = next((copy / "ops" / "rmsnorm" / "kernels").glob("persistent-*.py"))
    kernel.write_text(kernel.read_text() + "\n# edited\n")
    with pytest.raises(PackageError, match="persistent"):
        kernelloop.load_package(copy, trust=[signer()])
