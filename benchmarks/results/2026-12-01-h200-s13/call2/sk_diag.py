"""Stream-K diagnosis: the SK kernel's structure vs its fix-ups (kernel records, L2 flushed)."""
import importlib.util, json, sys, pathlib, statistics, torch, triton
sys.path.insert(0, "benchmarks")
import gemm_kernels as gk
ROOT = pathlib.Path(".")
s = importlib.util.spec_from_file_location("k", "ops/gemm/kernel.py"); K = importlib.util.module_from_spec(s); s.loader.exec_module(K)
from triton.tools.tensor_descriptor import TensorDescriptor
flush = torch.empty(64 * 2 ** 20, dtype=torch.float32, device="cuda")
out = []
def sk_call(a, b, c, ws, BM, BN, stages, warps, P, sk_tiles):
    M, Kd = a.shape; N = b.shape[1]
    tile = BM * BN
    slots = ws.numel() // (tile + 2)
    work = ws[:P * tile]; flags = ws[slots * tile: slots * tile + 2 * P].view(torch.int64)
    ad = TensorDescriptor.from_tensor(a, [BM, 64]); bd = TensorDescriptor.from_tensor(b, [64, BN])
    cd = TensorDescriptor.from_tensor(c, [BM, BN // 2])
    def fn():
        tok = (torch.Generator().seed() % 2 ** 60 | 1) + 2 ** 40
        K._gemm_sk_kernel[(P,)](ad, bd, c, cd, work, flags, tok, M, N, Kd, P, sk_tiles, a.stride(0), 1, b.stride(0), 1,
            c.stride(0), 1, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=64, GROUP_M=8, EVEN_K=True, TMA=2, TRANS_B=0,
            HAS_BIAS=False, ACT=0, INTERPRETER=False, num_warps=warps, num_stages=stages)
    return fn
for (M, N, Kd) in [(4224, 2048, 4096), (4096, 4096, 4096), (512, 14336, 4096)]:
    a = torch.randn(M, Kd, device="cuda", dtype=torch.bfloat16); b = torch.randn(Kd, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16); ws = torch.empty(160 * (128 * 256 + 2), device="cuda")
    ref = a.float() @ b.float()
    T = triton.cdiv(M, 128) * triton.cdiv(N, 256)
    cases = {"cublas": lambda: torch.matmul(a, b, out=c),
             "tiledP 128x256 s4": lambda: K.launch(a, b, c, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, PERSISTENT=1, TMA=2)}
    for name, P, skt in [("sk DP-only", 132, 0), ("sk all, P=132", 132, T), ("sk all, P=131", 131, T),
                         ("sk tail only", 132, T % 132), ("sk tail+wave", 132, T % 132 + 132 if T > 132 else T)]:
        cases[name + f" (sk_tiles={skt})"] = sk_call(a, b, c, ws, 128, 256, 4, 8, P, skt)
    for name, fn in cases.items():
        c.fill_(float("nan")); fn(); torch.cuda.synchronize()
        err = float(((c.float() - ref).abs().max() / ref.abs().max()).item())
        ks = gk._profile(fn, flush, 20)
        t = sum(k["median_us"] for k in ks)
        print(f"{M}x{N}x{Kd} T={T} {name:36} {t:8.1f} us err={err:.2e} regs={[k['registers'] for k in ks]}", flush=True)
        out.append(dict(shape=[M, N, Kd], case=name, us=t, err=err))
pathlib.Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
