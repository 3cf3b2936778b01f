"""Back-to-back 4096^3 fp16 GEMMs (cuBLAS, then the Gluon kernels) for ~4 s each while nvidia-smi samples power,
SM clock and clock-event (throttle) reasons every 100 ms. Prints one JSON line per variant."""
import importlib.util, json, pathlib, subprocess, time, torch
ROOT = pathlib.Path(__file__).resolve().parents[1]
s = importlib.util.spec_from_file_location("gk", ROOT / "ops" / "gemm" / "gluon_kernel.py")
gk = importlib.util.module_from_spec(s); s.loader.exec_module(gk)
a, b = (torch.randn(4096, 4096, device="cuda", dtype=torch.float16) for _ in range(2))
c = torch.empty(4096, 4096, device="cuda", dtype=torch.float16)
cfg = lambda bm, bn, st, w, **kw: dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, num_stages=st, num_warps=w, **kw)
V = {"cublas": lambda: torch.matmul(a, b, out=c),
     "gluon128x256s3": lambda: gk.launch(a, b, c, **cfg(128, 256, 3, 8)),
     "gluon128x128s6": lambda: gk.launch(a, b, c, **cfg(128, 128, 6, 4)),
     "pingpong128x128s5": lambda: gk.launch(a, b, c, **cfg(128, 128, 5, 8, PINGPONG=1))}
Q = "power.draw,power.limit,clocks.sm,clocks_event_reasons.active,temperature.gpu"
if subprocess.run(["nvidia-smi", f"--query-gpu={Q}", "--format=csv,noheader"], capture_output=True).returncode:
    Q = Q.replace("clocks_event_reasons", "clocks_throttle_reasons")
print("query:", Q, flush=True)
for name, fn in V.items():
    for _ in range(3): fn()
    torch.cuda.synchronize()
    time.sleep(1.0)
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={Q}", "--format=csv,noheader,nounits", "-lms", "100"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 0; t0 = time.time(); e0.record()
    while time.time() - t0 < 4.0:
        for _ in range(50): fn()
        n += 50
        torch.cuda.synchronize()
    e1.record(); torch.cuda.synchronize()
    smi.terminate(); out = smi.communicate()[0]
    rows = [r.split(", ") for r in out.strip().splitlines() if r.count(",") >= 4]
    steady = rows[len(rows) // 4:]  # the last three quarters
    num = lambda i: [float(r[i]) for r in steady if r[i].replace(".", "", 1).isdigit()]
    us = e0.elapsed_time(e1) * 1000 / n
    print(json.dumps({"variant": name, "calls": n, "us_per_call_back_to_back": round(us, 1),
                      "tflops": round(2 * 4096 ** 3 / us / 1e6, 1), "samples": len(steady),
                      "power_w_mean": round(sum(num(0)) / max(1, len(num(0))), 1), "power_limit_w": steady[0][1] if steady else None,
                      "sm_clock_mhz_mean": round(sum(num(2)) / max(1, len(num(2))), 1),
                      "event_reasons": sorted({r[3] for r in steady}), "temp_c_max": max(num(4) or [0])}), flush=True)
