import importlib.util, sys, torch, triton
s = importlib.util.spec_from_file_location("gk", "ops/gemm/gluon_kernel.py"); m = importlib.util.module_from_spec(s); s.loader.exec_module(m)
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); c = torch.empty_like(a)
for sync in (0, 1):
    m.launch(a, b, c, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, SYNC=sync)
    torch.cuda.synchronize()
    print("sync", sync, "max err", ((c.float() - a.float() @ b.float()).abs().max()).item())
cache = m._gemm_ws_kernel.device_caches
for dev, entry in cache.items():
    kc = entry[0]
    for i, k in enumerate(kc.values()):
        open(f"{sys.argv[1]}/k{i}.ptx", "w").write(k.asm["ptx"])
        print(i, k.metadata.shared)
