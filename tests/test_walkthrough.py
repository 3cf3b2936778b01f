"""The ML engineer's path, exactly as docs/walkthrough.md gives it, on the tiny Llama in interpreter mode:
capture -> optimize the cards -> export (ranges verified) -> apply -> e2e, and the dispatch counts read back by
optimize. Each step's result is asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter walkthrough")]


def kl(*args: str, cwd: Path, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    p = subprocess.run([sys.executable, "-m", "kernelloop.cli.app", *args], cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode in ok, f"kernelloop {' '.join(args)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def test_capture_optimize_export_apply_e2e(tmp_path):
    # a fresh folder outside the clone: the ops are the built-in ones, found by name
    # 1. capture
    kl("capture", "llama-tiny", "--out", "cards/cards.json", "--workloads-dir", "cards", cwd=tmp_path)
    cards = json.loads((tmp_path / "cards/cards.json").read_text())
    mapped = {c["op"] for c in cards["cards"] if c["op"]}
    assert mapped == {"rmsnorm", "gemm_nt", "attention_causal"}
    assert sorted(p.name for p in (tmp_path / "cards").glob("*.toml")) == [
        "attention_causal.toml", "gemm_nt.toml", "rmsnorm.toml"]
    # 2. optimize each card's op
    for op in ("rmsnorm", "gemm_nt", "attention_causal"):
        kl("optimize", op, "--workloads", f"cards/{op}.toml", "--budget", "2", "--out", f"runs/{op}", cwd=tmp_path)
        summary = json.loads(kl("show", f"runs/{op}", "--json", cwd=tmp_path).stdout)
        assert all("best" in w for w in summary["workloads"]), op
    # 3. export, the token count extended to 1..64 and verified
    kl("export", "runs/rmsnorm", "runs/gemm_nt", "runs/attention_causal", "--out", "llama-pkg", "--extend", "M=1:64",
       cwd=tmp_path)
    table = json.loads((tmp_path / "llama-pkg/ops/gemm_nt/dispatch.json").read_text())
    assert table["entries"] and all(e["guard"]["axes"]["M"] == {"lo": 1, "hi": 64} for e in table["entries"])
    # 4. apply (the Python API), 5. e2e at another batch and sequence length than captured (M = 21)
    script = (
        "import kernelloop, torch\n"
        "model, (ids,) = kernelloop.capture.models.build('llama-tiny', batch=3, seq=7)\n"
        "pkg = kernelloop.load_package('llama-pkg')\n"
        "with torch.no_grad():\n"
        "    ref = model(ids).logits\n"
        "    with kernelloop.apply(model, pkg) as patched:\n"
        "        out = model(ids).logits\n"
        "        print(len(patched.report.replaced), len(patched.report.left))\n"
        "    back = model(ids).logits\n"
        "print(float((out.float() - ref.float()).abs().max()), bool(torch.equal(back, ref)))\n"
        "print(pkg['gemm_nt'].hits.total(), sum(pkg['gemm_nt'].fallbacks.values()))\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (replaced, left), (diff, restored), (hits, fallbacks) = [line.split() for line in p.stdout.split("\n")[:3]]
    assert int(replaced) == 21 and int(left) == 1   # every norm, linear and the attention; softmax is not packaged
    assert float(diff) < 0.05 and restored == "True"
    assert int(hits) == 15 and int(fallbacks) == 0   # 7 linears x 2 layers + lm_head, all inside the range
    r = kl("e2e", "llama-tiny", "llama-pkg", "--batch", "3", "--seq", "7", "--counts", "counts.json", "--json",
           cwd=tmp_path)
    report = json.loads(r.stdout)
    assert report["outputs_ok"] and all(c["cosine"] > 0.999 for c in report["checks"])
    assert report["delivered"] is None and "not measured" in report["speed_note"]
    assert report["sites"]["replaced"] == 21
    assert report["counts"]["ops"]["rmsnorm"]["entries"] == {"e0": 15}
    # attention was measured at batch 2 x 8 only: an exact guard, so batch 3 x 7 runs the reference
    assert report["counts"]["ops"]["attention_causal"]["fallbacks"] == {"no entry covers the shape": 6}
    # the loop closes: what the model ran becomes the next run's workloads
    kl("optimize", "attention_causal", "--workloads", "counts.json", "--budget", "1", "--out", "runs/again",
       cwd=tmp_path)
    again = json.loads(kl("show", "runs/again", "--json", cwd=tmp_path).stdout)
    assert [w["label"] for w in again["workloads"]] and all("best" in w for w in again["workloads"])
