"""Shared by the pipeline and executor tests: an op whose one template's MODE picks an honest kernel, a wrong one or one that
raises, and a function that runs the controller on it with a fixed run key and salt (the same seeds every time)."""

import shutil
from pathlib import Path

import pytest

from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Workload
from kernelloop.core.spec import load_op

HONEST = Path(__file__).resolve().parents[1] / "fixtures" / "candidates" / "honest_layernorm.py"
# the honest kernel, launched as MODE says: as it is, with a wrong epsilon, or not at all (an exception)
TEMPLATE = HONEST.read_text().split("def launch(")[0] + '''def launch(x, weight, bias, y, *, eps, MODE, num_warps):
    if MODE == "raise":
        raise RuntimeError("planned failure")
    M, N = x.shape
    _ln[(M,)](x, weight, bias, y, N, eps if MODE == "ok" else 1e3, BLOCK=triton.next_power_of_2(N),
              num_warps=num_warps)
'''

W = Workload(op="layernorm", axes={"M": 3, "N": 40}, dtype="fp32")
KEY = "k" * 40


@pytest.fixture(scope="session")
def modes_op(tmp_path_factory):
    op = tmp_path_factory.mktemp("ops") / "layernorm"
    shutil.copytree(ops_dir() / "layernorm", op)
    (op / "kernel.py").write_text(TEMPLATE)
    spec = (op / "spec.toml").read_text()
    (op / "spec.toml").write_text(spec[:spec.index("[[templates]]")] + '''
[[templates]]
name = "modes"
file = "kernel.py"
[[templates.params]]
name = "MODE"
values = ["ok", "raise", "wrong"]
[[templates.params]]
name = "num_warps"
values = [1]
''')
    return load_op(op)


@pytest.fixture(scope="session")
def single(modes_op, tmp_path_factory):
    """The archive of one local worker: what every executor must reproduce."""
    mp = pytest.MonkeyPatch()
    try:
        return run_archive(modes_op, tmp_path_factory.mktemp("single") / "run", mp)
    finally:
        mp.undo()


def run_archive(bundle, run_dir: Path, monkeypatch, on_progress=None, **options) -> list[tuple]:
    """Run the controller with a fixed key and salt; the archive's trials as (index, candidate, workload, status,
    message, case, device) in index order."""
    monkeypatch.setenv("KERNELLOOP_KEY", KEY)
    monkeypatch.setattr("kernelloop.core.sandbox.keys.secrets.token_hex", lambda n: "5" * (2 * n))
    opts = RunOptions(**{"device": "interpret", "budget": Budget(evals=3), "strategy": "exhaustive", "checks": 1,
                         "confirm": False, "static_rules": False, "in_flight": 2,
                         "timeouts": Timeouts(check=120.0, bench=120.0), **options})
    Controller(bundle, [W], opts, run_dir, on_progress).run()
    with Archive(run_dir / "archive.sqlite") as a:
        trials = a.trials(a.runs()[0]["id"])
        return [(t.index, t.candidate_id, t.workload_id, t.verdict.status.value, t.verdict.message, t.verdict.case,
                 t.device) for t in sorted(trials, key=lambda t: t.index)]
