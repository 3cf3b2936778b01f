"""Cost-aware budgets: GPU seconds instead of evaluation counts, and a cheap screen with successive halving.

The strategy side of issue 32, item 2. A strategy is told what each evaluation cost (`tell(..., costs=...)`, GPU
seconds of compile, verification and timing as measured; a failure costs what was spent before it failed) and
keeps the sum in `spent_s`. Two pieces the controller drives:

- `GpuBudget(seconds)`: `charge(costs)` after each evaluation, `exhausted` when the GPU seconds are spent (a count
  budget stays available beside it: whichever ends first ends the search).
- `SuccessiveHalving`: every candidate is built and verified in full (verification is never screened); its timing
  starts with `screen_samples` samples. `promote(screen_value)` says whether it earns full timing: yes while fewer
  than `min_screened` candidates were screened; yes when it could win (within `margin` of the best full-timed
  value: screen noise must not hide a winner); otherwise only when it is in the best 1/`eta` of the screen values
  seen so far (the rung rule of successive halving, as in Optuna's SuccessiveHalvingPruner, over one rung). A
  candidate not promoted is told its screen value (a valid, noisier measurement) with status "SCREENED", so the
  search learns from it without paying full timing.
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
