"""Constants the tests/schedule fixtures and tests share."""

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import Workload

GEMM = ops_dir() / "gemm"
WORKLOAD = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
# each template at the configuration its schedule in kernelloop.tune.schedule.library is written at
CONFIGS = {
    "gluon_ws": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3),
    "gluon_subtiled": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4),
    "gluon_pingpong": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=5),
}
PINNED = {"EPILOGUE": "none", "TRANS_B": 0}
