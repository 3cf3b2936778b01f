"""kernelloop.tune.gate.archive: decisions archived as a run's events, and the gate's precision against the GPU verdicts of
the same (candidate, workload): passed then failed, and (audit mode) rejected yet passed."""

from kernelloop.core.archive import Archive
from kernelloop.tune.gate import GateDecision, GateFinding, decisions, precision, record_decision
from kernelloop.base.records import Candidate, Environment, Status, Trial, Verdict, Workload
from kernelloop.core.spec import load_op
from kernelloop.base.builtin import ops_dir

W = Workload(op="gemm", axes={"M": 256, "N": 256, "K": 256}, dtype="fp16")


def test_precision_from_archived_decisions_and_trials(tmp_path):
    spec = load_op(ops_dir() / "gemm").spec
    env = Environment(device="cuda", gpu="NVIDIA H200", driver="580", cuda="13.0", torch="2.11", triton="3.6.0",
                      python="3.12", host="h", properties={})
    cands = [Candidate(op="gemm", template="schedule_ws", source=f"# {i}", config={"i": i}) for i in range(5)]
    with Archive(tmp_path / "a.sqlite") as a:
        a.create_run("r", spec, {}, "m", env, {})
        statuses = [Status.PASSED, Status.RUNTIME_ERROR, None, Status.PASSED, Status.TIMEOUT]
        passed = [True, True, False, False, False]
        enforced = [True, True, True, False, False]
        for i, (c, st) in enumerate(zip(cands, statuses)):
            found = [] if passed[i] else [GateFinding(check="protocol", field="roles[0].k_step[4]", message="x")]
            record_decision(a, "r", GateDecision(candidate_id=c.id, workload_id=W.id, template=c.template,
                                                 passed=passed[i], findings=found, enforced=enforced[i]))
            if st is not None:
                a.record_trial(Trial(run_id="r", index=i, candidate_id=c.id, workload_id=W.id, manifest_hash="m",
                                     verdict=Verdict(status=st, message="" if st is Status.PASSED else "planned"), started=0.0, finished=0.0), c, W)
        assert [d.candidate_id for d in decisions(a, "r")] == [c.id for c in cands]
        # decided again (a resumed run re-submitting a candidate an interruption lost): its last decision counts
        record_decision(a, "r", GateDecision(candidate_id=cands[0].id, workload_id=W.id, template="schedule_ws",
                                             passed=True))
        assert len(decisions(a, "r")) == 6
        p = precision(a, "r")
    assert (p.decisions, p.passed, p.rejected, p.passed_and_ran) == (5, 2, 3, 2)
    assert p.passed_then_failed == {"RUNTIME_ERROR": 1} and p.pass_precision == 0.5
    assert (p.rejected_and_ran, p.rejected_yet_passed, p.reject_precision) == (2, 1, 0.5)
    assert p.rejections_by_check == {"protocol": 3}
