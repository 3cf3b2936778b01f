"""The cheat gallery through the pipeline on each executor: the build stage's static rules, then two devices'
workers (local processes, or Ray actors on a local cluster), every cheat with the status the gallery expects."""

import tomllib
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.core.execute.executor import EvalContext
from kernelloop.core.execute.ray_executor import ray_available
from kernelloop.tune.loop import RunOptions
from kernelloop.tune.loop.pipeline import Pipeline
from kernelloop.base.records import Candidate, Status, Workload

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats"
MANIFEST = tomllib.loads((CHEATS / "expected.toml").read_text())
DYNAMIC = [n for n, e in MANIFEST.items() if e["status"] != "REJECTED" and not e["cuda"]]
QUICK = [n for n in DYNAMIC if MANIFEST[n].get("requires") is None]   # caught on the workload's own cases
STATIC = ["background_thread.py", "library_functional.py"]


def run_gallery(layernorm, tmp_path, names: list[str], executor: str) -> dict[str, Status]:
    context = EvalContext(layernorm, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}), "gallery-executors",
                          checks=2, timeouts=Timeouts(check=60.0, bench=60.0))
    opts = RunOptions(device="interpret", devices=["interpret:0", "interpret:1"], executor=executor)
    with Pipeline(context, opts, tmp_path) as pipeline:
        futures = {}
        for name in names:
            e = MANIFEST[name]
            w = Workload(op="layernorm", axes=e.get("axes", {"M": 8, "N": 256}), dtype=e.get("dtype", "fp32"))
            futures[name] = pipeline.submit(Candidate(op="layernorm", template="custom", config={},
                                                      source=(CHEATS / name).read_text(), proposer="gallery"), w)
        return {name: f.result(timeout=600) for name, f in futures.items()}


@pytest.mark.parametrize("executor", ["local", pytest.param("ray", marks=pytest.mark.skipif(
    ray_available() is not None, reason=str(ray_available())))])
def test_every_cheat_gets_its_status_on_the_executor(layernorm, tmp_path, executor):
    names = (DYNAMIC if executor == "local" else QUICK) + STATIC
    done = run_gallery(layernorm, tmp_path, names, executor)
    for name, d in done.items():
        assert d.evaluation.verdict.status is Status(MANIFEST[name]["status"]), (name, d.evaluation.verdict)
        assert d.evaluation.measurement is None
    assert {done[n].device for n in STATIC} == {""}                  # refused by the build stage, no device
    assert len({done[n].device for n in names if n not in STATIC}) == 2   # both devices' workers judged cheats
