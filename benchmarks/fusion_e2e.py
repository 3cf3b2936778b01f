"""Fusion from the model's graph on a Llama-3-8B-shaped decoder, end to end, in one command (`kernelloop.deliver.fuse`).

transformers' LlamaForCausalLM with Llama-3-8B's shapes (hidden 4096, intermediate 14336, 32 heads, 8 KV heads, head
dim 128, vocab 128256, rms_norm_eps 1e-5 -- the fused norm carries that eps), LAYERS layers, random weights, bf16,
SDPA attention, prefill at each --shapes (default 4x2048 and 1x512):

1. discovery on the exported graph of each shape (residual add + RMSNorm, SwiGLU, rotary on q and k);
2. each pattern realised through the loop, its few configurations searched exhaustively (`--fix`: the parameters
   pinned per kernel family, below), each trial timed beside the unfused sequence: the op's eager reference (the
   model's own ATen calls) and torch.compile of it; nothing that is not faster replaces the model's calls (the
   export leaves a winner slower than eager out, composition never takes a measured loss);
3. composition into the exported graph and the end-to-end check per shape: logits against the model's on fresh
   inputs; times of eager, torch.compile, the exported graph unfused, kernelloop-fused, kernelloop-fused under
   torch.compile, the fused graph without each pattern (its contribution) and Liger-Kernel's patched model (when
   liger_kernel imports), with bootstrap intervals.

    python3 benchmarks/fusion_e2e.py --out OUT                   # a CUDA GPU: each pattern's search capped at 45 s
    python3 benchmarks/fusion_e2e.py --out OUT --config tiny     # CPU dry run in Triton's interpreter (no timing)

OUT receives at most 7 files, none in subfolders: report.json (the FuseReport: every pattern with its occurrences,
local speed-ups with intervals and end-to-end contribution; sites; the e2e checks and times), summary.md, env.json,
log.txt, patterns.sqlite (the pattern table), work.tar.gz (op folders, run archives, the package).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The few configurations a GPU run searches per kernel family (exhaustively, within --budget per workload).
GPU_FIX = {
    "dual_gemm": "TMA=1,PERSISTENT=1,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8",  # stages 2..4
    "add_norm": "ROWS=1",                                                         # num_warps 1..16: 5
    "gate_mul": "num_warps=8",                                                    # BLOCK 256..8192: 6
    "act_tail": "num_warps=8",
    "rotary": "POS=1,num_warps=4",                                                # BLOCK_H 1..32: 6
    "gemm_epilogue": "TMA=1,PERSISTENT=1,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,num_warps=8",
}


def build_model(config: str, layers: int, device: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    if config == "tiny":
        cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=64, num_hidden_layers=layers, vocab_size=128, rms_norm_eps=1e-5,
                          max_position_embeddings=256, attn_implementation="sdpa", use_cache=False,
                          tie_word_embeddings=False)
    else:
        cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                          num_hidden_layers=layers, vocab_size=128256, rms_norm_eps=1e-5,
                          max_position_embeddings=8192, attn_implementation="sdpa", use_cache=False,
                          tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return model, cfg.vocab_size


def environment(args) -> dict:
    import torch
    import triton
    env = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": " ".join(sys.argv),
           "python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
           "config": args.config, "layers": args.layers, "shapes": args.shapes, "budget": args.budget,
           "fix": GPU_FIX if args.device == "cuda" else {}}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            env["driver"] = ""
    try:
        env["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        env["commit"] = ""
    return env


def _ci(r) -> str:
    return f"{r.speedup:.3f}x [{r.ci_low:.3f}, {r.ci_high:.3f}] {r.verdict.value}"


def summary(report) -> str:
    L = [f"# Fusion end to end: {report.model} on {report.device}", "", f"{report.verdict}", "",
         "## Patterns", "", "| op | family | occurrences | composed | table | workload | kernel µs | vs eager | "
         "vs torch.compile | e2e contribution |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in report.patterns:
        contrib = "; ".join(f"{k}: {_ci(v)}" for k, v in p.contribution.items()) or "not measured"
        rows = p.local or [None]
        for i, w in enumerate(rows):
            head = (f"| {p.op} | {p.family} | {p.occurrences} | {p.replaced} | {p.table[:50]} " if i == 0
                    else "| | | | | ")
            if w is None:
                L.append(head + f"| | | {p.note[:80] or p.speed} | | {contrib} |")
                continue
            axes = "x".join(f"{k}{v}" for k, v in w.axes.items())
            kus = f"{w.kernel_us:.2f}" if w.kernel_us is not None else ""
            L.append(head + f"| {axes} | {kus} | {_ci(w.vs_eager) if w.vs_eager else p.speed} | "
                     f"{_ci(w.vs_compile) if w.vs_compile else ''} | {contrib if i == 0 else ''} |")
    if report.masks:
        L += ["", "## Causal masks", "", *(f"- {m.shape} {m.node}: {'is_causal' if m.replaced else 'mask kept'} -- "
                                           f"{m.reason}" for m in report.masks)]
    for e in report.e2e:
        L += ["", f"## End to end {e.shape}", "",
              f"logits: {'within' if e.outputs_ok else 'OUTSIDE'} tolerance; min cosine "
              f"{min(c.cosine for c in e.checks):.6f}, max |diff| {max(c.max_abs for c in e.checks):.4g}, "
              f"top-1 (decisive) {min((c.top1_decisive or 1.0) for c in e.checks):.4f}", ""]
        if e.times:
            L += ["| variant | ms [95 % CI] |", "|---|---|"]
            L += [f"| {t.variant} | {t.ms.median_us:.3f} [{t.ms.ci_low_us:.3f}, {t.ms.ci_high_us:.3f}] |"
                  for t in e.times]
            L += ["", *(f"- {r.baseline}: {_ci(r)}" for r in e.speedups)]
            L += [f"- without {op}: {_ci(r)} (fused over fused-{op})" for op, r in e.contributions.items()]
        if e.speed_note:
            L.append(f"- {e.speed_note}")
        if e.liger_note:
            L.append(f"- liger: {e.liger_note}")
        L.append(f"- kernel hits: {json.dumps({k: v['hits'] for k, v in e.counts.items()})}")
    L += ["", "## Not realised", "", *(f"- {x.family}: {x.reason}" for x in report.refused)]
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--config", choices=("llama3-8b", "tiny"), default="llama3-8b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--shapes", nargs="+", default=None, help="BATCHxSEQ (default 4x2048 1x512; tiny: 2x8 1x12)")
    ap.add_argument("--budget", default=None, help="each pattern's loop run: evaluations per workload and a wall-time "
                                                   "cap (default 6,45s: the pinned spaces whole; tiny: 1)")
    ap.add_argument("--device", choices=("cuda", "interpret"), default=None)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--table", type=Path, default=None, help="an earlier run's patterns.sqlite: copied into OUT "
                                                              "first, so its realisations are re-verified, not searched")
    ap.add_argument("--no-liger", action="store_true")
    ap.add_argument("--no-contributions", action="store_true", help="skip the fused-without-each-pattern variants")
    args = ap.parse_args()
    args.device = args.device or ("interpret" if args.config == "tiny" else "cuda")
    args.shapes = args.shapes or (["2x8", "1x12"] if args.config == "tiny" else ["4x2048", "1x512"])
    args.budget = args.budget or ("1" if args.config == "tiny" else "6,45s")
    if args.device == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    log = open(out / "log.txt", "w")
    if args.table is not None:
        shutil.copy(args.table, out / "patterns.sqlite")

    def note(text: str) -> None:
        line = f"[{time.time() - t0:7.1f}s] {text}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    import torch
    from kernelloop.deliver.fuse import fuse
    (out / "env.json").write_text(json.dumps(environment(args), indent=1))
    dev = "cuda" if args.device == "cuda" else "cpu"
    model, vocab = build_model(args.config, args.layers, dev)
    g = torch.Generator().manual_seed(0)
    examples = []
    for s in args.shapes:
        b, q = (int(v) for v in s.split("x"))
        examples.append((torch.randint(0, vocab, (b, q), generator=g).to(dev),))
    note(f"model built: {args.config}, {args.layers} layers, shapes {args.shapes}")
    work = Path(tempfile.mkdtemp(prefix="kernelloop-fusion-"))
    try:
        result = fuse(model, examples, out=work, budget=int(args.budget) if args.budget.isdigit() else args.budget,
                      device=args.device, strategy="exhaustive", table=out / "patterns.sqlite",
                      confirm=False, sanitize=False, jobs=1, fixed=GPU_FIX if args.device == "cuda" else None,
                      rounds=args.rounds, calls=args.calls, liger=not args.no_liger,
                      contributions=not args.no_contributions, on_note=note)
        r = result.report
        (out / "report.json").write_text(r.model_dump_json(indent=1))
        (out / "summary.md").write_text(summary(r))
        note(r.verdict)
        with tarfile.open(out / "work.tar.gz", "w:gz") as tar:
            for name in ("ops", "runs", "package"):
                if (work / name).exists():
                    tar.add(work / name, arcname=name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    note(f"done in {time.time() - t0:.0f} s")
    log.close()
    return 0 if result.report.kept else 1


if __name__ == "__main__":
    sys.exit(main())
