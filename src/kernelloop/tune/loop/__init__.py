"""The controller and what it runs with (`Controller`, `RunOptions`); reads like DESIGN.md's loop:

    freeze(reference, verifier, workloads, environment)    -> manifest, hash checked before every evaluation
    for each workload: prune(space)                         -> counted reasons, archived as an event
    while budget left (round-robin over workloads):
        config  = proposer.ask()                            -> a trial already in the archive is replayed
        build   = build stage (CPU)                         -> static rules, static gate, compile ahead of the GPU
        gate decisions                                      -> archived, whether the candidate then ran or not
        result  = a device's worker: verify, time           -> verdict, measurement (PASSED only)
        archive(trial)                                      -> in submission order
        evidence (proposers that plan from it, PASSED only) -> profile or timing report, archived
        proposer.tell(trial)
    front per workload; compute-sanitizer over each winner on a small shape (findings: REJECTED, the next
    fastest is taken); confirm each winner against every baseline, interleaved

Every caller enters through `run` (entry.py: the options checked against the op and workloads, then the
controller). Modules: `entry.py` (run), `controller.py` (the loop), `options.py` (RunOptions, Progress),
`budget.py` (Budget, StopReason), `checks.py` (the options' checks against an op and its workloads), `freeze.py` (manifest, run key, resume),
`proposers.py` (Proposer, TemplateSearch), `pipeline.py` (build stage -> executor), `evidence.py` (for the planner),
`winners.py` (fronts, sanitizer, confirmation).
"""

from .budget import Budget, StopReason
from .controller import Controller
from .entry import run
from .options import (AS_BEFORE, EXECUTORS, GATE_MODES, KEPT, OPTIONS_FORMAT, PLANNER, RUN_KEYS, Progress, RunOptions,
                      strategy_names)
from .proposers import Proposer, TemplateSearch, trial_value
from .winners import CUDA_BASELINES, INTERPRET_BASELINES, OWN_SUBJECTS, op_baseline_names

__all__ = ["AS_BEFORE", "Budget", "CUDA_BASELINES", "Controller", "EXECUTORS", "GATE_MODES", "INTERPRET_BASELINES", "KEPT",
           "OPTIONS_FORMAT",
           "OWN_SUBJECTS", "PLANNER", "Progress", "Proposer", "RUN_KEYS", "RunOptions", "StopReason", "TemplateSearch",
           "op_baseline_names", "run", "strategy_names", "trial_value"]
