"""GPU tier: a worker's CUDA IPC exports that the controller does not copy are released (core/execute/shared.py).

Each buffer a worker exports by CUDA IPC stays allocated until the controller has opened and dropped it. A trial
judged before the copy (here: `launch` returns a value, REJECTED) must release them, or every such trial leaks its
inputs and outputs in the worker until the GPU runs out of memory. Several such trials in one worker: the GPU's free
memory, as this process sees it (the worker shares the GPU), must not shrink from one trial to the next."""

from pathlib import Path

import pytest

from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload

pytestmark = pytest.mark.gpu
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "candidates"
W = Workload(op="layernorm", axes={"M": 8192, "N": 4096}, dtype="fp16")   # 64 MiB per input and output
TRIALS = 6


def test_rejected_trials_release_the_workers_exports(layernorm, tmp_path):
    import torch
    honest = (FIXTURES / "honest_layernorm.py").read_text()
    returns = honest + "\n\n_launch = launch\n\n\ndef launch(*args, **kwargs):\n    _launch(*args, **kwargs)\n" \
                       "    return 0\n"
    cand = Candidate(op="layernorm", template="custom", source=returns, config={})
    worker = Worker("cuda", tmp_path / "worker")
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS, secret="release", checks=2,
                   timeouts=Timeouts(check=120.0, bench=120.0), static_rules=False)
    free = []
    try:
        for k in range(TRIALS):
            out = ev.evaluate(cand, W, worker.work_dir / f"job-{k}")
            assert out.verdict.status is Status.REJECTED and "launch-returned" in out.verdict.message, out.verdict
            torch.cuda.synchronize()
            free.append(torch.cuda.mem_get_info()[0])
        starts = worker.starts
    finally:
        worker.close()
    assert starts == 1, "every trial ran in the one worker"
    if ev.transport != "cuda-ipc":
        pytest.skip(f"CUDA IPC is refused here, nothing was exported: {ev.transport_note}")
    # after the first trial (compilation, the caching allocators' pools) nothing more may be held per trial; a leak
    # holds every case's inputs and outputs, several hundred MiB per trial
    shrunk = (free[1] - free[-1]) / 2**20
    assert shrunk < 128, f"free GPU memory shrank by {shrunk:.0f} MiB over {TRIALS - 2} rejected trials: {free}"
