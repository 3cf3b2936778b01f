"""The rule planner on schedules: an entry with an `edit` patches the parent's schedule; the static gate's refusal
is skipped and kept as a capability gap (with the field), as is a rule whose moves leave every template's space; the
planner proposer lowers a planned edit into a candidate."""

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.knowledge import Experience, KnowledgeBase, load_knowledge
from kernelloop.tune.propose.planner import PlannerStrategy, RulePlanner
from kernelloop.tune.propose.planner_proposer import PlannerProposer
from kernelloop.base.records import Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import schedule_of
from kernelloop.core.spec import load_op

PARENT = {"template": "schedule_ws", "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
          "num_stages": 3, "EPILOGUE": "none", "TRANS_B": 0}
W = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")


def entry(id_, **kw) -> Experience:
    base = dict(id=id_, statement="s", when="num_stages == 3", requires=["num_stages"], evidence=["e"],
                confidence="low", expect=[{"metric": "latency_us", "direction": "down", "magnitude": -0.05}])
    return Experience.model_validate({**base, **kw})


def test_edits_refusals_and_targets_outside_the_space():
    kb = KnowledgeBase(experience={
        "E-OK": load_knowledge().experience["E-GEMM-SPLIT-ACCUMULATOR-DEEPER-RING"],
        "E-TOO-DEEP": entry("E-TOO-DEEP", edit=[{"op": "replace", "path": "/ring/stages", "value": 6}]),
        "E-FUSE": entry("E-FUSE", edit=[{"op": "add", "path": "/epilogue/fused/-", "value": "silu"}]),
        "E-MORE-STAGES": entry("E-MORE-STAGES", moves=[{"param": "num_stages", "step": "up"}]),
    })
    sched = gluon_ws().bind(PARENT)
    plan = RulePlanner(kb).plan(PARENT, {}, None, [PARENT], kb, elem=2, schedule=sched)
    (edit,) = plan.edits
    assert edit.schedule.issue.accumulators == 2 and edit.schedule.ring.stages == 4
    assert edit.proposal.rule == "E-GEMM-SPLIT-ACCUMULATOR-DEEPER-RING" and edit.proposal.config["num_stages"] == 4
    gaps = {g.source: g for g in plan.gaps}
    assert (gaps["planner:E-TOO-DEEP"].kind, gaps["planner:E-TOO-DEEP"].field) == ("refused_edit", "ring.stages")
    # the op (gemm) fuses nothing: an edit adding an activation changes what it computes
    assert (gaps["planner:E-FUSE"].kind, gaps["planner:E-FUSE"].field) == ("refused_edit", "epilogue.fused")
    out = gaps["planner:E-MORE-STAGES"]
    assert out.kind == "outside_space" and out.field == "num_stages" and out.expected_change_pct == -5.0
    assert "schedule edit refused" in plan.skipped["E-TOO-DEEP"]
    # a parent without a schedule: the edit does not apply, and that is no gap
    plain = RulePlanner(kb).plan(PARENT, {}, None, [PARENT], kb, schedule=None)
    assert plain.edits == [] and "not lowered from a schedule" in plain.skipped["E-GEMM-SPLIT-ACCUMULATOR-DEEPER-RING"]


def test_strategy_hands_out_edits_and_logs_gaps():
    kb = KnowledgeBase(experience={"E-OK": load_knowledge().experience["E-GEMM-SPLIT-ACCUMULATOR-DEEPER-RING"],
                                   "E-MORE-STAGES": entry("E-MORE-STAGES",
                                                          moves=[{"param": "num_stages", "step": "up"}])})
    s = PlannerStrategy([PARENT], evidence=lambda cfg: {}, kb=kb, start=PARENT,
                        schedule=lambda cfg: gluon_ws().bind(cfg))
    assert s.ask() == PARENT
    s.tell(PARENT, 100.0)
    edit = s.next_edit()
    assert edit is not None and edit.schedule.ring.stages == 4 and s.next_edit() is None
    assert [e["gap"]["source"] for e in s.events if e["kind"] == "capability-gap"] == ["planner:E-MORE-STAGES"]


def test_proposer_lowers_a_planned_edit():
    bundle = load_op(ops_dir() / "gemm")
    p = PlannerProposer("gemm", bundle.template_sources, [W], {W.id: [PARENT]}, {W.id: 0},
                        start={W.id: PARENT}, kb=load_knowledge())
    first = p.ask(W)
    assert first.template == "schedule_ws"
    assert p._schedule(PARENT) == gluon_ws().bind(PARENT)
    p.strategies[W.id].tell(PARENT, 100.0)
    p.give_evidence(first, W, {"bottleneck": "compute"})
    p._asked.pop((first.id, W.id))
    cand = p.ask(W)
    assert cand.template == "schedule" and cand.parent_ids == [first.id]
    assert schedule_of(cand.source).issue.accumulators == 2 and cand.config["num_stages"] == 4
    assert cand.config["TRANS_B"] == 0 and "latency_us down" in cand.hypothesis
    assert any(e.get("schedule") for e in p.drain_events())
