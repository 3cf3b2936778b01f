"""The ML engineer's path, exactly as docs/walkthrough.md gives it, on the tiny Llama in interpreter mode:
capture -> optimize the cards -> export (ranges verified) -> apply -> e2e, and the dispatch counts read back by
optimize. Each step's result is asserted."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter walkthrough")]


def _start(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    # output to files, not pipes: a process started beside others never blocks on a full pipe nobody reads yet
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, text=True)
    proc.outputs = (out, err)
    return proc


def _what(proc: subprocess.Popen) -> str:
    return "kernelloop " + " ".join(proc.args[3:]) if proc.args[1:3] == ["-m", "kernelloop.cli.app"] else "the script"


def finish(*procs: subprocess.Popen, timeout: int = 900) -> list[subprocess.CompletedProcess]:
    """Waits for every process (started side by side), then checks each exited 0: none is left running."""
    try:
        for proc in procs:
            proc.wait(timeout=timeout)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    done = []
    for proc in procs:
        texts = []
        for f in proc.outputs:
            f.seek(0)
            texts.append(f.read())
            f.close()
        p = subprocess.CompletedProcess(proc.args, proc.returncode, *texts)
        assert p.returncode == 0, f"{_what(proc)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        done.append(p)
    return done


def kl_start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return _start([sys.executable, "-m", "kernelloop.cli.app", *args], cwd, env)


def kl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    (p,) = finish(kl_start(*args, cwd=cwd))
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
    # 2. optimize each card's op: the three runs are independent (own cards, own run folders), so they run side by
    # side rather than one after the other as the doc's loop does; each is then read back with `show`
    ops = ("rmsnorm", "gemm_nt", "attention_causal")
    finish(*[kl_start("optimize", op, "--workloads", f"cards/{op}.toml", "--budget", "2", "--out", f"runs/{op}",
                      cwd=tmp_path) for op in ops])
    # 3. export, the token count extended to 1..64 and verified; it only reads the runs, as `show` does: the reads
    # run beside it
    *shown, _ = finish(*[kl_start("show", f"runs/{op}", "--json", cwd=tmp_path) for op in ops],
                       kl_start("export", "runs/rmsnorm", "runs/gemm_nt", "runs/attention_causal", "--out", "llama-pkg",
                                "--extend", "M=1:64", cwd=tmp_path))
    for op, p in zip(ops, shown):
        summary = json.loads(p.stdout)
        assert all("best" in w for w in summary["workloads"]), op
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
    # apply and e2e only read the package (e2e writes counts.json, which apply does not touch): side by side
    applied = _start([sys.executable, "-c", script], tmp_path, {**os.environ, "TRITON_INTERPRET": "1"})
    e2e = kl_start("e2e", "llama-tiny", "llama-pkg", "--batch", "3", "--seq", "7", "--counts", "counts.json", "--json",
                   cwd=tmp_path)
    p, r = finish(applied, e2e)
    (replaced, left), (diff, restored), (hits, fallbacks) = [line.split() for line in p.stdout.split("\n")[:3]]
    assert int(replaced) == 21 and int(left) == 1   # every norm, linear and the attention; softmax is not packaged
    assert float(diff) < 0.05 and restored == "True"
    assert int(hits) == 15 and int(fallbacks) == 0   # 7 linears x 2 layers + lm_head, all inside the range
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
