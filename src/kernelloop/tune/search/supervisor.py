"""The stagnation supervisor: notices when a search stopped improving and says so, once per episode.

"Stagnation" is no improvement of the best value by more than `min_improvement` (relative, the noise level
of a measurement: 1 % by default) within `patience` evaluations. The search that owns the supervisor decides
what to do (polish the incumbent's neighbourhood, jump to another region); every intervention is appended to
the owner's `events`, so the archive keeps what was forced and why.
"""

from __future__ import annotations

import math


class Supervisor:
    """Counts evaluations since the last real improvement."""

    def __init__(self, patience: int = 20, min_improvement: float = 0.01):
        self.patience = patience
        self.min_improvement = min_improvement
        self.reference = math.inf        # best value at the last real improvement
        self.since = 0                   # evaluations since then (or since the last intervention)
        self.interventions = 0

    def observe(self, value: float | None) -> None:
        """Account for one evaluation (None = failed)."""
        if value is not None and (not math.isfinite(self.reference)
                                  or value < self.reference * (1.0 - self.min_improvement)):
            self.reference = value
            self.since = 0
        else:
            if value is not None and value < self.reference:
                self.reference = min(self.reference, value)   # a small gain: keep counting, track the best
            self.since += 1

    @property
    def stagnating(self) -> bool:
        return self.since >= self.patience

    def intervened(self) -> None:
        """The owner acted; give the new direction a full `patience` before judging it."""
        self.since = 0
        self.interventions += 1
