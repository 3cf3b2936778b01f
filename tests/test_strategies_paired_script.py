"""benchmarks/strategies_paired.py: the paired bootstrap separates a real difference from seed noise, the sign test
is the exact binomial one, and the committed comparison is what the committed per-run packs give."""

import runpy
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NS = runpy.run_path(str(ROOT / "benchmarks" / "strategies_paired.py"))
RESULTS = ROOT / "benchmarks" / "results" / "2026-12-04-strategies-failures"


def test_paired_bootstrap_flags_a_shift_and_not_noise():
    rng = np.random.default_rng(0)
    a = rng.integers(10, 60, 40).astype(float)
    shifted = NS["paired"](a, a - 8, 2000, np.random.default_rng(1))
    assert shifted["diff"] == -8 and shifted["significant"] and shifted["ci95"][1] < 0
    assert shifted["b_ahead"] == 40 and shifted["sign_p"] < 1e-9
    noise = NS["paired"](a, rng.permutation(a), 2000, np.random.default_rng(1))
    assert noise["diff"] == 0 and not noise["significant"] and noise["ci95"][0] < 0 < noise["ci95"][1]


def test_sign_test_is_the_exact_binomial():
    assert NS["sign_test"](0, 0) == 1.0
    assert NS["sign_test"](5, 5) == 1.0
    assert abs(NS["sign_test"](7, 18) - 0.0433) < 1e-3      # 2 * P(X <= 7), X ~ Bin(25, 1/2)
    assert NS["sign_test"](0, 10) == 2 / 2 ** 10


def test_committed_comparison_is_reproduced_from_the_packs(tmp_path, capsys):
    packs = ["runs.jsonl.xz", "runs-40seeds.jsonl.xz", "runs-base-40seeds.jsonl.xz", "runs-ct065-40seeds.jsonl.xz"]
    argv = [x for p in packs for x in ("--runs", str(RESULTS / p))]
    for a, b in [("staged@4c7956c", "staged"), ("optuna-tpe", "staged"), ("staged@4c7956c", "staged@ct0.65"),
                 ("staged", "staged@ct0.65")]:
        argv += ["--pair", a, b]
    assert NS["main"](argv + ["--seeds", "40", "--out", str(tmp_path / "paired.md")]) == 0
    assert (tmp_path / "paired.md").read_text() == (RESULTS / "paired.md").read_text()
    assert NS["main"](["--runs", str(RESULTS / "runs.jsonl.xz"), "--pair", "nobody", "staged"]) == 1
