"""Kernels to profile under ncu: cuBLAS and our GEMM kernels on 512x1024x4096 (bf16) and 4096^3 (fp16)."""
import importlib.util, pathlib, sys, torch
ROOT = pathlib.Path(__file__).resolve().parents[1]
def mod(name):
    s = importlib.util.spec_from_file_location(name, ROOT / "ops" / "gemm" / f"{name}.py")
    m = importlib.util.module_from_spec(s); s.loader.exec_module(m); return m
tiled, gl = mod("kernel"), mod("gluon_kernel")
def cfg(bm, bn, bk, st, w, **kw):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_stages=st, num_warps=w, **kw)
CASES = [
    ((512, 1024, 4096), torch.bfloat16, [("cublas", None, None), ("tiled64x64k128s6", tiled, cfg(64, 64, 128, 6, 4, TMA=1, PERSISTENT=0)),
                                         ("gluon64x128s6", gl, cfg(64, 128, 64, 6, 4))]),
    ((4096, 4096, 4096), torch.float16, [("cublas", None, None), ("gluon128x256s3", gl, cfg(128, 256, 64, 3, 8)),
                                         ("gluon128x128s6", gl, cfg(128, 128, 64, 6, 4)),
                                         ("pingpong128x128s5", gl, cfg(128, 128, 64, 5, 8, PINGPONG=1))]),
]
for (M, N, K), dt, variants in CASES:
    a = torch.randn(M, K, device="cuda", dtype=dt); b = torch.randn(K, N, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    for name, m, kw in variants:
        for _ in range(2):
            torch.cuda.nvtx.range_push(f"{M}x{N}x{K}:{name}")
            if m is None:
                torch.matmul(a, b, out=c)
            else:
                m.launch(a, b, c, scratch=None, **kw)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        print(name, "ok", flush=True)
