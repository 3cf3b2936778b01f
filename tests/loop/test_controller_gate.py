"""The static gate in the default loop: one interpreter run on gemm's schedule candidates, continued three times.

1. options without `gate` (on): a broken schedule is REJECTED by the gate naming the field, its decision archived,
   and no worker job is made for it;
2. resumed with gate=audit (for that invocation): a second broken schedule is decided (enforced=False) and runs; a
   sound one passes;
3. resumed without `gate`: the archived mode (on, stored once with the options) is read back and goes on;
4. resumed with gate=off: a candidate runs with no decision recorded.
Gluon has no interpreter, so every candidate that reaches the worker ends RUNTIME_ERROR there."""

import json

import pytest

from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.core.execute.executor import LocalExecutor
from kernelloop.deliver.extend.regress import TaskProposer
from kernelloop.tune.gate import decisions, precision
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import lower
from kernelloop.tune.schedule.patch import apply_patch
from kernelloop.core.spec import load_op

W = Workload(op="gemm", axes={"M": 48, "N": 40, "K": 72}, dtype="fp16")
CFG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4, EPILOGUE="none", TRANS_B=0)
WRONG_PARITY = [{"op": "replace", "path": "/roles/0/k_step/0/parity", "value": "phase^1"}]
REUSED_EARLY = [{"op": "replace", "path": "/roles/0/k_step/2/pending", "value": 2}]
NO_ARRIVE = [{"op": "remove", "path": "/roles/0/k_step/4"}, {"op": "remove", "path": "/roles/0/tile_end/2"}]


def cand(patch=None, **config) -> Candidate:
    sched = apply_patch(gluon_ws(), patch) if patch else gluon_ws()
    return Candidate(op="gemm", template="schedule_ws", source=lower(sched), config={**CFG, **config}, proposer="t")


PARITY, REUSE, SOUND, MISSING = cand(WRONG_PARITY), cand(REUSED_EARLY), cand(), cand(NO_ARRIVE)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The run folder after each invocation: (options it went on with, archive's options, trials, decisions,
    candidates sent to a worker)."""
    bundle = load_op(ops_dir() / "gemm")
    run_dir = tmp_path_factory.mktemp("gate-run") / "run"
    sent: list[str] = []
    real = LocalExecutor.submit

    def counted(self, job, halving=None):
        sent.append(job.candidate.id)
        return real(self, job, halving)

    out = []
    base = dict(device="interpret", budget=Budget(evals=None), confirm=False, sanitize=False, checks=1)
    invocations = [({}, [PARITY]), ({"gate": "audit"}, [PARITY, REUSE, SOUND]),
                   ({}, [PARITY, REUSE, SOUND, cand(num_stages=3)]),
                   ({"gate": "off"}, [PARITY, REUSE, SOUND, cand(num_stages=3), MISSING])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(LocalExecutor, "submit", counted)
        for i, (gate, cands) in enumerate(invocations):
            ctl = Controller(bundle, [W], RunOptions(**base, **gate), run_dir, proposer=TaskProposer({W.id: cands}))
            ctl.run(resume=i > 0)
            with Archive(run_dir / "archive.sqlite") as a:
                rid = a.runs()[0]["id"]
                out.append((ctl.options, a.get_run(rid)["options"], {t.candidate_id: t for t in a.trials(rid)},
                            decisions(a, rid), list(sent), precision(a, rid)))
    return out


def test_the_default_gate_rejects_a_broken_schedule_naming_the_field_before_any_worker(run):
    options, stored, trials, decided, sent, _ = run[0]
    assert options.gate == "on" and stored["gate"] == "on"          # the default, archived with the options
    trial = trials[PARITY.id]
    assert trial.verdict.status is Status.REJECTED and trial.device == ""
    assert "roles[0].k_step[0].parity" in trial.verdict.message and "static gate" in trial.verdict.case
    assert sent == []                                               # no worker job was made for it
    (d,) = decided
    assert (d.candidate_id, d.passed, d.enforced, d.first.field) == (PARITY.id, False, True,
                                                                      "roles[0].k_step[0].parity")
    assert d.checked == "schedule" and "interpreter" in d.note and d.build_status == ""   # no build pretended


def test_in_audit_mode_a_rejected_schedule_is_recorded_and_runs(run):
    options, stored, trials, decided, sent, p = run[1]
    assert options.gate == "audit" and stored["gate"] == "on"      # the run's options are stored once
    assert len(decided) == 3                                        # the replayed trial is not decided again
    reuse = next(d for d in decided if d.candidate_id == REUSE.id)
    assert not reuse.passed and not reuse.enforced and reuse.first.field == "roles[0].k_step[4]"
    assert next(d for d in decided if d.candidate_id == SOUND.id).passed
    assert sent == [REUSE.id, SOUND.id]                             # both ran
    assert trials[REUSE.id].verdict.status is Status.RUNTIME_ERROR and trials[REUSE.id].device == "interpret"
    assert (p.decisions, p.passed, p.rejected, p.passed_and_ran) == (3, 1, 2, 1)
    assert p.passed_then_failed == {"RUNTIME_ERROR": 1} and (p.rejected_and_ran, p.rejected_yet_passed) == (1, 0)
    assert p.rejections_by_check == {"protocol": 2}


def test_a_resume_without_gate_goes_on_in_the_archived_mode_and_off_records_nothing(run):
    kept, _, trials, decided, sent, _ = run[2]
    assert kept.gate == "on" and [d.enforced for d in decided] == [True, False, False, True]
    assert decided[-1].passed and sent[-1] == decided[-1].candidate_id   # a sound schedule passes and runs
    off, _, trials, after, sent, _ = run[3]
    assert off.gate == "off" and len(after) == 4                    # MISSING ran without a decision
    assert sent[-1] == MISSING.id and trials[MISSING.id].verdict.status is Status.RUNTIME_ERROR
    assert json.loads(json.dumps(off.as_dict()))["gate"] == "off"
