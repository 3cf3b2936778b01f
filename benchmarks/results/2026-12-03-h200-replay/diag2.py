import json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))
extra = [p for p in sys.argv[1:] if p != "-"]
res = {"extra_writable": extra}
try:
    from kernelloop.execute.confine import readonly_view
    res["keep"] = readonly_view([os.environ["DIAG_JOB"], *extra], drop=False)
    import torch
    res["count"] = torch.cuda.device_count()
    x = torch.randn(64, 64, device="cuda")
    res["sum"] = float((x @ x).sum())
    res["ok"] = True
except Exception as e:
    res["error"] = f"{type(e).__name__}: {e}"[:160]
print(json.dumps(res), flush=True)
