"""Recorded search spaces and their replay: strategies compared on a CPU against measurements made once on a GPU.

- `space`: the RecordedSpace record (configurations, their measured objective, failures);
- `kt_cache`: reader of Kernel Tuner cache files (JSON, compressed — .xz or .gz — or not, closed or still open);
- `space_file`: kernelloop's own format, written by `kernelloop record`;
- `runner`: the replay executor — the controller's ask/evaluate/tell logic served from a recording;
- `metrics`: best-so-far curves, evaluations to within x % of the optimum, P@k, the methodology score.
"""

from .load import load_space, merge_spaces
from .metrics import (best_so_far, evals_to_within, fraction_of_optimum, methodology_score, random_curve,
                      score_range)
from .runner import ReplayError, Trajectory, replay
from .space import RecordedSpace

__all__ = ["RecordedSpace", "ReplayError", "Trajectory", "best_so_far", "evals_to_within", "fraction_of_optimum",
           "load_space", "merge_spaces", "methodology_score", "random_curve", "replay", "score_range"]
