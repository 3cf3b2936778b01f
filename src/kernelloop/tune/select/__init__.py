"""Selection over trials: best per workload and Pareto fronts."""

from .pareto import best_per_workload, front_for_workload, pareto_front, runner_up_per_workload

__all__ = ["best_per_workload", "front_for_workload", "pareto_front", "runner_up_per_workload"]
