"""A run's budget (`Budget`: evaluations per workload, wall seconds, GPU seconds; `Budget.parse` reads the
`--budget` text) and why a search stopped (`StopReason`)."""

from __future__ import annotations

import re

from pydantic import Field

from ...base.records import Record
from ...base.records.device import Device
from ...base.records.run import StopReason
from ...base.usage import UsageError

GRAMMAR = "use N evaluations per workload, a duration like 90s/10m/1h, GPU time like gpu:300s, or several: 40,10m"
UNITS = {"s": 1, "m": 60, "h": 3600}


class Budget(Record):
    """Whichever is spent first ends the search; a part left None does not limit it (all None: the proposers'
    spaces end the search)."""

    evals: int | None = Field(24, gt=0, description="Evaluations per workload.")
    seconds: float | None = Field(None, gt=0, description="Wall time of this invocation's search, seconds.")
    gpu_seconds: float | None = Field(None, gt=0, description="Compile + verification + timing seconds of the "
                                                               "run's trials, as measured.")

    @classmethod
    def default(cls, device: str | Device) -> "Budget":
        """24 evaluations per workload on cuda, 8 in the interpreter."""
        return cls(evals=24 if Device.of(str(device)).is_cuda else 8)

    @classmethod
    def unlimited(cls) -> "Budget":
        """No limit: the proposer's candidates end the search (agent submissions, regressions, the LLM proposer)."""
        return cls(evals=None)

    @classmethod
    def parse(cls, budget: "int | str | Budget | None", device: str | Device,
              gpu_seconds: float | None = None, gpu_flag: str = "gpu_seconds", flag: str = "budget") -> "Budget":
        """Comma-separated parts: N evaluations, a wall-time duration ('90s', '10m', '1h') and GPU time
        'gpu:DURATION' ('gpu:300s', 'gpu:5m'), e.g. '40,10m,gpu:5m'; an int is evaluations. None: the default for
        the device. `gpu_seconds` (the separate GPU-seconds argument) joins it; given twice is a UsageError."""
        if isinstance(budget, Budget):
            parsed = budget
        elif budget is None:
            parsed = cls.default(device)
        elif isinstance(budget, int) and not isinstance(budget, bool):
            if budget <= 0:
                raise UsageError(f"budget {budget}: evaluations per workload must be positive")
            parsed = cls(evals=budget)
        else:
            parsed = cls._parse_text(str(budget))
        if gpu_seconds is None:
            return parsed
        if parsed.gpu_seconds is not None:
            raise UsageError(f"the GPU budget is given twice ({gpu_flag} and a 'gpu:' part of {flag}): give it once")
        if not gpu_seconds > 0:
            raise UsageError(f"{gpu_flag} {gpu_seconds}: seconds must be positive")
        return parsed.model_copy(update={"gpu_seconds": float(gpu_seconds)})

    @classmethod
    def _parse_text(cls, budget: str) -> "Budget":
        values: dict[str, float | int] = {}
        for part in filter(None, (p.strip() for p in budget.split(","))):
            m = re.fullmatch(r"(gpu:)?(\d+(?:\.\d+)?)([smh])", part)
            if m and float(m.group(2)) > 0:
                key, value = ("gpu_seconds" if m.group(1) else "seconds"), float(m.group(2)) * UNITS[m.group(3)]
            elif part.isdigit() and int(part) > 0:
                key, value = "evals", int(part)
            else:
                raise UsageError(f"budget {part!r}: {GRAMMAR}")
            if key in values:   # the last one silently won: '1,2' ran 2 evaluations
                kind = {"evals": "evaluations", "seconds": "wall time", "gpu_seconds": "GPU time"}[key]
                raise UsageError(f"budget {budget!r}: {kind} given twice; give each kind of budget once")
            values[key] = value
        if not values:
            raise UsageError(f"budget {budget!r}: {GRAMMAR}")
        return cls(**{"evals": None, **values})

    def as_tuple(self) -> tuple[int | None, float | None, float | None]:
        return self.evals, self.seconds, self.gpu_seconds


__all__ = ["Budget", "StopReason"]
