"""A/A subjects of a bench: `candidate-twin` (the candidate's kernel, its own output buffers) and `candidate-same`
(the candidate's kernel writing the candidate's very buffers), whatever their position in the subject list."""

from types import SimpleNamespace

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.core.bench.policy import policies_for
from kernelloop.core.execute import worker
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Workload


@pytest.mark.parametrize("sets", [1, 3])
@pytest.mark.parametrize("subjects", [["candidate", "candidate-twin", "candidate-same"],
                                      ["candidate-same", "candidate-twin", "candidate"]])
def test_twin_and_same_are_timed_beside_the_candidate(layernorm, tmp_path, subjects, sets):
    cand = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                     config={"BLOCK_N": 64, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0})
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")
    policy = policies_for("interpret")[0].model_copy(update={"samples": 3, "warmup": 1, "output_sets": sets})
    worker = Worker("interpret", tmp_path / "worker")
    try:
        ev = Evaluator(layernorm, "interpret", worker, policy, secret="aa")
        assert ev.load(cand) is None
        ms, notes, reply = ev.bench(cand, w, subjects, policy)
    finally:
        worker.close()
    assert reply.status == "ok", (reply.error, reply.log_tail)
    assert set(ms) == set(subjects) and not notes
    baselines = {r.baseline for r in ms["candidate"].ratios}
    assert {"candidate-twin", "candidate-same"} <= baselines
    # The timed calls' outputs were snapshotted from the buffers each call wrote, and re-verify.
    assert ev.check_timed(w, reply, ev.refresh_seeds(cand, w)) is None


class _Recorder:
    def __init__(self):
        self.calls = []

    def launch(self, *args, **kw):
        self.calls.append(args[-1])  # the output set written
        self.scratch = getattr(self, "scratch", []) + [kw.get("scratch")]


def test_rotating_outputs_spread_every_subject_over_every_set():
    pool = [("set0",), ("set1",), ("set2",)]
    live = {"pool": pool}
    mods = {name: _Recorder() for name in ("candidate", "candidate-twin")}
    no_workspace = SimpleNamespace(scratch=None)
    calls = {name: worker._rotating_call(mods[name], {}, ["x"], {}, live, no_workspace, None, "cpu", 3, start=i,
                                         is_candidate=name == "candidate")
             for i, name in enumerate(mods)}
    assert live["outputs"] == pool[0]
    for _ in range(6):  # kernel and call sample of three rounds: both parities of a set index come up
        for name in ("candidate-twin", "candidate"):
            calls[name]()
            if name == "candidate":
                assert live["outputs"] == (mods["candidate"].calls[-1],)  # the snapshot reads what was written
    for name, mod in mods.items():
        assert sorted(mod.calls) == ["set0"] * 2 + ["set1"] * 2 + ["set2"] * 2, name
        kernel_samples = mod.calls[0::2]  # every other call is a kernel-time sample
        assert len(set(kernel_samples)) == 3, (name, kernel_samples)
    assert mods["candidate"].calls[:3] == ["set0", "set1", "set2"]
    assert mods["candidate-twin"].calls[:3] == ["set1", "set2", "set0"]


def test_workspaces_rotate_with_the_output_sets(with_workspace):
    """Each output set has its own workspace, handed to whichever subject writes that set: where the kernel's
    partial results land in memory is spread over the samples as its outputs are, and every workspace is listed
    for the poisoning before each call."""
    spec, w = with_workspace
    live = {}
    mods = {name: _Recorder() for name in ("candidate", "candidate-twin")}
    calls = {name: worker._rotating_call(mods[name], {}, ["x"], {}, live, spec, w, "cpu", 3, start=i,
                                         is_candidate=name == "candidate")
             for i, name in enumerate(mods)}
    for _ in range(6):
        for name in ("candidate-twin", "candidate"):
            calls[name]()
    assert len(live["scratch"]) == 3 and all(t.numel() == 2 * 4 * 8 for t in live["scratch"])
    for mod in mods.values():
        for out, ws in zip(mod.calls, mod.scratch):
            k = next(i for i, p in enumerate(live["pool"]) if p[-1] is out)
            assert ws is live["scratch"][k]


@pytest.fixture
def with_workspace(tmp_path):
    import shutil
    from pathlib import Path

    from kernelloop.core.spec import load_op
    folder = tmp_path / "layernorm"
    shutil.copytree(ops_dir() / "layernorm", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "spec.toml").write_text((folder / "spec.toml").read_text()
                                      + '\n[scratch]\nname = "rows"\nnumel = "2 * M * N"\n')
    return load_op(folder).spec, Workload(op="layernorm", axes={"M": 4, "N": 8}, dtype="fp32")

