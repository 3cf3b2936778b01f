"""Which kernels a GEMM call launches, and how long each takes: cuBLAS (torch.matmul) beside configurations of
ops/gemm's templates, per shape, from the CUDA profiler's kernel records (name, grid, block, registers, shared
memory, duration). A diagnostic, not a benchmark of record: the loop's timer gives the figures we report; this
says where a call's time goes (the split-K GEMM vs its partial-sum kernel, cuBLAS's kernel choice and grid).

    python3 benchmarks/gemm_kernels.py --out gemm-kernels.json [--shapes few-tiles|4096|narrow|large|gluon|streamk|behind|pingpong] [--iters 20]

A configuration with "template": "gluon_ws" runs ops/gemm/gluon_kernel.py (the warp-specialized Gluon kernel)
instead of ops/gemm/kernel.py; one with "SK": 1 is the stream-K template (kernel.py). Each configuration is called
three times first: `deterministic` says whether the three outputs were bitwise equal. Shapes are bf16, but for 4096^3
in the "4096", "gluon", "streamk" and "pingpong" sets: fp16 (the seed's case study).

L2 is flushed (a 256 MiB write) before every call; the flush kernel is left out of the records.
"""

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys

import torch
from kernelloop.base.builtin import ops_dir


SHAPES = {
    # (M, N, K): the six prefill shapes with few output tiles (Llama-3 8B/70B projections at M = 512 / 2048)
    "few-tiles": [(512, 4096, 4096), (512, 1024, 4096), (2048, 1024, 4096), (512, 4096, 14336),
                  (512, 1024, 8192), (2048, 1024, 8192)],
    "4096": [(4096, 4096, 4096)],
    # four prefill shapes with many tiles, where the 128x256 persistent tile ran at 0.96-0.98x cuBLAS (an earlier H200 run)
    # the two 512x1024 shapes: cuBLAS runs 64x64 tiles 13 stages deep (K = 4096) and split-K 128x64 (K = 8192)
    "narrow": [(512, 1024, 4096), (512, 1024, 8192)],
    "large": [(4096, 4096, 4096), (8192, 4096, 4096), (8192, 14336, 4096), (512, 28672, 8192)],
    # the warp-specialized Gluon kernel on the many-tile shapes, and one whose M, N, K are no multiples of a tile
    "gluon": [(4096, 4096, 4096), (8192, 4096, 4096), (8192, 14336, 4096), (2048, 28672, 8192),
              (8192, 8192, 28672), (1000, 1000, 4000)],
    # prefill shapes whose 128x256 tiles leave a ragged last wave (or fewer tiles than SMs): stream-K's targets
    "streamk": [(512, 14336, 4096), (512, 28672, 8192), (512, 4096, 4096), (2048, 1024, 4096), (512, 4096, 14336),
                (512, 1024, 4096), (4096, 4096, 4096), (2048, 4096, 4096)],
    # the prefill shapes still > 1 % behind cuBLAS in an earlier H200 suite run: the Gluon kernel's tiles
    "behind": [(512, 28672, 8192), (512, 14336, 4096), (2048, 4096, 4096), (8192, 1024, 4096), (512, 1024, 4096)],
    # the ping-pong Gluon kernel (two math warpgroups on tiles of their own) on 4096^3 and the prefill shapes still
    # behind cuBLAS after an earlier H200 suite run
    "pingpong": [(4096, 4096, 4096), (8192, 4096, 4096), (2048, 4096, 4096), (8192, 1024, 4096), (512, 14336, 4096),
                 (512, 28672, 8192), (8192, 14336, 4096)],
}


def _cfg(bm, bn, bk, stages, warps, split=1, tma=1, persistent=0, group=8, flatten=0):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages, num_warps=warps,
                SPLIT_K=split, TMA=tma, PERSISTENT=persistent, FLATTEN=flatten)


CONFIGS = {
    "few-tiles": [_cfg(128, 256, 64, 4, 8, split=2), _cfg(128, 256, 64, 3, 8, split=2),
                  _cfg(128, 256, 64, 4, 8, split=4), _cfg(128, 256, 64, 4, 8, split=8),
                  _cfg(128, 128, 64, 4, 8), _cfg(128, 128, 64, 5, 4), _cfg(64, 256, 64, 4, 4),
                  _cfg(128, 64, 128, 4, 8), _cfg(128, 128, 64, 4, 8, split=2)],
    "4096": [_cfg(128, 256, 64, 4, 8, tma=2, persistent=1), _cfg(128, 256, 64, 3, 8, tma=1, persistent=0)],
    "narrow": [_cfg(64, 128, 64, 8, 4), _cfg(64, 64, 64, 8, 4), _cfg(64, 64, 64, 10, 4), _cfg(64, 64, 64, 12, 4),
               _cfg(64, 64, 64, 13, 4), _cfg(64, 64, 128, 6, 4), _cfg(128, 64, 64, 8, 4, split=2),
               _cfg(128, 64, 64, 10, 4, split=2), _cfg(64, 64, 64, 10, 4, split=2), _cfg(64, 128, 64, 10, 4)],
    # the recorded best (persistent, TMA=2, 4 stages) beside the same tile with the fused (flattened) loop, and
    # 256x128 tiles (two warpgroups of 128x128, as cuBLAS's 256x128 kernel)
    "large": [_cfg(128, 256, 64, 4, 8, tma=2, persistent=1), _cfg(128, 256, 64, 4, 8, tma=2, persistent=1, flatten=1),
              _cfg(128, 256, 64, 3, 8, tma=1, persistent=1, flatten=1),
              _cfg(256, 128, 64, 4, 8, tma=2, persistent=1), _cfg(256, 128, 64, 4, 8, tma=2, persistent=1, flatten=1),
              _cfg(256, 128, 64, 3, 8, tma=1, persistent=0), _cfg(256, 128, 64, 4, 8, tma=2, persistent=0),
              _cfg(128, 256, 64, 4, 8, tma=2, persistent=0)],
}


def _gluon(bm, bn, bk, stages, warps, epi_tma=1, group=8, loader_regs=40, sync=1, subtile=1, pingpong=0):
    return dict(template="gluon_ws", BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_stages=stages,
                num_warps=warps, EPI_TMA=epi_tma, LOADER_REGS=loader_regs, SYNC=sync, SUBTILE=subtile,
                PINGPONG=pingpong)


# an earlier H200 run tried 128x256 and 256x128 with the epilogue from registers (EPI_TMA=0,
# 4 stages: 5-12 % slower), 128x128 on 4 and 8 warps and GROUP_M=1: all slower than 128x256, 3 stages, TMA store;
# this list is the second call's: the tiled template's best two beside GROUP_M, SYNC and the loader's registers
# (recorded 2026-12-01; in git history: benchmarks/results/2026-12-01-h200-s12/call2)
CONFIGS["gluon"] = [_cfg(128, 256, 64, 4, 8, tma=2, persistent=1), _cfg(128, 256, 64, 4, 8, tma=2, persistent=0),
                    _gluon(128, 256, 64, 3, 8), _gluon(128, 256, 64, 3, 8, sync=0), _gluon(128, 256, 64, 3, 8, group=4),
                    _gluon(128, 256, 64, 3, 8, group=16), _gluon(128, 256, 64, 3, 8, loader_regs=24),
                    _gluon(128, 128, 64, 5, 4)]


def _sk(bm, bn, stages, warps, tma):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, num_stages=stages, num_warps=warps, TMA=tma, SK=1)


# the persistent tiled kernel and the Gluon kernel as they won the prefill suite, beside stream-K tiles
CONFIGS["streamk"] = [_cfg(128, 256, 64, 4, 8, tma=2, persistent=1), _gluon(128, 256, 64, 3, 8),
                      _sk(128, 256, 4, 8, 2), _sk(128, 256, 3, 8, 1), _sk(128, 128, 4, 8, 1), _sk(128, 128, 5, 4, 1),
                      _sk(64, 256, 4, 8, 2), _sk(128, 256, 3, 8, 0)]


# Gluon tiles on one warpgroup (128x128: twice the tiles of 128x256, so fuller last waves) beside the suite's winners
CONFIGS["behind"] = [_cfg(128, 256, 64, 4, 8, tma=2, persistent=1), _gluon(128, 256, 64, 3, 8),
                     _gluon(128, 128, 64, 4, 4), _gluon(128, 128, 64, 6, 4), _gluon(128, 128, 64, 5, 8),
                     _gluon(64, 256, 64, 4, 4), _gluon(64, 128, 64, 6, 4), _cfg(128, 128, 64, 6, 4)]


# the Gluon kernel's best tiles so far (128x256 on two warpgroups, 3 stages; its subtiled form, 4 stages; 128x128 on
# one warpgroup, 6 stages) beside the ping-pong kernel's tiles (num_warps=8: two warpgroups of 4)
CONFIGS["pingpong"] = [_gluon(128, 256, 64, 3, 8), _gluon(128, 256, 64, 4, 8, subtile=2), _gluon(128, 128, 64, 6, 4),
                       _gluon(128, 128, 64, 4, 8, pingpong=1), _gluon(128, 128, 64, 5, 8, pingpong=1),
                       _gluon(64, 256, 64, 3, 8, pingpong=1), _gluon(64, 256, 64, 4, 8, pingpong=1),
                       _gluon(64, 128, 64, 6, 8, pingpong=1)]


def _kernel_module(name="kernel"):
    spec = importlib.util.spec_from_file_location(f"gemm_{name}", ops_dir() / "gemm" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _profile(fn, flush, iters):
    """Kernel records of `iters` calls of fn, each after an L2 flush: {name: [records]}."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    path = pathlib.Path("/tmp/gemm-kernels-trace.json")
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    by_name: dict[str, list] = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        name = e["name"]
        if "elementwise" in name or "fill" in name.lower() or "zero_" in name.lower():
            continue  # the flush
        by_name.setdefault(name, []).append(e)
    out = []
    for name, evs in by_name.items():
        a = evs[0].get("args", {})
        out.append({"kernel": name[:160], "calls": len(evs), "median_us": statistics.median(e["dur"] for e in evs),
                    "grid": a.get("grid"), "block": a.get("block"), "registers": a.get("registers per thread"),
                    "shared_memory": a.get("shared memory"), "blocks_per_sm": a.get("blocks per SM")})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="few-tiles", choices=sorted(SHAPES))
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("gemm_kernels.py needs a CUDA GPU")
    mods = {"tiled": _kernel_module(), "gluon_ws": _kernel_module("gluon_kernel")}
    flush = torch.empty(64 * 2 ** 20, dtype=torch.float32, device="cuda")
    rows = []
    for (M, N, K) in SHAPES[args.shapes]:
        fp16_sets = ("4096", "gluon", "streamk", "pingpong")
        dtype = torch.float16 if (M, N, K) == (4096, 4096, 4096) and args.shapes in fp16_sets else torch.bfloat16
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        scratch = torch.empty(max(8 * M * N, 160 * (128 * 256 + 2)), device="cuda", dtype=torch.float32)
        ref = (a.float() @ b.float())
        entry = {"M": M, "N": N, "K": K, "dtype": str(dtype), "runs": []}
        entry["runs"].append({"what": "cublas", "kernels": _profile(lambda: torch.matmul(a, b, out=c), flush,
                                                                    args.iters)})
        for cfg in CONFIGS[args.shapes]:
            run = {"what": "ours", "config": cfg}
            try:
                kw = dict(cfg)
                mod = mods[kw.pop("template", "tiled")]
                fn = lambda: mod.launch(a, b, c, scratch=scratch, **kw)  # noqa: E731
                outs = []
                for _ in range(3):
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    outs.append(c.clone())
                run["deterministic"] = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs)
                run["max_rel_err"] = float(((c.float() - ref).abs().max() / ref.abs().max()).item())
                run["kernels"] = _profile(fn, flush, args.iters)
                run["total_median_us"] = sum(k["median_us"] for k in run["kernels"])
            except Exception as exc:  # a configuration that does not build or launch here: say so, go on
                run["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            entry["runs"].append(run)
        rows.append(entry)
        for r in entry["runs"]:
            ks = "; ".join(f"{k['kernel'][:70]} grid={k['grid']} regs={k['registers']} smem={k['shared_memory']} "
                           f"{k['median_us']:.1f}us" for k in r.get("kernels", []))
            print(f"M={M} N={N} K={K} {r['what']} {r.get('config', '')} {r.get('error', '')} "
                  f"err={r.get('max_rel_err')} det={r.get('deterministic')} {ks}", flush=True)
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    try:
        import triton
        meta["triton"] = triton.__version__
    except ImportError:
        pass
    pathlib.Path(args.out).write_text(json.dumps({"meta": meta, "shapes": rows}, indent=1))


if __name__ == "__main__":
    main()
