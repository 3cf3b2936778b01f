"""Cost-aware budgets: GPU seconds instead of evaluation counts, and a cheap screen with successive halving.

A strategy is told what each evaluation cost (`tell(..., costs=...)`, GPU seconds of compile, verification and
timing as measured; a failure costs what was spent before it failed) and keeps the sum in `spent_s`. The pieces
the controller drives:

- `GpuBudget(seconds)`: `charge(costs)` after each evaluation, `exhausted` when the GPU seconds are spent (a count
  budget stays available beside it: whichever ends first ends the search).
- `SuccessiveHalving`: every candidate is built and verified in full (verification is never screened); its timing
  starts with `screen_samples` samples. `promote(screen_value)` says whether it earns full timing: yes while fewer
  than `min_screened` candidates were screened; yes when it could win (within `margin` of the best full-timed
  value: screen noise must not hide a winner); otherwise only when it is in the best 1/`eta` of the screen values
  seen so far (the rung rule of successive halving, as in Optuna's SuccessiveHalvingPruner, over one rung). A
  candidate not promoted keeps its screen measurement (a valid, noisier one, labelled by its timing policy's
  name) and the strategy learns from it without paying full timing.
- `Screening(samples)`: which candidates are screened at all. A candidate the strategy's model ranks in its best
  1/`eta` (`rank(config)`, the predicted quantile among the values told so far; `Staged` has one) is timed in
  full at once; any other (and every candidate of a strategy without a model) is screened, with one
  `SuccessiveHalving` per workload.
"""

from __future__ import annotations

import bisect
import math


class GpuBudget:
    """A budget in GPU seconds."""

    def __init__(self, seconds: float):
        if not seconds > 0:
            raise ValueError(f"a GPU-second budget must be positive, got {seconds}")
        self.seconds = float(seconds)
        self.spent = 0.0
        self.evaluations = 0

    def charge(self, costs: float | dict | None) -> None:
        from .base import cost_seconds

        self.spent += cost_seconds(costs) or 0.0
        self.evaluations += 1

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.seconds

    @property
    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)


class SuccessiveHalving:
    """One-rung successive halving between a screen (few timing samples) and full timing."""

    def __init__(self, eta: int = 3, margin: float = 0.05, min_screened: int = 4, screen_samples: int = 3):
        if eta < 2:
            raise ValueError("eta must be at least 2")
        self.eta = eta
        self.margin = margin
        self.min_screened = min_screened
        self.screen_samples = screen_samples
        self._screened: list[float] = []
        self.best_full = math.inf
        self.promoted = 0
        self.stopped = 0

    def promote(self, screen_value: float) -> bool:
        """Whether a candidate whose screen gave `screen_value` (lower is better) gets full timing."""
        bisect.insort(self._screened, screen_value)
        ok = (len(self._screened) <= self.min_screened
              or screen_value <= self.best_full * (1.0 + self.margin)
              or self._screened.index(screen_value) < max(1, len(self._screened) // self.eta))
        if ok:
            self.promoted += 1
        else:
            self.stopped += 1
        return ok

    def full(self, value: float | None) -> None:
        """The full timing of a promoted candidate (None when it failed there)."""
        if value is not None and value < self.best_full:
            self.best_full = value

    def as_dict(self) -> dict:
        return {"eta": self.eta, "margin": self.margin, "screen_samples": self.screen_samples,
                "screened": len(self._screened), "promoted": self.promoted, "stopped": self.stopped}


class Screening:
    """Per workload: whether a candidate is screened before full timing, and the successive halving it goes through."""

    def __init__(self, samples: int, eta: int = 3, margin: float = 0.05, min_screened: int = 4):
        if samples < 3:
            raise ValueError(f"a screen needs at least 3 timing samples, got {samples}")
        self.samples = samples
        self.eta = eta
        self.margin = margin
        self.min_screened = min_screened
        self.halving: dict[str, SuccessiveHalving] = {}
        self.direct = 0      # candidates timed in full at once (ranked in the model's best 1/eta)

    def gate(self, workload_id: str, rank: float | None) -> SuccessiveHalving | None:
        """The workload's halving when a candidate of predicted quantile `rank` (None: no model) is screened; None
        when it is timed in full at once."""
        if rank is not None and rank <= 1.0 / self.eta:
            self.direct += 1
            return None
        if workload_id not in self.halving:
            self.halving[workload_id] = SuccessiveHalving(self.eta, self.margin, self.min_screened, self.samples)
        return self.halving[workload_id]

    def full(self, workload_id: str, value: float | None) -> None:
        """A full timing's value on the workload (every halving compares screens against the best of these)."""
        if workload_id not in self.halving:
            self.halving[workload_id] = SuccessiveHalving(self.eta, self.margin, self.min_screened, self.samples)
        self.halving[workload_id].full(value)

    def as_dict(self) -> dict:
        return {"samples": self.samples, "eta": self.eta, "margin": self.margin, "direct": self.direct,
                "workloads": {w: h.as_dict() for w, h in self.halving.items()}}
