"""The differential proof on a GPU with the real executor (Triton's IR override, a process per edit): a rule-based
edit is proved bit for bit and timed; the mutation generator's wrong edits are rejected (or crash their own
process); the package runtime runs a proved edit where it was proved."""

import base64

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.ptx.mutate import wrong_edits
from kernelloop.tune.ptx.patch import hunks
from kernelloop.base.records import Candidate, Workload

pytestmark = pytest.mark.gpu

W = Workload(op="rmsnorm", axes={"M": 64, "N": 4096}, dtype="fp16")


@pytest.fixture(scope="module")
def target():
    from kernelloop.tune.ptx.pipeline import Options, Target, work
    source = (ops_dir() / "rmsnorm" / "kernel.py").read_text()
    cand = Candidate(op="rmsnorm", template="rowwise", source=source,
                     config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    t = Target(candidate=cand, workload=W)
    report, accepted = work(t, Options(rules=["cache_hint", "unroll"]))
    assert accepted, report
    return t, accepted


def test_a_rule_edit_is_proved_and_timed_on_the_gpu(target):
    from kernelloop.tune.ptx.pipeline import Options, prove_target
    t, accepted = target
    (r,) = prove_target(t, accepted[:1], Options(prove=True, executor="gpu", checks=3, time_it=True))
    assert r.passed and r.stage == "done" and r.timing.samples >= 3, r.message
    assert {c.status for c in r.cases if not c.label.endswith(")")} == {"identical"}
    assert r.environment["arch"].startswith("sm_") and "ir-override" in r.executor


def test_wrong_edits_are_rejected_on_the_gpu(target):
    from kernelloop.tune.ptx.gpu import prove_isolated
    from kernelloop.tune.ptx.prove import proof_cases
    from kernelloop.core.spec import load_op
    t, accepted = target
    k, _ = accepted[0]
    bundle = load_op(ops_dir() / "rmsnorm")
    for m in wrong_edits(k.ptx, seed=0):
        cand = accepted[0][1].candidate.model_copy(update={"hunks": hunks(k.ptx, m.ptx), "rule": f"wrong:{m.kind}"})
        cases = proof_cases(bundle, t.candidate, W, cand.id, "gpu-test", 3)
        r = prove_isolated(cand, k.ptx, op_dir=bundle.folder, template_source=t.candidate.source,
                           config=t.candidate.config, cases=cases, metadata=k.metadata,
                           original_cubin=base64.b64decode(k.cubin_b64), time_it=False)
        assert r.verdict in ("rejected", "crashed", "wrong"), (m.kind, r.verdict, r.message)
