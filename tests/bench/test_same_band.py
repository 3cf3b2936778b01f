"""The SAME band is defined once (records.measurement.SAME_MARGIN) and applied by one rule (bench.stats.verdict_for):
no module keeps a band of its own, and every user of a ratio words it the way the rule decides."""

import re
from pathlib import Path

import pytest

from kernelloop.core.bench.stats import ratio_verdict, verdict_for
from kernelloop.tune.profile.hypothesis import DEFAULT_NOISE, Noise, Observation, _moved
from kernelloop.tune.propose.planner import PlannerLimits
from kernelloop.base.records import Comparison, Direction
from kernelloop.base.records.measurement import SAME_MARGIN, TimingPolicy

SRC = Path(__file__).resolve().parents[2] / "src" / "kernelloop"


def test_no_module_defines_a_band_of_its_own():
    own = re.compile(r"margin\s*=\s*0\.\d|MARGIN\s*=\s*0\.\d|1\s*[-+]\s*MARGIN|relative:\s*float\s*=\s*0\.\d")
    found = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py") for i, line in
             enumerate(p.read_text().splitlines(), 1) if own.search(line) and "SAME_MARGIN =" not in line]
    assert not found, found


def test_every_default_band_is_the_policy_default():
    fields = TimingPolicy.model_fields
    assert fields["margin"].default == SAME_MARGIN
    assert DEFAULT_NOISE.relative == SAME_MARGIN
    assert PlannerLimits().miss_margin == SAME_MARGIN


@pytest.mark.parametrize("r, expected", [
    (1 + SAME_MARGIN + 1e-9, Comparison.FASTER), (1 + SAME_MARGIN, Comparison.SAME), (1.0, Comparison.SAME),
    (1 / (1 + SAME_MARGIN), Comparison.SAME), (1 / (1 + SAME_MARGIN) - 1e-9, Comparison.SLOWER)])
def test_a_point_estimate_is_the_interval_of_one_point(r, expected):
    assert ratio_verdict(r) is expected is verdict_for(r, r)


@pytest.mark.parametrize("child, expected", [(1.03, Direction.UP), (1.01, Direction.SAME), (0.985, Direction.SAME),
                                             (0.97, Direction.DOWN)])
def test_a_hypothesis_moves_by_the_same_rule(child, expected):
    direction, why = _moved(Observation(1.0), Observation(child), Noise())
    assert direction is expected and "2% band" in why
