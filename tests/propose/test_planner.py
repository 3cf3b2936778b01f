"""The rule planner: which entries fire on which evidence, moves inside the pruned space, the ask/tell adapter."""

import textwrap
from pathlib import Path

import pytest

from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.tune.knowledge import KnowledgeError, load_knowledge
from kernelloop.tune.profile.classify import classify
from kernelloop.tune.profile.ncu_csv import read_details_csv, select_kernel
from kernelloop.tune.profile.roofline import roofline_from_copy
from kernelloop.tune.propose import PlannerLimits, PlannerStrategy, RulePlanner, flatten_evidence
from kernelloop.tune.propose.planner import condition_holds, neighbours
from kernelloop.base.records import BuildResources, DType, ProfileReport, Workload, canonical_json
from kernelloop.core.spec.space import prune

NCU_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"
W = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
BASE = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


@pytest.fixture(scope="module")
def kb():
    return load_knowledge()


@pytest.fixture(scope="module")
def space(layernorm):
    kept, _ = prune(layernorm.spec.templates[0], W, VIRTUAL_HOPPER)
    return kept


def _plan(kb, parent, evidence, space, build=None, **kw):
    return RulePlanner(kb).plan(parent, evidence, build, space, axes=W.axes, elem=2, **kw)


def _only_changed(parent, config, allowed):
    return all(config[k] == parent[k] for k in parent if k not in allowed)


def test_recorded_h200_profile_proposes_fewer_warps(kb, space, layernorm):
    """torch's layer_norm profile: compute-bound at 2 FLOP/B -> fewer warps per row (issue overhead)."""
    kernel = select_kernel(read_details_csv(NCU_CSV), "layer_norm")
    report = ProfileReport(trial_id="t", kernel=kernel, classification=classify(kernel),
                           roofline=roofline_from_copy(layernorm.spec, W, 29.57, 20.4))
    parent = {**BASE, "num_warps": 16}
    plan = _plan(kb, parent, report, space)
    assert plan.fired == ["E-ISSUE-BOUND-FEWER-WARPS"]
    assert [p.config["num_warps"] for p in plan.proposals] == [8, 4]        # nearest first, per_rule = 2
    for p in plan.proposals:
        assert p.config in space and _only_changed(parent, p.config, {"num_warps"})
        assert p.rule == "E-ISSUE-BOUND-FEWER-WARPS" and p.cites[0] == p.rule
        assert p.hypothesis_text() == "sol_compute_pct down; latency_us down"
        assert "num_warps 16->" in p.rationale
    assert "not evaluable" in plan.skipped["E-SPILL-MORE-WARPS"]          # no build resources given
    assert plan.skipped["E-BW-BYTES-IN-FLIGHT"] == "condition false"


def test_only_configurations_of_the_pruned_space(kb, space):
    parent = {**BASE, "num_warps": 16}
    ev = {"bottleneck": "compute-bound", "arithmetic_intensity": 2.0}
    pruned = [c for c in space if c["num_warps"] != 8]
    assert [p.config["num_warps"] for p in _plan(kb, parent, ev, pruned).proposals] == [4, 2]
    only_parent = [c for c in space if c["num_warps"] >= 16]
    plan = _plan(kb, parent, ev, only_parent)
    assert plan.proposals == [] and "no configuration of the pruned space" in plan.skipped["E-ISSUE-BOUND-FEWER-WARPS"]
    excluded = _plan(kb, parent, ev, space, exclude={canonical_json({**parent, "num_warps": 8})})
    assert [p.config["num_warps"] for p in excluded.proposals] == [4, 2]


def test_spills_reduce_per_thread_work(kb, space):
    parent = {**BASE, "ROWS": 2}
    build = BuildResources(registers=255, spills=12, local_loads=20, local_stores=12)
    plan = _plan(kb, parent, {}, space, build=build)
    assert plan.fired[:2] == ["E-SPILL-MORE-WARPS", "E-SPILL-FEWER-ROWS"]
    by_rule = {}
    for p in plan.proposals:
        by_rule.setdefault(p.rule, []).append(p.config)
    assert all(c["num_warps"] > 4 and _only_changed(parent, c, {"num_warps"}) for c in by_rule["E-SPILL-MORE-WARPS"])
    assert by_rule["E-SPILL-FEWER-ROWS"] == [{**parent, "ROWS": 1}]
    assert "F-SM90-MAX-REGS-PER-THREAD" in plan.proposals[0].cites


def test_latency_bound_with_register_limited_occupancy(kb, space):
    ev = {"bottleneck": "memory-latency-bound", "occupancy_theoretical_pct": 25.0, "block_limit_registers": 2,
          "block_limit_warps": 16, "waves_per_sm": 3.0}
    plan = _plan(kb, BASE, ev, space)
    assert plan.fired == ["E-LAT-REGISTER-OCCUPANCY"]
    assert [p.config["num_warps"] for p in plan.proposals] == [8, 16]
    assert {"occupancy_achieved_pct", "latency_us"} == {h.metric for h in plan.proposals[0].hypotheses}
    assert set(plan.proposals[0].cites) == {"E-LAT-REGISTER-OCCUPANCY", "F-SM90-REGS-PER-SM", "F-SM90-THREADS-PER-SM"}


def test_bandwidth_bound_more_bytes_in_flight(kb, space):
    ev = {"bottleneck": "memory-bandwidth-bound", "roofline_fraction": 0.8, "occupancy_theoretical_pct": 100.0}
    plan = _plan(kb, BASE, ev, space)
    assert "E-BW-BYTES-IN-FLIGHT" in plan.fired
    # not when registers already cap occupancy below half (more rows would lower it further)
    assert "E-BW-BYTES-IN-FLIGHT" not in _plan(kb, BASE, {**ev, "occupancy_theoretical_pct": 25.0}, space).fired
    rows = [p.config for p in plan.proposals if p.rule == "E-BW-BYTES-IN-FLIGHT"]
    assert rows and all(c["ROWS"] > 1 and _only_changed(BASE, c, {"ROWS", "num_warps"}) for c in rows)
    assert rows[0] == {**BASE, "ROWS": 2}                              # nearest: one step, num_warps kept
    # Near the roof the cache-policy entries fire instead, and flip the policy.
    near = _plan(kb, BASE, {"bottleneck": "balanced-near-limit"}, space)
    assert near.fired == ["E-NEAR-LIMIT-EVICT-POLICY", "E-NEAR-LIMIT-STREAM-STORE"]
    assert [p.config for p in near.proposals] == [{**BASE, "EVICT_FIRST": 1}, {**BASE, "STREAM_STORE": 1}]


def test_row_length_not_multiple_of_16_is_advice_not_a_proposal(kb, layernorm):
    w = Workload(op="layernorm", axes={"M": 4096, "N": 5000}, dtype=DType.fp16)
    space, _ = prune(layernorm.spec.templates[0], w, VIRTUAL_HOPPER)
    parent = {"BLOCK_N": 8192, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}
    build = BuildResources(global_loads={16: 40}, global_stores={16: 20})
    plan = RulePlanner(kb).plan(parent, {"bottleneck": "memory-bandwidth-bound", "sol_dram_pct": 40.0}, build,
                                space, axes=w.axes, elem=2)
    assert "E-ROW-LENGTH-NOT-MULTIPLE-OF-16" in plan.fired
    assert plan.advice[0].startswith("E-ROW-LENGTH-NOT-MULTIPLE-OF-16")
    assert not any(p.rule == "E-ROW-LENGTH-NOT-MULTIPLE-OF-16" for p in plan.proposals)
    aligned = RulePlanner(kb).plan(parent, {}, build, space, axes={"M": 4096, "N": 4096}, elem=2)
    assert "E-ROW-LENGTH-NOT-MULTIPLE-OF-16" not in aligned.fired


def test_conditions_never_fire_on_missing_evidence():
    assert condition_holds("spills > 0 or local_loads > 0", {"local_loads": 3}) == (True, "")
    ok, why = condition_holds("spills > 0 or local_loads > 0", {})
    assert not ok and "local_loads" in why and "spills" in why
    assert condition_holds("a > 1 and b > 1", {"a": 2}) == (False, "not evaluable without ['b']")
    assert condition_holds("x / y > 1", {"x": 1, "y": 0})[0] is False


def test_neighbour_steps(kb, space):
    e = kb.experience["E-NEAR-LIMIT-EVICT-POLICY"]
    assert [c for _, c in neighbours(BASE, e, space)] == [{**BASE, "EVICT_FIRST": 1}]
    e = kb.experience["E-REREADS-COVER-ROW"]
    looped = {**BASE, "BLOCK_N": 1024, "num_warps": 8}
    got = neighbours(looped, e, space)
    assert got and all(c["BLOCK_N"] > 1024 for _, c in got)
    assert got[0][1] == {**looped, "BLOCK_N": 2048} and [d for d, _ in got] == sorted(d for d, _ in got)


def test_a_looped_row_is_covered_by_one_block_of_about_32_elements_a_thread(kb, space):
    looped = {**BASE, "BLOCK_N": 1024, "num_warps": 1}
    plan = _plan(kb, looped, {"bottleneck": "memory-bandwidth-bound", "roofline_fraction": 0.8}, space)
    assert plan.fired[0] == "E-LOOPED-ROW-COVER"
    got = [p.config for p in plan.proposals if p.rule == "E-LOOPED-ROW-COVER"]
    # the space's largest BLOCK_N; 4 warps (32 elements a thread) first, then the nearer of the two at 2x off
    assert got == [{**looped, "BLOCK_N": 4096, "num_warps": 4}, {**looped, "BLOCK_N": 4096, "num_warps": 2}]
    assert plan.proposals[0].hypothesis_text() == "roofline_fraction up; latency_us down"
    near_roof = _plan(kb, looped, {"bottleneck": "memory-bandwidth-bound", "roofline_fraction": 0.96}, space)
    assert "E-LOOPED-ROW-COVER" not in near_roof.fired


def test_register_limited_rows_and_warps(kb, space):
    parent = {**BASE, "ROWS": 4}             # 128 elements a thread on 4 warps
    ev = {"bottleneck": "memory-bandwidth-bound", "roofline_fraction": 0.85, "occupancy_theoretical_pct": 25.0,
          "block_limit_registers": 2, "block_limit_warps": 16}
    plan = _plan(kb, parent, ev, space)
    assert plan.fired[:2] == ["E-ROWS-DOWN-REGISTER-LIMITED", "E-ROW-BLOCK-MORE-WARPS"]
    by_rule = {}
    for p in plan.proposals:
        by_rule.setdefault(p.rule, []).append(p.config)
    assert by_rule["E-ROWS-DOWN-REGISTER-LIMITED"][0] == {**parent, "ROWS": 2}
    assert by_rule["E-ROW-BLOCK-MORE-WARPS"][0] == {**parent, "num_warps": 16}     # 32 elements a thread
    # enough occupancy: neither fires
    calm = _plan(kb, parent, {**ev, "occupancy_theoretical_pct": 75.0, "block_limit_registers": 8}, space)
    assert not {"E-ROWS-DOWN-REGISTER-LIMITED", "E-ROW-BLOCK-MORE-WARPS"} & set(calm.fired)


def test_max_min_moves_and_prefer(tmp_path, space):
    (tmp_path / "k.toml").write_text(textwrap.dedent("""
        schema = 1
        version = "t"
        [[experience]]
        id = "E-MAX"
        statement = "largest block, fewest elements a thread above 8"
        when = "BLOCK_N >= 1"
        requires = ["BLOCK_N", "num_warps", "N"]
        moves = [{ param = "BLOCK_N", step = "max" }, { param = "num_warps", step = "any" }]
        prefer = "BLOCK_N / (32 * num_warps) if BLOCK_N / (32 * num_warps) >= 8 else 1e9"
        evidence = ["t"]
        confidence = "low"
        [[experience]]
        id = "E-MIN"
        statement = "fewest warps"
        when = "num_warps >= 1"
        requires = ["num_warps"]
        moves = [{ param = "num_warps", step = "min" }]
        evidence = ["t"]
        confidence = "low"
    """))
    kb = load_knowledge(tmp_path)
    parent = {**BASE, "BLOCK_N": 1024}
    got = [c for _, c in neighbours(parent, kb.experience["E-MAX"], space, {"N": 4096, "elem": 2})]
    assert got[0] == {**parent, "BLOCK_N": 4096, "num_warps": 16} and all(c["BLOCK_N"] == 4096 for c in got)
    assert neighbours(BASE, kb.experience["E-MAX"], space) == []          # already at the largest
    assert [c for _, c in neighbours(parent, kb.experience["E-MIN"], space)] == [{**parent, "num_warps": 1}]
    (tmp_path / "k.toml").write_text((tmp_path / "k.toml").read_text().replace("else 1e9", "else M"))
    with pytest.raises(KnowledgeError, match="prefer"):
        load_knowledge(tmp_path)


def test_limits_and_priority(tmp_path, space):
    (tmp_path / "k.toml").write_text(textwrap.dedent("""
        schema = 1
        version = "t"
        [[experience]]
        id = "E-LOW"
        statement = "low"
        when = "num_warps >= 1"
        requires = ["num_warps"]
        moves = [{ param = "num_warps", step = "up" }]
        evidence = ["t"]
        confidence = "low"
        priority = 1
        [[experience]]
        id = "E-HIGH"
        statement = "high"
        when = "ROWS >= 1"
        requires = ["ROWS"]
        moves = [{ param = "ROWS", step = "up" }]
        evidence = ["t"]
        confidence = "low"
        priority = 9
    """))
    kb = load_knowledge(tmp_path)
    plan = RulePlanner(kb, PlannerLimits(per_rule=1, total=2)).plan(BASE, {}, None, space)
    assert [p.rule for p in plan.proposals] == ["E-HIGH", "E-LOW"]
    assert [p.config for p in plan.proposals] == [{**BASE, "ROWS": 2}, {**BASE, "num_warps": 8}]


def test_flatten_evidence_from_a_kernel_profile():
    kernel = select_kernel(read_details_csv(NCU_CSV), "layer_norm")
    flat = flatten_evidence(kernel, BuildResources(registers=32, global_loads={128: 4}))
    assert flat["bottleneck"] == "compute-bound" and flat["sol_dram_pct"] == 32.33
    assert flat["registers"] == 32 and flat["ldg128_fraction"] == 1.0
    assert "spills" not in flat


# -- the ask/tell adapter ----------------------------------------------------------------------------------

def _evidence_model(config):
    """A stand-in for profiles: everything is 'compute-bound at low intensity' (fewer warps help)."""
    return {"bottleneck": "compute-bound", "arithmetic_intensity": 2.0}


def _latency(config):
    return 20.0 + abs(config["num_warps"] - 4) + config["ROWS"] + 0.1 * config["EVICT_FIRST"]


def _drive(strategy, n=None):
    asked = []
    while n is None or len(asked) < n:
        c = strategy.ask()
        if c is None:
            break
        asked.append(c)
        strategy.tell(c, _latency(c))
    return asked


def test_strategy_contract(kb, space):
    s = PlannerStrategy(space, seed=3, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2)
    asked = _drive(s)
    keys = [canonical_json(c) for c in asked]
    assert len(keys) == len(set(keys)) == len(space)                   # every config once, then None
    assert all(c in space for c in asked) and s.ask() is None
    again = _drive(PlannerStrategy(space, seed=3, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2))
    assert again == asked                                              # deterministic
    other = _drive(PlannerStrategy(space, seed=4, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2), 3)
    assert other != asked[:3]


def test_strategy_follows_the_planner_after_the_first_tell(kb, space):
    s = PlannerStrategy(space, seed=0, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2)
    first = s.ask()
    assert s.proposal_for(first) is None                               # exploration: nothing to plan from
    s.tell(first, _latency(first))
    second = s.ask()
    p = s.proposal_for(second)
    if first["num_warps"] > 1 and first["BLOCK_N"] / (32 * first["num_warps"]) < 16:
        assert p is not None and p.rule == "E-ISSUE-BOUND-FEWER-WARPS" and second["num_warps"] < first["num_warps"]
        assert p.parent == first and s.events[0]["kind"] == "plan"
    # Without evidence it degrades to seeded local and random exploration, never repeating.
    blind = _drive(PlannerStrategy(space, seed=0, kb=kb), 10)
    assert len({canonical_json(c) for c in blind}) == 10


def test_strategy_plans_from_a_parent_that_needs_fewer_warps(kb, space):
    parent = {**BASE, "num_warps": 32}
    s = PlannerStrategy(space, seed=0, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2)
    s.tell(parent, 30.0)             # a told configuration (e.g. replayed from the archive)
    nxt = s.ask()
    assert nxt == {**parent, "num_warps": 16} and s.proposal_for(nxt).rule == "E-ISSUE-BOUND-FEWER-WARPS"


def test_a_rule_that_keeps_missing_is_retired(kb, space):
    """Every proposal is told 10 % slower than its parent: each rule is retired after three misses in a row, its
    queued proposals dropped, and no later proposal comes from it."""
    s = PlannerStrategy(space, seed=0, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2,
                        start={**BASE, "num_warps": 32})
    values, retired_at = {}, {}
    for step in range(30):
        c = s.ask()
        if c is None:
            break
        p = s.proposal_for(c)
        if p is not None and p.rule:
            assert p.rule not in retired_at, (p.rule, step)          # nothing from a retired rule
        v = 30.0 if p is None else values[canonical_json(p.parent)] * 1.1
        values[canonical_json(c)] = v
        s.tell(c, v)
        for rule in s.retired:
            retired_at.setdefault(rule, step)
    events = [e for e in s.events if e["kind"] == "retire"]
    assert events and {e["rule"] for e in events} == set(s.retired) == set(retired_at)
    assert all("3 proposals in a row" in e["reason"] for e in events)
    # A later plan names the retirement among its skipped entries.
    plan = RulePlanner(kb).plan({**BASE, "num_warps": 32}, _evidence_model({**BASE, "num_warps": 32}), None, space,
                                axes=W.axes, elem=2, retired=s.retired)
    assert all(plan.skipped[r].startswith("retired: ") for r in s.retired)


def test_with_no_rule_firing_it_explores_next_to_the_best(kb, space):
    s = PlannerStrategy(space, seed=5, evidence=lambda c: {}, kb=kb, axes=W.axes, elem=2, start=BASE)
    first = s.ask()
    s.tell(first, 20.0)
    second = s.ask()
    assert s.proposal_for(second) is None
    changed = [k for k in BASE if second[k] != BASE[k]]
    assert len(changed) == 1                                           # one parameter, one step along its values
    order = sorted({c[changed[0]] for c in space})
    assert abs(order.index(second[changed[0]]) - order.index(BASE[changed[0]])) == 1
    assert s.events[-1]["kind"] == "explore" and "neighbour" in s.events[-1]["reason"]


def test_a_faster_proposal_resets_the_misses(kb, space):
    s = PlannerStrategy(space, seed=0, evidence=_evidence_model, kb=kb, axes=W.axes, elem=2,
                        start={**BASE, "num_warps": 32})
    values = {}
    for step in range(12):
        c = s.ask()
        if c is None:
            break
        p = s.proposal_for(c)
        # alternate: miss, hit, miss, hit ... never three misses in a row
        v = 30.0 if p is None else values[canonical_json(p.parent)] * (1.1 if step % 2 else 0.9)
        values[canonical_json(c)] = v
        s.tell(c, v)
    assert not s.retired
