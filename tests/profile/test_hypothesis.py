"""Hypotheses: records, text form, and the parent-vs-child evaluator."""

import pytest
from pydantic import ValidationError

from kernelloop.tune.profile.hypothesis import (LATENCY, Noise, Observation, evaluate, evaluate_hypotheses,
                                           format_hypotheses, observations, parse_hypotheses)
from kernelloop.base.records import BuildResources, Direction, Hypothesis, KernelProfile, ProfileReport

D = Direction


def test_magnitude_must_agree_with_direction():
    Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=-0.2)
    with pytest.raises(ValidationError, match="contradicts"):
        Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=0.2)
    with pytest.raises(ValidationError, match="no magnitude"):
        Hypothesis(metric=LATENCY, direction=D.SAME, magnitude=0.1)


def test_latency_is_compared_by_intervals():
    parent = {LATENCY: Observation(25.0, 24.8, 25.2)}
    faster = {LATENCY: Observation(20.0, 19.9, 20.1)}
    overlapping = {LATENCY: Observation(24.9, 24.7, 25.1)}
    h = Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=-0.2)
    o = evaluate(h, parent, faster)
    assert o.status == "confirmed" and o.observed is D.DOWN and o.change == pytest.approx(-0.2)
    assert o.magnitude_met is True
    o = evaluate(h, parent, overlapping)
    assert o.status == "refuted" and o.observed is D.SAME and o.magnitude_met is False and "overlap" in o.note
    slower = evaluate(Hypothesis(metric=LATENCY, direction=D.UP), parent, {LATENCY: Observation(26, 25.9, 26.1)})
    assert slower.status == "confirmed" and slower.magnitude_met is None


def test_magnitude_not_reached():
    o = evaluate(Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=-0.2),
                 {LATENCY: Observation(25.0, 24.8, 25.2)}, {LATENCY: Observation(22.0, 21.9, 22.1)})
    assert o.status == "confirmed" and o.magnitude_met is False
    lenient = evaluate(Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=-0.2),
                       {LATENCY: Observation(25.0, 24.8, 25.2)}, {LATENCY: Observation(22.0, 21.9, 22.1)},
                       Noise(magnitude_share=0.5))
    assert lenient.magnitude_met is True


@pytest.mark.parametrize("parent, child, observed", [(60.0, 70.0, D.UP), (60.0, 60.6, D.SAME), (60.0, 50.0, D.DOWN),
                                                     (0.0, 3.0, D.UP), (0.0, 0.0, D.SAME)])
def test_metrics_without_intervals_use_the_noise_band(parent, child, observed):
    o = evaluate(Hypothesis(metric="sol_dram_pct", direction=D.UP), {"sol_dram_pct": Observation(parent)},
                 {"sol_dram_pct": Observation(child)})
    assert o.observed is observed and o.status == ("confirmed" if observed is D.UP else "refuted")


def test_noise_band_is_a_parameter():
    p, c = {"x": Observation(100.0)}, {"x": Observation(103.0)}
    assert evaluate(Hypothesis(metric="x", direction=D.UP), p, c).observed is D.UP
    assert evaluate(Hypothesis(metric="x", direction=D.UP), p, c, Noise(relative=0.05)).observed is D.SAME


def test_unobserved_is_inconclusive_never_confirmed():
    outs = evaluate_hypotheses([Hypothesis(metric="sol_dram_pct", direction=D.UP),
                                Hypothesis(metric=LATENCY, direction=D.DOWN)],
                               {LATENCY: Observation(25.0, 24.0, 26.0)}, {"sol_dram_pct": Observation(80.0)})
    assert [o.status for o in outs] == ["inconclusive", "inconclusive"]
    assert "parent" in outs[0].note and "child" in outs[1].note


def test_observations_collect_profile_build_and_roofline():
    kp = KernelProfile(kernel="k", source="csv", metrics={"sol_dram_pct": 62.0, "kind": "x"})
    rep = ProfileReport(trial_id="t", kernel=kp, build=BuildResources(registers=40, global_loads={128: 2, 16: 2}))
    obs = observations(rep)
    assert obs["sol_dram_pct"].value == 62.0 and "kind" not in obs
    assert obs["registers"].value == 40.0 and obs["ldg128_fraction"].value == 0.5
    assert LATENCY not in obs


def test_text_form_round_trip():
    hs = [Hypothesis(metric="sol_dram_pct", direction=D.UP),
          Hypothesis(metric=LATENCY, direction=D.DOWN, magnitude=-0.2)]
    text = format_hypotheses(hs)
    assert text == "sol_dram_pct up; latency_us down -20%"
    assert [(h.metric, h.direction, h.magnitude) for h in parse_hypotheses(text)] == \
        [("sol_dram_pct", D.UP, None), (LATENCY, D.DOWN, pytest.approx(-0.2))]
    assert parse_hypotheses("rows per program 1->4 should help") == []   # prose: nothing structured
    assert parse_hypotheses("") == []
    with pytest.raises(ValueError, match="malformed"):
        parse_hypotheses("sol_dram_pct up; latency faster")
    as_json = "[" + ",".join(h.to_json() for h in hs) + "]"
    assert parse_hypotheses(as_json) == hs
