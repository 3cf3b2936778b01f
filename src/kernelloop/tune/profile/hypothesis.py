"""Hypotheses: what a proposal expects to move, and whether it moved (parent vs child).

CUDAMaster's caution made operational: a bottleneck class is a guess, so a proposal states which metrics it
expects to move and which way ("ROWS 1->4: sol_dram_pct up; latency_us down -20%"); after the child is
measured (and profiled), each expectation is confirmed, refuted or inconclusive. If latency fell but the
named metric did not move, the diagnosis was wrong even though the change helped, and the record says so.

Observations come from a ProfileReport (canonical metrics, roofline, build resources) and a Measurement
(`latency_us` = kernel-time median, with its confidence interval). Latency is compared by intervals: it
moved only if the child's interval lies entirely on one side of the parent's. Other metrics have no interval
and are compared with a relative noise band.

Text form (what `Candidate.hypothesis` holds): items separated by ';', each `METRIC up|down|same [+-N%]`,
e.g. `sol_dram_pct up; latency_us down -20%`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from ...core.bench.stats import ratio_verdict
from ...base.records import BuildResources, Comparison, Direction, Hypothesis, HypothesisOutcome, Measurement, ProfileReport
from ...base.records.measurement import SAME_MARGIN
from ...base.records.profile import LATENCY


@dataclass(frozen=True)
class Noise:
    """When a change counts as a move."""

    relative: float = SAME_MARGIN  # child/parent inside [1/(1+m), 1+m] is 'same' (the timing policy's band)
    magnitude_share: float = 1.0   # share of a predicted magnitude the observed change must reach


DEFAULT_NOISE = Noise()


@dataclass(frozen=True)
class Observation:
    """A value with an optional confidence interval."""

    value: float
    low: float | None = None
    high: float | None = None


def observations(report: ProfileReport | None = None, measurement: Measurement | None = None,
                 build: BuildResources | None = None) -> dict[str, Observation]:
    """Every comparable number of a trial: profile metrics, roofline, build resources, latency."""
    obs: dict[str, Observation] = {}
    if report is not None:
        if report.kernel is not None:
            for key, v in report.kernel.metrics.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    obs[key] = Observation(float(v))
        if report.roofline is not None:
            for key in ("fraction", "achieved_gbps", "achieved_tflops", "dram_ratio"):
                v = getattr(report.roofline, key)
                if v is not None:
                    obs["roofline_fraction" if key == "fraction" else key] = Observation(float(v))
        build = build or report.build
    if build is not None:
        for key in ("registers", "spills", "shared_bytes", "stack_bytes", "local_loads", "local_stores",
                    "instructions", "ldg128_fraction", "stg128_fraction"):
            v = getattr(build, key)
            if v is not None:
                obs[key] = Observation(float(v))
    if measurement is not None:
        k = measurement.kernel
        obs[LATENCY] = Observation(k.median_us, k.ci_low_us, k.ci_high_us)
        obs.setdefault("achieved_gbps", Observation(measurement.gbps))
    return obs


def _moved(parent: Observation, child: Observation, noise: Noise) -> tuple[Direction, str]:
    if None not in (parent.low, parent.high, child.low, child.high):
        if child.low > parent.high:
            return Direction.UP, "child's interval above the parent's"
        if child.high < parent.low:
            return Direction.DOWN, "child's interval below the parent's"
        return Direction.SAME, "intervals overlap"
    if parent.value == 0:
        if child.value == 0:
            return Direction.SAME, "both zero"
        return (Direction.UP if child.value > 0 else Direction.DOWN), "from zero"
    change = child.value / parent.value - 1
    moved = ratio_verdict(child.value / parent.value, noise.relative)
    if moved is Comparison.FASTER:          # the ratio child/parent above the band: the metric went up
        return Direction.UP, f"change {change:+.1%} beyond the {noise.relative:.0%} band"
    if moved is Comparison.SLOWER:
        return Direction.DOWN, f"change {change:+.1%} beyond the {noise.relative:.0%} band"
    return Direction.SAME, f"change {change:+.1%} within the {noise.relative:.0%} band"


def evaluate(h: Hypothesis, parent: dict[str, Observation], child: dict[str, Observation],
             noise: Noise = DEFAULT_NOISE) -> HypothesisOutcome:
    """The outcome of one hypothesis given parent and child observations."""
    p, c = parent.get(h.metric), child.get(h.metric)
    if p is None or c is None:
        side = " and ".join(s for s, o in (("parent", p), ("child", c)) if o is None)
        return HypothesisOutcome(hypothesis=h, parent=p.value if p else None, child=c.value if c else None,
                                 status="inconclusive", note=f"{h.metric} not observed in the {side}")
    change = c.value / p.value - 1 if p.value != 0 else None
    observed, how = _moved(p, c, noise)
    confirmed = observed is h.direction
    met = None
    if h.magnitude is not None:
        need = abs(h.magnitude) * noise.magnitude_share
        met = bool(confirmed and change is not None and (abs(change) >= need or math.isclose(abs(change), need)))
    return HypothesisOutcome(hypothesis=h, parent=p.value, child=c.value, change=change, observed=observed,
                             status="confirmed" if confirmed else "refuted", magnitude_met=met, note=how)


def evaluate_hypotheses(hypotheses: list[Hypothesis], parent: dict[str, Observation],
                        child: dict[str, Observation], noise: Noise = DEFAULT_NOISE) -> list[HypothesisOutcome]:
    """Outcomes of every hypothesis, in order."""
    return [evaluate(h, parent, child, noise) for h in hypotheses]


# -- text form ----------------------------------------------------------------------------------------------

_ITEM = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s+(up|down|same)(?:\s+([+-]?\d+(?:\.\d+)?)\s*%)?\s*")


def format_hypotheses(hypotheses: list[Hypothesis]) -> str:
    """The text form: 'metric direction [+-N%]' items joined by '; '."""
    parts = []
    for h in hypotheses:
        item = f"{h.metric} {h.direction.value}"
        if h.magnitude is not None:
            item += f" {h.magnitude * 100:+g}%"
        parts.append(item)
    return "; ".join(parts)


def parse_hypotheses(text: str) -> list[Hypothesis]:
    """Hypotheses from their text form or a JSON list of Hypothesis objects; [] for free prose.

    Raises ValueError when the text looks like the structured form but an item is malformed.
    """
    t = text.strip()
    if not t:
        return []
    if t.startswith("["):
        return [Hypothesis.model_validate(x) for x in json.loads(t)]
    items = [s for s in t.split(";") if s.strip()]
    matches = [_ITEM.fullmatch(s) for s in items]
    if not any(matches):
        return []
    bad = [s.strip() for s, m in zip(items, matches) if m is None]
    if bad:
        raise ValueError(f"malformed hypothesis item(s) {bad}; expected 'METRIC up|down|same [+-N%]'")
    return [Hypothesis(metric=m.group(1), direction=Direction(m.group(2)),
                       magnitude=float(m.group(3)) / 100 if m.group(3) else None) for m in matches]


__all__ = ["DEFAULT_NOISE", "LATENCY", "Noise", "Observation", "evaluate", "evaluate_hypotheses",
           "format_hypotheses", "observations", "parse_hypotheses"]
