"""A/A subjects of a bench: `candidate-twin` (the candidate's kernel, its own output buffers) and `candidate-same`
(the candidate's kernel writing the candidate's very buffers), whatever their position in the subject list."""

import pytest

from kernelloop.bench.policy import policies_for
from kernelloop.execute.evaluate import Evaluator
from kernelloop.execute.pool import Worker
from kernelloop.records import Candidate, Workload


@pytest.mark.parametrize("subjects", [["candidate", "candidate-twin", "candidate-same"],
                                      ["candidate-same", "candidate-twin", "candidate"]])
def test_twin_and_same_are_timed_beside_the_candidate(layernorm, tmp_path, subjects):
    cand = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                     config={"BLOCK_N": 64, "ROWS": 1, "num_warps": 1, "EVICT_FIRST": 0})
    w = Workload(op="layernorm", axes={"M": 4, "N": 64}, dtype="fp32")
    policy = policies_for("interpret")[0].model_copy(update={"samples": 3, "warmup": 1})
    worker = Worker("interpret", tmp_path / "worker")
    try:
        ev = Evaluator(layernorm, "interpret", worker, policy, secret="aa")
        assert ev.load(cand) is None
        ms, notes, reply = ev.bench(cand, w, subjects, policy)
    finally:
        worker.close()
    assert reply.status == "ok", reply.data
    assert set(ms) == set(subjects) and not notes
    baselines = {r.baseline for r in ms["candidate"].ratios}
    assert {"candidate-twin", "candidate-same"} <= baselines
