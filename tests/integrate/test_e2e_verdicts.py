"""e2e's top-1 judgement: a position is decisive only when its original top-2 gap exceeds twice the observed
max |diff| (each of the two logits may move by max |diff|)."""

import torch

from kernelloop.deliver.integrate.e2e import Tolerance, compare


def test_a_gap_under_twice_max_diff_is_a_near_tie_not_a_flip():
    # position 0: gap 0.003 between max|diff| (0.002) and twice it; the patched logits swap the top two
    a = torch.tensor([[1.0, 0.997, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[0.998, 0.999, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)
    check = compare(a, b, 0, Tolerance(min_cosine=0.99))
    assert abs(check.max_abs - 0.002) < 1e-12
    assert check.top1 == 0.5 and check.ties == 1 and check.top1_decisive == 1.0 and check.passed


def test_a_gap_over_twice_max_diff_is_decisive():
    a = torch.tensor([[1.0, 0.995, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)   # gap 0.005 > 2 x 0.002
    b = torch.tensor([[0.998, 0.997, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)
    check = compare(a, b, 0, Tolerance(min_cosine=0.99))
    assert check.ties == 0 and check.top1_decisive == 1.0 and check.passed
    # max|diff| 0.0035: the same gap 0.005 is now under twice it, a near-tie
    flipped = torch.tensor([[0.998, 0.9985, 0.0], [5.0, 0.0, 0.0]], dtype=torch.float64)
    assert compare(a, flipped, 0, Tolerance(min_cosine=0.99)).ties == 1
