"""A recorded search space: every configuration of a (pruned) space with its measured objective."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..search.encoding import config_key


@dataclass
class RecordedSpace:
    """Configurations and what measuring them gave. Lower objective is better.

    `values[i]` is the objective of `configs[i]` (e.g. kernel time), or None when it failed to compile, verify
    or run; `statuses[i]` says why ("ok" for a measured one). `costs[i]`, where the recording has it, is what
    evaluating `configs[i]` cost in GPU seconds (compile, verification and timing as measured; a failure's cost
    is what was spent before it failed); empty when the recording has no costs.
    """

    name: str
    configs: list[dict]
    values: list[float | None]
    statuses: list[str]
    objective: str = "time"
    params: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    costs: list[float | None] = field(default_factory=list)

    def __post_init__(self):
        if not (len(self.configs) == len(self.values) == len(self.statuses)):
            raise ValueError("configs, values and statuses must have the same length")
        if self.costs and len(self.costs) != len(self.configs):
            raise ValueError("costs, when given, must have one entry per configuration")
        self._index = {config_key(c): i for i, c in enumerate(self.configs)}
        if len(self._index) != len(self.configs):
            raise ValueError(f"{self.name}: duplicate configurations in the recording")

    def __len__(self) -> int:
        return len(self.configs)

    def index(self, config: dict) -> int:
        """Row of a configuration; KeyError when the recording does not have it."""
        return self._index[config_key(config)]

    def lookup(self, config: dict) -> float | None:
        """The recorded objective of a configuration (None = it failed); KeyError if it is not recorded."""
        return self.values[self.index(config)]

    def cost(self, config: dict) -> float | None:
        """GPU seconds the recording spent on a configuration (None when it has no costs)."""
        return self.costs[self.index(config)] if self.costs else None

    def status(self, config: dict) -> str:
        return self.statuses[self.index(config)]

    @property
    def has_costs(self) -> bool:
        return bool(self.costs) and all(c is not None for c in self.costs)

    @property
    def valid_values(self) -> np.ndarray:
        """Objectives of the configurations that did not fail, ascending."""
        return np.sort(np.array([v for v in self.values if v is not None], dtype=np.float64))

    @property
    def optimum(self) -> float:
        vals = self.valid_values
        if vals.size == 0:
            raise ValueError(f"{self.name}: no configuration in the recording succeeded")
        return float(vals[0])

    @property
    def n_failed(self) -> int:
        return sum(v is None for v in self.values)

    def valid_only(self) -> "RecordedSpace":
        """The space a tuner sees when failures are known in advance (Kernel Tuner's tune_cache does this)."""
        keep = [i for i, v in enumerate(self.values) if v is not None]
        return RecordedSpace(self.name, [self.configs[i] for i in keep], [self.values[i] for i in keep],
                             [self.statuses[i] for i in keep], self.objective, list(self.params), dict(self.meta),
                             [self.costs[i] for i in keep] if self.costs else [])
