"""The side-stream attack against a bare `triton.testing.do_bench` and against kernelloop's evaluator.

    python benchmarks/side_stream.py [--out side_stream.json]   # on a GPU host; prints both, writes the JSON

The cheat (tests/fixtures/cuda_cheats/side_stream_layernorm.py) computes a correct LayerNorm on a private
stream. do_bench records its events on the current stream, so it reports the launch gap, not the kernel: the
host's time to launch the call. On the H200 that gap (~25 µs of Python) is about the kernel time of [4096, 4096],
so the attack shows on larger rows: do_bench is run on each --shapes entry; kernelloop's evaluator on the first.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import torch
import triton

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Workload
from kernelloop.core.reference.inputs import alloc_outputs, make_inputs
from kernelloop.core.spec import load_op

ROOT = Path(__file__).resolve().parents[1]
CHEAT = ROOT / "tests" / "fixtures" / "cuda_cheats" / "side_stream_layernorm.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="side_stream.json")
    ap.add_argument("--shapes", default="4096x4096,65536x8192", help="MxN,... (fp16); the first is evaluated")
    args = ap.parse_args()
    bundle = load_op(ops_dir() / "layernorm")
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    w = Workload(op="layernorm", axes={"M": shapes[0][0], "N": shapes[0][1]}, dtype="fp16")
    spec = importlib.util.spec_from_file_location("cheat", CHEAT)
    cheat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cheat)
    honest = importlib.util.spec_from_file_location("honest", ops_dir() / "layernorm" / "kernel.py")
    hon = importlib.util.module_from_spec(honest)
    honest.loader.exec_module(hon)
    bare = []
    for m, n in shapes:
        ws = Workload(op="layernorm", axes={"M": m, "N": n}, dtype="fp16")
        x, wt, b = make_inputs(bundle.spec, ws, 1, "cuda")
        (y,) = alloc_outputs(bundle.spec, ws, "cuda")
        cfg = {"BLOCK_N": triton.next_power_of_2(n), "ROWS": 1, "num_warps": 8 if n <= 4096 else 16}
        cheat_ms = triton.testing.do_bench(lambda: cheat.launch(x, wt, b, y, eps=1e-5), return_mode="median")
        honest_ms = triton.testing.do_bench(lambda: hon.launch(x, wt, b, y, eps=1e-5, **cfg), return_mode="median")
        bare.append({"shape": [m, n], "do_bench_cheat_us": cheat_ms * 1e3, "do_bench_honest_us": honest_ms * 1e3,
                     "honest_over_cheat": honest_ms / cheat_ms})
        del x, wt, b, y
        torch.cuda.empty_cache()
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker("cuda", Path(tmp))
        # Static rules off: this shows the *timer* (audit + physical floor) catching it, not the source rules.
        ev = Evaluator(bundle, "cuda", worker, COLD_L2_EVENTS, secret="side-stream", static_rules=False)
        res = ev.evaluate(Candidate(op="layernorm", template="custom", source=CHEAT.read_text()), w, Path(tmp) / "j")
        worker.close()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
           "do_bench": bare, "do_bench_cheat_us": bare[0]["do_bench_cheat_us"],
           "do_bench_honest_us": bare[0]["do_bench_honest_us"], "kernelloop_workload": w.label,
           "kernelloop_verdict": res.verdict.status.value, "kernelloop_message": res.verdict.message}
    print(json.dumps(out, indent=2))
    Path(args.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
