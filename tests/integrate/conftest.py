"""The package the integrate tests apply: exported from real interpreter runs (layernorm, rmsnorm, softmax at 64
features, gemm_nt at N=32, K=64; fp16; the token count extended to 1..16), made once per session."""

import os
from pathlib import Path

import pytest

RUNS = {
    "layernorm": ("M = 8, N = 64", []),
    "rmsnorm": ("M = 8, N = 64", []),
    "softmax": ("M = 8, N = 64", []),
    "gemm_nt": ("M = 8, N = 32, K = 64", ["--template", "tiled"]),
}


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory, side_by_side) -> Path:
    if os.environ.get("KERNELLOOP_GPU_TIER") == "1":
        pytest.skip("interpreter package")
    import kernelloop
    from kernelloop.base.builtin import ops_dir
    base = tmp_path_factory.mktemp("apply")
    runs = [base / op for op in RUNS]
    jobs = []
    for op, (axes, extra) in RUNS.items():   # independent runs (own workloads, own run folders): side by side
        wl = base / f"{op}.toml"
        wl.write_text(f'op = "{op}"\n[[workload]]\naxes = {{ {axes} }}\ndtype = "fp16"\n')
        jobs.append((op, wl, base / op, extra))
    side_by_side(jobs, base)
    kernelloop.export(runs, base / "pkg", ops_root=ops_dir(), extend=["M=1:16"], interior=1)
    return base / "pkg"
