"""The rule planner: CUDAMaster's Planner role without an LLM.

It reads the parent's evidence (bottleneck class, kept metrics, roofline numbers), its build resources and the
knowledge base's experience entries, and proposes the next configurations of the same template, each with the
hypotheses of the entry that produced it and the ids it relied on. The rules are data (builtin/knowledge/*.toml):
an entry fires when its condition holds on the evidence, the parent's configuration and the workload's axes;
its moves pick neighbours of the parent in the pruned space (`space`) only, nearest first.

    planner = RulePlanner()
    plan = planner.plan(parent_config, report, build, space, kb, axes={"M": 4096, "N": 4096}, elem=2)
    plan.proposals  # [Proposal(config, hypotheses, cites, rule, rationale)]
    plan.skipped    # {entry id: why it did not fire}

`PlannerStrategy` wraps it as an ask/tell search strategy (kernelloop.tune.search protocol): evidence about a
told configuration comes from a callback, so the controller can plug the planner in like any strategy.
"""

from __future__ import annotations

import ast
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...core.bench.stats import ratio_verdict
from ..gaps import CapabilityGap
from ..knowledge import Experience, KnowledgeBase, load_knowledge
from ...base.records import BuildResources, Comparison, canonical_json, evaluate_expression
from ...base.records.measurement import SAME_MARGIN
from ..schedule.records import Schedule
from .base import Evidence, Proposal, flatten_evidence
from ...base import pyast


def _key(config: dict) -> str:
    return canonical_json(config)


@dataclass(frozen=True)
class PlannerLimits:
    """How much one plan may propose."""

    per_rule: int = 2    # configurations per fired entry (nearest moves first)
    total: int = 8       # configurations per plan
    retire_after: int = 3          # a rule whose proposals missed this many times in a row is not used again
    miss_margin: float = SAME_MARGIN  # a proposal not FASTER than its parent under this band is a miss


@dataclass
class Plan:
    """What the planner proposed and why the other entries did not fire."""

    proposals: list[Proposal] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    advice: list[str] = field(default_factory=list)   # fired entries without moves (a template change is needed)
    edits: list[ScheduleProposal] = field(default_factory=list)   # schedule edits the static gate let through
    gaps: list[CapabilityGap] = field(default_factory=list)       # what fired but could not be expressed


@dataclass(frozen=True)
class ScheduleProposal:
    """A rule's edit of the parent's schedule: the edited schedule (it passed the static gate's checks)."""

    schedule: Schedule
    proposal: Proposal


# -- conditions ---------------------------------------------------------------------------------------------

def _names(expr: str) -> set[str]:
    return {n.id for n in ast.walk(pyast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def condition_holds(expr: str, env: Mapping[str, Any]) -> tuple[bool, str]:
    """(holds, why not). A top-level `or` holds when any evaluable branch holds; a branch naming something
    the environment lacks is not evaluable (missing evidence never makes a rule fire)."""
    tree = pyast.parse(expr, mode="eval").body
    branches = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.Or) else [tree]
    missing: set[str] = set()
    for b in branches:
        src = ast.unparse(b)
        need = _names(src) - {"min", "max", "cdiv", "next_pow2"}
        lack = {n for n in need if n not in env}
        if lack:
            missing |= lack
            continue
        try:
            if evaluate_expression(src, {n: env[n] for n in need}):
                return True, ""
        except (TypeError, ZeroDivisionError, ValueError) as e:
            missing.add(f"<{type(e).__name__}: {e}>")
    if missing:
        return False, f"not evaluable without {sorted(missing)}"
    return False, "condition false"


# -- moves --------------------------------------------------------------------------------------------------

def _value_order(space: list[dict], param: str) -> list:
    """The distinct values of a parameter in the space: sorted if numeric, else in order of appearance."""
    seen = list(dict.fromkeys(c[param] for c in space if param in c))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in seen):
        return sorted(seen)
    return seen


def neighbours(parent: dict, entry: Experience, space: list[dict],
               env: Mapping[str, Any] | None = None) -> list[tuple[int, dict]]:
    """(distance, config) of every configuration in `space` that applies the entry's moves to `parent`:
    moved parameters change in the stated direction (or may, for 'any'; to the extreme value of the space for
    'max' / 'min'), all others keep the parent's value. Distance = steps along each moved parameter's ordered
    values. Ordered nearest first, or, when the entry has `prefer`, by that expression evaluated on each
    configuration (with `env`: the workload's axes and 'elem') first and distance second."""
    moves = {m.param: m.step for m in entry.moves}
    orders = {p: _value_order(space, p) for p in moves}
    out = []
    for c in space:
        if c == parent or set(c) != set(parent):
            continue
        if any(c[k] != parent[k] for k in c if k not in moves):
            continue
        dist, ok, changed = 0, True, False
        for p, step in moves.items():
            order = orders[p]
            if parent[p] not in order or c[p] not in order:
                ok = False
                break
            i, j = order.index(parent[p]), order.index(c[p])
            if (step == "up" and j <= i or step == "down" and j >= i or step == "other" and j == i
                    or step == "max" and (j != len(order) - 1 or i == j) or step == "min" and (j != 0 or i == j)):
                ok = False
                break
            changed |= j != i and step != "any"
            dist += abs(j - i)
        if ok and changed:
            out.append((dist, c))
    if entry.prefer:
        def rank(dc: tuple[int, dict]) -> tuple:
            try:
                score = float(evaluate_expression(entry.prefer, {**(env or {}), **dc[1]}))
            except (TypeError, ZeroDivisionError, ValueError, KeyError, NameError):
                score = math.inf
            return (score, dc[0], _key(dc[1]))
        out.sort(key=rank)
    else:
        out.sort(key=lambda dc: (dc[0], _key(dc[1])))
    return out


def _describe(parent: dict, config: dict) -> str:
    return ", ".join(f"{k} {parent[k]}->{config[k]}" for k in config if config[k] != parent.get(k)) or "no change"


class RulePlanner:
    """Proposes configurations from knowledge-base experience entries; deterministic."""

    name = "rule-planner"

    def __init__(self, kb: KnowledgeBase | None = None, limits: PlannerLimits = PlannerLimits()):
        self.kb = kb
        self.limits = limits

    def _kb(self, kb: KnowledgeBase | None) -> KnowledgeBase:
        if kb is not None:
            return kb
        if self.kb is None:
            self.kb = load_knowledge()
        return self.kb

    def plan(self, parent_config: dict, evidence: Evidence, build: BuildResources | None, space: list[dict],
             kb: KnowledgeBase | None = None, *, axes: Mapping[str, int] | None = None, elem: int | None = None,
             exclude: set[str] | frozenset[str] = frozenset(),
             retired: Mapping[str, str] | None = None, schedule: Schedule | None = None) -> Plan:
        """Every entry in priority order: condition on evidence + parent config + axes; moves inside `space`.

        `exclude` holds canonical-JSON keys of configurations not to propose (already evaluated); `retired` maps
        entry ids not to use any more to the reason (their proposals kept missing on this workload). `schedule`:
        the parent's typed schedule (bound to its config), which entries with an `edit` patch.
        """
        kb = self._kb(kb)
        env: dict[str, Any] = {**flatten_evidence(evidence, build), **(axes or {}), **parent_config}
        if elem is not None:
            env["elem"] = elem
        shape = {**(axes or {}), **({"elem": elem} if elem is not None else {})}   # for entries' `prefer`
        plan = Plan()
        chosen: dict[str, Proposal] = {}
        for entry in sorted(kb.experience.values(), key=lambda e: (-e.priority, e.id)):
            if retired and entry.id in retired:
                plan.skipped[entry.id] = f"retired: {retired[entry.id]}"
                continue
            lacking = [p for p in entry.requires if p not in env]
            if lacking:
                plan.skipped[entry.id] = f"the template/workload has no {lacking}"
                continue
            holds, why = condition_holds(entry.when, env)
            if not holds:
                plan.skipped[entry.id] = why
                continue
            plan.fired.append(entry.id)
            if entry.edit:
                self._edit(plan, entry, parent_config, schedule, elem)
                continue
            if not entry.moves:
                plan.advice.append(f"{entry.id}: {entry.statement}")
                continue
            found = [c for _, c in neighbours(parent_config, entry, space, shape) if _key(c) not in exclude]
            if not found:
                plan.skipped[entry.id] = "fired, but no configuration of the pruned space applies its moves"
                if not any(c != parent_config for _, c in neighbours(parent_config, entry, space, shape)):
                    moved = ", ".join(f"{m.param} {m.step}" for m in entry.moves)
                    plan.gaps.append(CapabilityGap(
                        op="", kind="outside_space", need=f"{moved} from {_describe_config(parent_config)}",
                        field=",".join(m.param for m in entry.moves), source=f"planner:{entry.id}",
                        expected_change_pct=_expected_pct(entry), detail=entry.statement[:200]))
                continue
            taken = 0
            for config in found:
                if len(chosen) >= self.limits.total or taken >= self.limits.per_rule:
                    break
                k = _key(config)
                if k in chosen:  # another entry proposed it first: it cites this one too
                    p = chosen[k]
                    if entry.id not in p.cites:
                        chosen[k] = Proposal(p.config, p.hypotheses, p.cites + (entry.id, *entry.cites), p.rule,
                                             p.rationale + f"; also {entry.id}", p.parent)
                    continue
                hyps = tuple(e.hypothesis(note=f"{entry.id}") for e in entry.expect)
                chosen[k] = Proposal(dict(config), hyps, (entry.id, *entry.cites), entry.id,
                                     f"{_describe(parent_config, config)}: {entry.statement}", dict(parent_config))
                taken += 1
        plan.proposals = list(chosen.values())
        return plan

    def _edit(self, plan: Plan, entry: Experience, parent: dict, schedule: Schedule | None, elem: int | None) -> None:
        """Apply the entry's schedule edit; what the gate refuses is skipped and kept as a gap."""
        from ..gate.check import check_schedule
        from ..schedule.patch import EditInvalid, apply_patch
        if schedule is None:
            plan.skipped[entry.id] = "the parent was not lowered from a schedule"
            return
        try:
            edited = apply_patch(schedule, entry.edit, name=f"{schedule.name}_{entry.id[2:].lower().replace('-', '_')}")
            if edited.epilogue.fused != schedule.epilogue.fused:
                raise EditInvalid(f"the op's epilogue is EPILOGUE={schedule.epilogue.name!r}: an edit does not change "
                                  f"what the op computes", field="epilogue.fused")
            findings = check_schedule(edited, elem or 2)
            if findings:
                raise EditInvalid(findings[0].message, field=findings[0].field, check=findings[0].check)
        except EditInvalid as e:
            plan.skipped[entry.id] = f"schedule edit refused: {e.field}: {e}"
            plan.gaps.append(CapabilityGap(
                op="", kind="inexpressible" if e.check == "lowering" else "refused_edit", need=str(e)[:300],
                field=e.field, source=f"planner:{entry.id}", expected_change_pct=_expected_pct(entry),
                detail=entry.statement[:200]))
            return
        hyps = tuple(x.hypothesis(note=entry.id) for x in entry.expect)
        config = {**parent, **edited.config()}
        plan.edits.append(ScheduleProposal(edited, Proposal(config, hyps, (entry.id, *entry.cites), entry.id,
                                                            f"schedule edit: {entry.statement}", dict(parent))))

    def propose(self, parent_config: dict, evidence: Evidence, build: BuildResources | None, space: list[dict],
                kb: KnowledgeBase | None = None, **kw) -> list[Proposal]:
        """The Proposer protocol: `plan(...).proposals`."""
        return self.plan(parent_config, evidence, build, space, kb, **kw).proposals


def _describe_config(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items() if k != "template") or "the parent"


def _expected_pct(entry: Experience) -> float | None:
    lat = [e.magnitude for e in entry.expect if e.metric == "latency_us" and e.magnitude is not None]
    return lat[0] * 100 if lat else None


# -- ask/tell adapter ---------------------------------------------------------------------------------------

EvidenceFn = Callable[[dict], Any]
"""config -> None | evidence | (evidence, build): what is known about an evaluated configuration."""


class PlannerStrategy:
    """The rule planner as an ask/tell strategy over a finite space.

    `ask()` proposes from the best configuration told so far (lowest value) whose evidence the callback can
    provide and that has not been planned from yet; when no plan yields an unasked configuration it explores
    (and logs that in `events`): first a one-step neighbour of one of the three best configurations (one
    parameter moved to the adjacent value of its ordered values, the parameter picked by a seeded draw), then a
    seeded random permutation of the space. A rule whose proposals were not
    faster than their parents `limits.retire_after` times in a row (failed ones count) is retired: its queued
    proposals are dropped and later plans skip it (a `retire` event says so). The planner learns from its
    refuted hypotheses instead of spending the budget on them. `start` (a configuration of the
    space) is the first one asked. Never returns a configuration twice; returns None when the space is
    exhausted. Same seed, start, callback answers and tells => same trajectory.
    """

    name = "planner"

    def __init__(self, space: list[dict], seed: int = 0, *, evidence: EvidenceFn | None = None,
                 kb: KnowledgeBase | None = None, planner: RulePlanner | None = None,
                 axes: Mapping[str, int] | None = None, elem: int | None = None, start: dict | None = None,
                 schedule: Callable[[dict], Schedule | None] | None = None):
        self.space = [dict(c) for c in space]
        self.schedule_fn = schedule
        self.edits: list[ScheduleProposal] = []     # schedule edits planned, for the proposer to lower
        self._by_key = {_key(c): c for c in self.space}
        self.seed = seed
        self.evidence_fn = evidence
        self.planner = planner or RulePlanner(kb)
        self.kb = kb
        self.axes = dict(axes or {})
        self.elem = elem
        order = list(range(len(self.space)))
        random.Random(seed).shuffle(order)
        self._explore = order
        self._pos = 0
        self._rng = random.Random(seed + 1)
        self._orders = {p: _value_order(self.space, p) for p in sorted({k for c in self.space for k in c})}
        self._asked: set[str] = set()
        self._queue: list[Proposal] = []
        self._planned: set[str] = set()
        self.values: dict[str, float] = {}
        self.proposals: dict[str, Proposal] = {}
        self.history: list[tuple[dict, float | None]] = []
        self.events: list[dict] = []
        self._start: dict | None = None
        self._misses: dict[str, int] = {}
        self.retired: dict[str, str] = {}
        if start is not None:
            if _key(start) not in self._by_key:
                raise ValueError(f"start configuration {_key(start)} is not in the space")
            self._start = dict(self._by_key[_key(start)])

    def proposal_for(self, config: dict) -> Proposal | None:
        """The proposal that produced `config` (None when it came from exploration)."""
        return self.proposals.get(_key(config))

    def _evidence(self, config: dict) -> tuple[Evidence, BuildResources | None] | None:
        if self.evidence_fn is None:
            return None
        got = self.evidence_fn(dict(config))
        if got is None:
            return None
        if isinstance(got, tuple):
            return got[0], got[1]
        return got, None

    def _replan(self) -> None:
        """Plan from the best told configuration not planned from yet that has evidence; queue what is new."""
        ranked = sorted(self.values.items(), key=lambda kv: (kv[1], kv[0]))
        for key, _value in ranked:
            if key in self._planned or key not in self._by_key:
                continue
            got = self._evidence(self._config_of(key))
            if got is None:
                continue
            self._planned.add(key)
            parent = self._config_of(key)
            plan = self.planner.plan(parent, got[0], got[1], self.space, self.kb, axes=self.axes,
                                     elem=self.elem, exclude=frozenset(self._asked), retired=self.retired,
                                     schedule=self.schedule_fn(parent) if self.schedule_fn else None)
            self.edits += plan.edits
            self.events += [{"kind": "capability-gap", "gap": g.model_dump(mode="json")} for g in plan.gaps]
            fresh = [p for p in plan.proposals if _key(p.config) not in self._asked]
            self.events.append({"kind": "plan", "parent": self._config_of(key), "fired": plan.fired,
                                "proposed": len(fresh), "advice": plan.advice,
                                "not_evaluable": sorted(k for k, why in plan.skipped.items()
                                                        if why.startswith("not evaluable"))})
            if fresh or plan.edits:
                self._queue.extend(fresh)
                return

    def _config_of(self, key: str) -> dict:
        return self._by_key[key]

    def next_edit(self) -> ScheduleProposal | None:
        """A planned schedule edit not yet handed out (planning from the best parent first when nothing is queued)."""
        if not self.edits and not self._queue and self._start is None:
            self._replan()
        return self.edits.pop(0) if self.edits else None

    def ask(self) -> dict | None:
        if self._start is not None:
            start, self._start = self._start, None
            if _key(start) not in self._asked:
                self._asked.add(_key(start))
                return dict(start)
        if not self._queue:
            self._replan()
        while self._queue:
            p = self._queue.pop(0)
            k = _key(p.config)
            if k not in self._asked and k in self._by_key:
                self._asked.add(k)
                self.proposals[k] = p
                return dict(p.config)
            if not self._queue:
                self._replan()
        near = self._neighbour_of_best()
        if near is not None:
            self._asked.add(_key(near))
            self.events.append({"kind": "explore", "config": dict(near),
                                "reason": "no evidence-backed proposal left: a one-step neighbour of a best "
                                          "configuration"})
            return dict(near)
        while self._pos < len(self._explore):
            c = self.space[self._explore[self._pos]]
            self._pos += 1
            k = _key(c)
            if k not in self._asked:
                self._asked.add(k)
                if self.values:
                    self.events.append({"kind": "explore", "config": dict(c),
                                        "reason": "no evidence-backed proposal left"})
                return dict(c)
        return None

    def _neighbour_of_best(self, best: int = 3) -> dict | None:
        """An unasked configuration one step from one of the `best` lowest told ones along one parameter."""
        ranked = sorted(self.values.items(), key=lambda kv: (kv[1], kv[0]))[:best]
        for key, _value in ranked:
            base = self._by_key.get(key)
            if base is None:
                continue
            near = []
            for c in self.space:
                if set(c) != set(base) or _key(c) in self._asked:
                    continue
                diff = [p for p in c if c[p] != base[p]]
                if len(diff) != 1 or diff[0] == "template":
                    continue
                order = self._orders[diff[0]]
                if abs(order.index(c[diff[0]]) - order.index(base[diff[0]])) == 1:
                    near.append(c)
            if near:
                near.sort(key=_key)
                return near[self._rng.randrange(len(near))]
        return None

    def tell(self, config: dict, value: float | None) -> None:
        self.history.append((dict(config), value))
        ok = value is not None and math.isfinite(value)
        if ok:
            self.values[_key(config)] = float(value)
        p = self.proposals.get(_key(config))
        if p is None or not p.rule or p.rule in self.retired:
            return
        limits = self.planner.limits
        parent = self.values.get(_key(p.parent)) if p.parent is not None else None
        if ok and parent is not None and value > 0 and \
                ratio_verdict(parent / value, limits.miss_margin) is Comparison.FASTER:
            self._misses[p.rule] = 0
            return
        self._misses[p.rule] = self._misses.get(p.rule, 0) + 1
        if self._misses[p.rule] >= limits.retire_after:
            why = (f"{self._misses[p.rule]} proposals in a row were not faster than their parent beyond the "
                   f"{limits.miss_margin:.0%} band")
            self.retired[p.rule] = why
            dropped = [q for q in self._queue if q.rule == p.rule]
            self._queue = [q for q in self._queue if q.rule != p.rule]
            self.events.append({"kind": "retire", "rule": p.rule, "reason": why, "dropped": len(dropped)})


__all__ = ["EvidenceFn", "Plan", "ScheduleProposal", "PlannerLimits", "PlannerStrategy", "RulePlanner", "condition_holds", "neighbours"]
