"""The evidence an LLM proposer is shown names its figures as `show --json` does."""

from pathlib import Path

import kernelloop
from kernelloop.core.archive import Archive
from kernelloop.tune.propose.llm.context import Outcome

ARCHIVE = Path(__file__).resolve().parents[2] / "fixtures" / "archives" / "h200-layernorm-planner.sqlite.xz"


def test_evidence_names_the_fraction_and_the_speedup_as_show_does():
    run = kernelloop.Run.load(ARCHIVE)
    w = next(w for w in run.workloads if w.best is not None)
    t = next(t for t in run.trials(workload=w.id) if t.id == w.best.trial)
    with Archive(run.path, readonly=True) as a:
        cand, wl = a.get_candidate(t.candidate_id), a.get_workload(t.workload_id)
    e = Outcome(cand, wl, t).evidence()
    assert e["roofline_fraction"] == round(w.best.search.roofline_fraction, 3) and "copy_fraction" not in e
    assert e["speedup_vs_eager"]["speedup"] == round(w.best.search.speedups["eager"].speedup, 3)
