"""The delivery path end to end on a CUDA GPU, one process after the runs: a Llama-3-8B-shaped decoder (transformers'
own LlamaForCausalLM; hidden 4096, intermediate 14336, 32 heads, 8 KV heads, vocab 128256; LAYERS layers, random
weights, bf16) captured at each batch x sequence, its cards optimized (`kernelloop optimize`, one run per op over all
shapes, confirmed beside the op's baselines), exported (exact guards; winners slower than eager or than the library
call the model makes -- cublas, sdpa-cudnn, sdpa-flash -- are left out), applied, and timed with `kernelloop.e2e`:
original, patched, torch.compile of each (and reduce-overhead, i.e. CUDA graphs, at the small shape), with the
logits check. Liger-Kernel's patched model is timed after, when liger_kernel imports.

rms_norm_eps is 1e-6 here (Llama-3 uses 1e-5): kernelloop's rmsnorm op is verified at its spec's eps, and another
eps would route every norm to the reference.

    python3 benchmarks/delivery_e2e.py --out $OUT/e2e --budget 3 --shapes 1x512 4x2048

Where the GEMM cards' runs do not fit one call: `--stop-after-optimize` (with `--op-budget gemm_nt=2,4m` or
`--gpu-budget`, and `--prior OP=PATH` for a warm start from a recording of the same op), then `--skip-optimize` with
the runs folder carried into the next call.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[1]
BASELINES = {"gemm_nt": ["cublas"], "attention_causal": ["sdpa-cudnn", "sdpa-flash"]}   # what the model calls


def llama8b_shaped(layers: int, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=layers, vocab_size=128256, rms_norm_eps=1e-6, max_position_embeddings=8192,
                      attn_implementation="sdpa", use_cache=False, tie_word_embeddings=False)
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return model


def ids(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 128256, (batch, seq), generator=g).cuda()


def kl(*args: str, log: Path) -> int:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with log.open("a") as f:
        f.write(f"$ kernelloop {' '.join(args)}\n")
        f.flush()
        return subprocess.run([sys.executable, "-m", "kernelloop.cli.app", *args], cwd=ROOT, env=env, stdout=f,
                              stderr=subprocess.STDOUT).returncode


def merge_workloads(dirs: list[Path], out: Path) -> list[str]:
    """One workloads file per op over every captured shape (weights summed)."""
    import tomllib
    out.mkdir(parents=True, exist_ok=True)
    ops: dict[str, dict] = {}
    for d in dirs:
        for f in d.glob("*.toml"):
            data = tomllib.loads(f.read_text())
            for w in data["workload"]:
                key = (json.dumps(w["axes"], sort_keys=True), w["dtype"])
                ops.setdefault(data["op"], {}).setdefault(key, 0.0)
                ops[data["op"]][key] += float(w.get("weight", 1.0))
    for op, rows in ops.items():
        text = f'op = "{op}"\n'
        for (axes, dtype), weight in rows.items():
            ax = ", ".join(f"{k} = {v}" for k, v in json.loads(axes).items())
            text += f'\n[[workload]]\naxes = {{ {ax} }}\ndtype = "{dtype}"\nweight = {weight}\n'
        (out / f"{op}.toml").write_text(text)
    return sorted(ops)


def time_liger(layers: int, shape: tuple[int, int], rounds: int, calls: int) -> dict:
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_llama
    except ImportError as e:
        return {"note": f"not measured: {e}"}
    from kernelloop.core.bench.stats import summarize
    apply_liger_kernel_to_llama()
    model = llama8b_shaped(layers)
    x = ids(*shape)
    with torch.no_grad():
        for _ in range(3):
            model(x)
        samples = []
        for _ in range(rounds):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                model(x)
            e.record()
            e.synchronize()
            samples.append(s.elapsed_time(e) / calls)
    st = summarize([v * 1000 for v in samples], bootstrap=1000, confidence=0.95, seed=1)
    return {"ms": st.median_us / 1000, "ci_ms": [st.ci_low_us / 1000, st.ci_high_us / 1000]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--budget", default="3")
    ap.add_argument("--shapes", nargs="+", default=["1x512", "4x2048"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--skip-optimize", action="store_true", help="reuse the runs already under --out")
    ap.add_argument("--op-budget", action="append", default=[], metavar="OP=BUDGET",
                    help="this op's --budget instead of --budget (e.g. gemm_nt=2,4m), repeatable")
    ap.add_argument("--gpu-budget", type=float, default=None, help="each optimize run's --gpu-budget (GPU seconds)")
    ap.add_argument("--prior", action="append", default=[], metavar="OP=PATH",
                    help="warm-start this op's search from a recording (optimize --prior), repeatable")
    ap.add_argument("--stop-after-optimize", action="store_true",
                    help="capture and optimize only (a later call continues with --skip-optimize)")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "commands.log"
    import kernelloop
    from kernelloop.deliver.capture import write_workloads
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes]
    model = llama8b_shaped(args.layers)
    t0 = time.time()
    card_dirs = []
    for b, s in shapes:
        rep = kernelloop.capture(model, (ids(b, s),))
        rep.save(out / f"cards-{b}x{s}.json")
        d = out / f"cards-{b}x{s}"
        write_workloads(rep, d, ops_dir())
        card_dirs.append(d)
    ops = merge_workloads(card_dirs, out / "workloads")
    print("ops:", ops, f"capture {time.time() - t0:.1f}s", flush=True)
    budgets = dict(a.split("=", 1) for a in args.op_budget)
    priors = {}
    for a in args.prior:
        op, path = a.split("=", 1)
        priors.setdefault(op, []).append(path)
    runs = []
    for op in ops:
        run = out / f"run-{op}"
        if not args.skip_optimize:
            extra = [a for base in BASELINES.get(op, []) for a in ("--baseline", base)]
            extra += [a for path in priors.get(op, []) for a in ("--prior", path)]
            if args.gpu_budget is not None:
                extra += ["--gpu-budget", str(args.gpu_budget)]
            rc = kl("optimize", op, "--workloads", str(out / "workloads" / f"{op}.toml"),
                    "--budget", budgets.get(op, args.budget), "--out", str(run), "--baseline", "eager", *extra,
                    log=log)
            print(op, "optimize rc", rc, f"{time.time() - t0:.0f}s", flush=True)
        if (run / "archive.sqlite").is_file():
            runs.append(run)
    if args.stop_after_optimize:
        return
    pkg_dir = out / "pkg"
    if not pkg_dir.exists():
        kernelloop.export(runs, pkg_dir, ops_root=ops_dir(), ranges=False,
                          against=["cublas", "sdpa-cudnn", "sdpa-flash"])
    pkg = kernelloop.load_package(pkg_dir)
    audit = {op: json.loads((pkg_dir / "audit" / f"{op}.json").read_text()).get("left_out", [])
             for op in pkg.kernels}
    print("left out:", json.dumps(audit, indent=1), flush=True)
    results = {"audit_left_out": audit, "shapes": {}}
    for b, s in shapes:
        modes = ("default", "reduce-overhead") if b * s <= 1024 else ("default",)
        rep = kernelloop.e2e(model, pkg, (ids(b, s),), seeds=(0, 1), rounds=args.rounds, calls=args.calls,
                             name=f"llama3-8b-shaped-{args.layers}L {b}x{s}", compile_modes=modes)
        results["shapes"][f"{b}x{s}"] = {"e2e": rep.model_dump(mode="json"),
                                         "liger": None}
        print(f"{b}x{s}", {t.variant: round(t.ms.median_us, 3) for t in rep.times},
              [(r.baseline, round(r.speedup, 3), r.verdict.value) for r in rep.speedup],
              "outputs_ok", rep.outputs_ok, flush=True)
        (out / "e2e.json").write_text(json.dumps(results, indent=1))
    for b, s in shapes:   # Liger patches transformers' Llama classes for the rest of the process: last
        results["shapes"][f"{b}x{s}"]["liger"] = time_liger(args.layers, (b, s), args.rounds, args.calls)
        print(f"{b}x{s} liger", results["shapes"][f"{b}x{s}"]["liger"], flush=True)
    import triton
    results.update(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), seconds=time.time() - t0)
    (out / "e2e.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
