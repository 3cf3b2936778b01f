"""The run key (kernelloop.core.sandbox.keys): kept outside what a proposer reads, checked on resume, never given to a
worker process."""

import os
import shutil
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.sandbox import keys
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.core.archive import Archive
from kernelloop.base.records import Candidate, Status, Workload

OPS = ops_dir()
W = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp16")


@pytest.fixture
def key_dir(tmp_path, monkeypatch):
    d = tmp_path / "config" / "keys"
    monkeypatch.setenv(keys.KEY_DIR_ENV, str(d))
    monkeypatch.delenv(keys.KEY_ENV, raising=False)
    return d


def test_commitment_checks_a_key_without_revealing_it():
    c = keys.commitment("k" * 40, "salt")
    assert c.startswith("sha256:") and "k" * 40 not in c
    assert c != keys.commitment("k" * 40, "other salt") != keys.commitment("j" * 40, "salt")
    assert keys.run_secret("k" * 40, "a") != keys.run_secret("k" * 40, "b")


def test_key_file_is_private_and_refused_inside_the_run_folder_or_workspace(key_dir, tmp_path, monkeypatch):
    run = tmp_path / "run"
    path = keys.save_key("r-1", "a" * 64, run)
    assert path.parent == key_dir and path.stat().st_mode & 0o077 == 0 and key_dir.stat().st_mode & 0o077 == 0
    assert keys.load_key("r-1", "s", keys.commitment("a" * 64, "s"), run) == "a" * 64
    with pytest.raises(keys.RunKeyError, match="not this run's key"):
        keys.load_key("r-1", "s", keys.commitment("b" * 64, "s"), run)
    with pytest.raises(keys.RunKeyError, match="its key is missing"):
        keys.load_key("r-2", "s", "sha256:00", run)
    monkeypatch.setenv(keys.KEY_DIR_ENV, str(run / "keys"))
    with pytest.raises(keys.RunKeyError, match="a proposer can read"):
        keys.new_key(run)
    ws = tmp_path / "ws"
    (ws / ".kernelloop" / "run-interpret").mkdir(parents=True)
    (ws / keys.WORKSPACE_MARKER).write_text("{}")
    monkeypatch.setenv(keys.KEY_DIR_ENV, str(ws / "keys"))
    with pytest.raises(keys.RunKeyError, match="a proposer can read"):
        keys.save_key("r-3", "a" * 64, ws / ".kernelloop" / "run-interpret")
    monkeypatch.setenv(keys.KEY_ENV, "short")
    with pytest.raises(keys.RunKeyError, match="at least 32"):
        keys.new_key(tmp_path / "other")


def test_a_run_resumes_with_its_key_and_refuses_without_it(key_dir, tmp_path, monkeypatch):
    layernorm = __import__("kernelloop.core.spec", fromlist=["load_op"]).load_op(OPS / "layernorm")
    opts = RunOptions(device="interpret", budget=Budget(evals=1), strategy="random", checks=1, confirm=False,
                      timeouts=Timeouts(check=60.0, bench=60.0))
    run_dir = tmp_path / "run"
    run_id = Controller(layernorm, [W], opts, run_dir).run().run_id
    with Archive(run_dir / "archive.sqlite") as a:
        options = a.get_run(run_id)["options"]
    assert "secret" not in options and (key_dir / run_id).is_file()
    Controller(layernorm, [W], opts.model_copy(update={"budget": Budget(evals=2)}), run_dir).run(resume=True)
    moved = tmp_path / "moved"
    shutil.move(str(key_dir), moved)
    with pytest.raises(keys.RunKeyError, match="its key is missing"):
        Controller(layernorm, [W], opts, run_dir).run(resume=True)
    monkeypatch.setenv(keys.KEY_DIR_ENV, str(moved))
    Controller(layernorm, [W], opts, run_dir).run(resume=True)


LEAK = '''
import os


def launch(x, weight, bias, y, *, eps, **config):
    with open("/proc/self/environ", "rb") as f:
        env = f.read()
    raise RuntimeError(f"env={os.environ.get('KERNELLOOP_KEY')!r} proc={b'KERNELLOOP_KEY=' in env}")
'''


def test_the_worker_never_inherits_the_key(layernorm, tmp_path, monkeypatch):
    monkeypatch.setenv(keys.KEY_ENV, "f" * 64)
    worker = Worker("interpret", tmp_path / "w")
    try:
        ev = Evaluator(layernorm, "interpret", worker, INTERPRETER_WALLCLOCK, secret="keys", checks=1,
                       timeouts=Timeouts(check=60.0), static_rules=False)
        v = ev.evaluate(Candidate(op="layernorm", template="custom", source=LEAK), W, tmp_path / "j").verdict
    finally:
        worker.close()
    assert v.status is Status.RUNTIME_ERROR and "env=None proc=False" in v.message, v
    assert os.environ[keys.KEY_ENV] == "f" * 64, "the controller keeps it"
