"""rmsnorm and softmax templates under the Triton CPU interpreter, plus spec/workload/baseline checks.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":  # the GPU tier (pytest -m gpu) compiles for the device
    os.environ["TRITON_INTERPRET"] = "1"

import importlib.util  # noqa: E402
import tomllib  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import OpSpec  # noqa: E402
from kernelloop.core.spec import load_op, load_workloads  # noqa: E402

OPS_DIR = ops_dir()
# Rows past M (SINGLE path, M % ROWS != 0) compute exp(-inf) sums of 0 and 1/0 before their masked
# store; numpy in the interpreter warns about it. Nothing of it reaches memory (checked below).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

ALL_OPS = ["layernorm", "rmsnorm", "softmax"]
TORCH_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _load_module(op: str, file: str):
    path = OPS_DIR / op / file
    spec = importlib.util.spec_from_file_location(f"_test_{op}_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _spec_toml(op: str) -> dict:
    with open(OPS_DIR / op / "spec.toml", "rb") as f:
        return tomllib.load(f)


def _within(out: torch.Tensor, ref: torch.Tensor, tol: dict) -> bool:
    err = (out.double() - ref).abs()
    return bool((err <= tol["atol"] + tol["rtol"] * ref.abs()).all())


def _poisoned_output(M: int, N: int, dtype: torch.dtype):
    """A NaN-filled (M, N) output that is a view into a buffer with a guard row after it."""
    buf = torch.full((M + 1, N), float("nan"), dtype=dtype)
    return buf, buf[:M]


def _check_written(buf: torch.Tensor, y: torch.Tensor):
    assert not torch.isnan(y).any(), "some output elements were not written (still NaN)"
    assert torch.isnan(buf[-1]).all(), "the kernel wrote past the end of its output"


# (M, N, BLOCK_N, ROWS, EVICT_FIRST): SINGLE when BLOCK_N >= N, looped otherwise.
CASES = [
    pytest.param(7, 100, 128, 4, 0, id="single-M7-N100-rows4"),       # M % ROWS != 0, N not pow2
    pytest.param(5, 256, 256, 2, 1, id="single-M5-N256-rows2-evict"),  # N == BLOCK_N exactly
    pytest.param(1, 33, 64, 1, 0, id="single-M1-N33"),
    pytest.param(3, 1000, 256, 1, 1, id="loop-M3-N1000-evict"),        # N % BLOCK_N != 0
    pytest.param(2, 2048, 512, 1, 0, id="loop-M2-N2048"),              # N % BLOCK_N == 0
    pytest.param(2, 3000, 1024, 4, 0, id="loop-M2-N3000-rows-ignored"),  # ROWS ignored when looping
]
DTYPES = ["fp32", "fp16"]


def _activations(M, N, dtype, gen, mean=0.5, std=1.0):
    return (torch.randn(M, N, generator=gen, dtype=torch.float32) * std + mean).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,BLOCK_N,ROWS,EVICT_FIRST", CASES)
def test_rmsnorm_kernel(M, N, BLOCK_N, ROWS, EVICT_FIRST, dtype):
    kernel, ref_mod = _load_module("rmsnorm", "kernel.py"), _load_module("rmsnorm", "reference.py")
    spec = _spec_toml("rmsnorm")
    eps, tol = spec["scalars"]["eps"], spec["tolerance"][dtype]
    td = TORCH_DTYPES[dtype]
    gen = torch.Generator().manual_seed(M * 7919 + N)
    x = _activations(M, N, td, gen)
    w = (1.0 + 0.1 * torch.randn(N, generator=gen)).to(td)
    buf, y = _poisoned_output(M, N, td)
    kernel.launch(x, w, y, eps=eps, BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=4, EVICT_FIRST=EVICT_FIRST)
    _check_written(buf, y)
    truth = ref_mod.reference(x.double(), w.double(), eps)
    assert _within(y, truth, tol), f"max err {(y.double() - truth).abs().max().item():.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,BLOCK_N,ROWS,EVICT_FIRST", CASES)
def test_softmax_kernel(M, N, BLOCK_N, ROWS, EVICT_FIRST, dtype):
    kernel, ref_mod = _load_module("softmax", "kernel.py"), _load_module("softmax", "reference.py")
    tol = _spec_toml("softmax")["tolerance"][dtype]
    td = TORCH_DTYPES[dtype]
    gen = torch.Generator().manual_seed(M * 7919 + N)
    for mean, std in [(0.5, 1.0), (0.0, 4.0)]:
        x = _activations(M, N, td, gen, mean, std)
        buf, y = _poisoned_output(M, N, td)
        kernel.launch(x, y, BLOCK_N=BLOCK_N, ROWS=ROWS, num_warps=4, EVICT_FIRST=EVICT_FIRST)
        _check_written(buf, y)
        truth = ref_mod.reference(x.double())
        assert _within(y, truth, tol), f"max err {(y.double() - truth).abs().max().item():.3g}"
        # The tolerance must be tight enough that a kernel writing zeros fails.
        assert not _within(torch.zeros_like(y), truth, tol)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_softmax_tolerance_rejects_zeros_at_wide_rows(dtype):
    """At N = 12288 softmax outputs are ~1e-5; an all-zero output must still fail."""
    tol = _spec_toml("softmax")["tolerance"][dtype]
    gen = torch.Generator().manual_seed(0)
    for mean, std in [(0.5, 1.0), (0.0, 4.0)]:
        x = _activations(4, 12288, TORCH_DTYPES[dtype], gen, mean, std)
        truth = torch.softmax(x.double(), dim=-1)
        assert not _within(torch.zeros_like(x), truth, tol)
        # and a correctly rounded result passes
        assert _within(truth.to(x.dtype), truth, tol)


def test_softmax_masked_lanes_do_not_win_the_max():
    """Rows of large negative values: a masked lane loading 0 instead of -inf would win the max and
    add exp(0) = 1 per masked lane to the sum, so the output would be far too small."""
    kernel = _load_module("softmax", "kernel.py")
    tol = _spec_toml("softmax")["tolerance"]["fp32"]
    x = -50.0 - torch.rand(3, 300, generator=torch.Generator().manual_seed(1)) * 5
    for BLOCK_N in (512, 128):  # SINGLE with 212 masked lanes; looped with a ragged last block
        buf, y = _poisoned_output(3, 300, torch.float32)
        kernel.launch(x, y, BLOCK_N=BLOCK_N, ROWS=2, num_warps=1)
        _check_written(buf, y)
        assert _within(y, torch.softmax(x.double(), -1), tol)


@pytest.mark.parametrize("op", ALL_OPS)
def test_spec_parses(op):
    data = _spec_toml(op)
    spec = OpSpec.model_validate(data)
    assert spec.name == op
    assert [t.name for t in spec.templates] == ["rowwise", "chunked", "persistent"]
    bundle = load_op(OPS_DIR / op)  # also checks reference() and launch() exist
    for wl_file in ("workloads.toml", "workloads-interpret.toml"):
        workloads = load_workloads(OPS_DIR / op / wl_file, bundle.spec)
        assert workloads and all(w.op == op for w in workloads)


@pytest.mark.parametrize("op", ALL_OPS)
def test_baselines_table(op):
    mod = _load_module(op, "baselines.py")
    assert "liger" in mod.BASELINES
    for name, factory in mod.BASELINES.items():
        assert callable(factory), name
    if importlib.util.find_spec("liger_kernel") is None:
        with pytest.raises(ImportError):
            mod.BASELINES["liger"]()
