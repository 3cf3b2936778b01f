"""The third gallery, semantics part (tests/fixtures/cheats3/semantics): kernels an adversary who read the verifier
would write against its tolerances, its buffers and its held-out shapes, each judged through the real controller
(an isolated worker, the battery, the controller's own copies of the outputs):

- outputs scaled by 1.0099 (fp16), 1.0199 (bf16), 1.000099 (fp32): inside the per-element box, caught by the bias
  check on every interpreter workload of layernorm, rmsnorm and softmax;
- a LayerNorm that skips the mean subtraction in its variance, a softmax without the max subtraction: caught on
  every trial by the statistics-aware draws every trial of those ops makes (`offset`, `large`);
- one element written past the end of the output, one before its start: caught by the guard zones;
- a kernel correct only up to the visible row width's power-of-two bucket: caught by the held-out shape beyond it,
  through `kernelloop agent init` + `kernelloop submit`;

and every built-in op's honest templates still pass the new checks on several seeds (honest_semantics.py).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.base.builtin import ops_dir
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.spec.loader import load_workloads

HERE = Path(__file__).resolve().parent
CHEATS = HERE.parents[1] / "fixtures" / "cheats3" / "semantics"
ROOT = HERE.parents[2]
SCALED = {"layernorm": "scaled_layernorm.py", "rmsnorm": "scaled_rmsnorm.py", "softmax": "scaled_softmax.py"}


def source(name: str) -> str:
    return (CHEATS / name).read_text()


def test_every_fixture_names_its_attack():
    for p in CHEATS.glob("*.py"):
        doc = ast.get_docstring(ast.parse(p.read_text()))
        assert doc and doc.startswith("Attack: "), p.name


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker("interpret", tmp_path_factory.mktemp("gallery3-semantics"))
    yield w
    w.close()


def judge(worker, op: str, name: str, workload: Workload, secret: str = "gallery-3"):
    bundle = load_op(ops_dir() / op)
    ev = Evaluator(bundle, "interpret", worker, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}),
                   secret=secret, checks=2, timeouts=Timeouts(check=300.0, bench=300.0))
    cand = Candidate(op=op, template="custom", source=source(name), config={})
    return ev.evaluate(cand, workload, worker.work_dir / f"job-{op}-{secret}").verdict


@pytest.mark.parametrize("op", sorted(SCALED))
def test_a_scaled_output_is_rejected_on_every_interpreter_workload(worker, op):
    folder = ops_dir() / op
    workloads = load_workloads(folder / "workloads-interpret.toml", load_op(folder).spec)
    verdicts = [judge(worker, op, SCALED[op], w) for w in workloads]
    for w, v in zip(workloads, verdicts):
        assert v.status is Status.WRONG_VALUES, (w.label, v)
    bias = [v.message for v in verdicts if ": bias: mean relative error" in v.message]
    # inside the per-element box, the bias check is what catches it (fp16 softmax rounds a few elements past rtol)
    assert len(bias) >= (2 if op == "softmax" else len(workloads)), [v.message for v in verdicts]
    assert all("over bound" in m for m in bias)


@pytest.mark.parametrize("op,name,words", [
    ("layernorm", "layernorm_skips_mean.py", "y: "),
    ("softmax", "softmax_no_max.py", "y: "),
])
def test_a_skipped_statistic_fails_on_every_seed(worker, op, name, words):
    w = Workload(op=op, axes={"M": 8, "N": 256}, dtype="fp16")
    for k in range(3):
        v = judge(worker, op, name, w, secret=f"seed-{k}")
        assert v.status in (Status.WRONG_VALUES, Status.WRONG_NONFINITE), (k, v)
        assert v.message.startswith(words), v.message


@pytest.mark.parametrize("name,words", [
    ("writes_one_past.py", "y (call 1): memory-safety: written after the buffer's end (first changed byte at end+0"),
    ("writes_one_before.py", "y (call 1): memory-safety: written before the buffer's start (nearest changed byte "
                             "at start-1"),
])
def test_one_element_outside_the_output_is_caught(worker, name, words):
    v = judge(worker, "layernorm", name, Workload(op="layernorm", axes={"M": 8, "N": 200}, dtype="fp16"))
    assert v.status is Status.REJECTED, v
    assert v.message.startswith(words), v.message


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "kernelloop.cli.app", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=900)


def test_a_kernel_correct_only_up_to_the_visible_bucket_fails_through_the_agent_path(tmp_path):
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 3000 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    r = _cli("agent", "init", "layernorm", "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
             "--device", "interpret", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    honest = tmp_path / "honest.py"
    honest.write_text(source("correct_to_visible_n.py").replace("BLOCK=4096", "BLOCK=triton.next_power_of_2(N)"))
    answers = {}
    for name, path in (("cheat", CHEATS / "correct_to_visible_n.py"), ("honest", honest)):
        r = _cli("submit", str(path), "--workspace", str(ws), "--agent", "gallery3", "--no-profile", cwd=tmp_path)
        answers[name] = json.loads(r.stdout)
    (cheat,) = answers["cheat"]["results"]
    assert answers["cheat"]["verdict"] == "WRONG_INCOMPLETE", answers["cheat"]
    assert ": a held-out larger" in cheat["failing_case"] and "larger N" in cheat["failing_case"], cheat
    assert answers["honest"]["verdict"] == "PASSED", answers["honest"]


OPS = sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())
SEEDS = 2


@pytest.fixture(scope="module")
def honest_rows() -> tuple[subprocess.CompletedProcess, dict[str, list[dict]]]:
    """honest_semantics.py over every op (SEEDS seeds) in one fresh interpreter: its process and its rows by op."""
    r = subprocess.run([sys.executable, str(HERE / "honest_semantics.py"), ",".join(OPS), str(SEEDS)], cwd=ROOT,
                       text=True, capture_output=True, timeout=1800,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "TRITON_INTERPRET": "1"})
    by_op: dict[str, list[dict]] = {op: [] for op in OPS}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            by_op[row["op"]].append(row)
    return r, by_op


@pytest.mark.parametrize("op", OPS)
def test_the_honest_templates_of_every_op_pass_the_new_checks_on_several_seeds(honest_rows, op):
    r, by_op = honest_rows
    rows = by_op[op]
    assert rows, r.stderr[-3000:]
    assert {x["seed"] for x in rows} == set(range(SEEDS)), rows
    failed = [x for x in rows if x["status"] != "PASSED"]
    assert not failed, failed[:5]
    # honest rounding stays well inside both bounds
    assert max(x["bias_ratio"] for x in rows) < 0.6 and max(x["ulp_ratio"] for x in rows) < 0.6
    assert r.returncode == 0, r.stderr[-3000:]
