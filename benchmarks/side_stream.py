"""The side-stream attack against a bare `triton.testing.do_bench` and against kernelloop's evaluator.

    python benchmarks/side_stream.py [--out side_stream.json]   # on a GPU host; prints both, writes the JSON

The cheat (tests/fixtures/cuda_cheats/side_stream_layernorm.py) computes a correct LayerNorm on a private
stream. do_bench records its events on the current stream, so it reports the launch gap, not the kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import torch
import triton

from kernelloop.bench.policy import COLD_L2_EVENTS
from kernelloop.execute.evaluate import Evaluator
from kernelloop.execute.pool import Worker
from kernelloop.records import Candidate, Workload
from kernelloop.reference.inputs import alloc_outputs, make_inputs
from kernelloop.spec import load_op

ROOT = Path(__file__).resolve().parents[1]
CHEAT = ROOT / "tests" / "fixtures" / "cuda_cheats" / "side_stream_layernorm.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="side_stream.json")
    args = ap.parse_args()
    bundle = load_op(ROOT / "ops" / "layernorm")
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16")
    spec = importlib.util.spec_from_file_location("cheat", CHEAT)
    cheat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cheat)
    honest = importlib.util.spec_from_file_location("honest", ROOT / "ops" / "layernorm" / "kernel.py")
    hon = importlib.util.module_from_spec(honest)
    honest.loader.exec_module(hon)
    x, wt, b = make_inputs(bundle.spec, w, 1, "cuda")
    (y,) = alloc_outputs(bundle.spec, w, "cuda")
    cfg = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}
    bare_cheat = triton.testing.do_bench(lambda: cheat.launch(x, wt, b, y, eps=1e-5), return_mode="median")
    bare_honest = triton.testing.do_bench(lambda: hon.launch(x, wt, b, y, eps=1e-5, **cfg), return_mode="median")
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker("cuda", Path(tmp))
        # Static rules off: this shows the *timer* (audit + physical floor) catching it, not the source rules.
        ev = Evaluator(bundle, "cuda", worker, COLD_L2_EVENTS, secret="side-stream", static_rules=False)
        res = ev.evaluate(Candidate(op="layernorm", template="custom", source=CHEAT.read_text()), w, Path(tmp) / "j")
        worker.close()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "do_bench_cheat_us": bare_cheat * 1e3, "do_bench_honest_us": bare_honest * 1e3,
           "kernelloop_verdict": res.verdict.status.value, "kernelloop_message": res.verdict.message}
    print(json.dumps(out, indent=2))
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
