"""GPU measurements of the typed schedules: the static gate's precision on real verdicts, and a schedule-level search
of GEMM against the hand-written Gluon templates. One command, on a GPU host (H200), results under --out:

    python3 benchmarks/schedule_gpu.py --out results/schedule-gpu [--budget 6]

1. Gate precision (`tune/gate/`): every pruned configuration of the hand-written Gluon templates and of the templates
   generated from their schedules on fp16 4096^3, plus schedule edits the gate rejects that still launch (an MMA's
   slot released while it reads it; the data's wait on the wrong parity; a ring one stage deeper than shared memory
   allows), run through the loop with its static gate in audit mode (`--gate audit`: the schedule checked, then the
   build stage's sm_90 build checked, the decision archived and not enforced) and then verified on the GPU.
   `gate-precision.json`: passed-then-failed by verdict, rejected-yet-passed (kernelloop.tune.gate.precision).
2. Schedule-level search: `kernelloop optimize gemm` restricted to the Gluon and schedule templates on the op's GPU
   workloads with --budget evaluations per workload; `search.json` is the run's summary (best per workload, which
   template won), with the gate on as in any run; `search-gate.json` is its `kernelloop gate precision --json`. The
   archives are kept in the folder.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import device_properties
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.deliver.extend.regress import TaskProposer
from kernelloop.tune.gate import decisions, precision
from kernelloop.tune.loop import Controller, RunOptions
from kernelloop.base.records import Candidate, Workload
from kernelloop.tune.schedule.library import gluon_ws
from kernelloop.tune.schedule.lower import lower
from kernelloop.tune.schedule.patch import apply_patch
from kernelloop.core.spec import load_op
from kernelloop.core.spec.space import prune

TEMPLATES = ["gluon_ws", "gluon_subtiled", "gluon_pingpong", "schedule_ws", "schedule_subtiled", "schedule_pingpong"]
UNSAFE = {   # schedule edits the gate rejects, which launch on a GPU all the same (no deadlock)
    "release-while-reading": [{"op": "replace", "path": "/roles/0/k_step/2/pending", "value": 2}],
    "wrong-ready-parity": [{"op": "replace", "path": "/roles/0/k_step/0/parity", "value": "phase^1"}],
}


def candidates(bundle, w):
    props = device_properties("cuda")
    out = []
    for t in bundle.spec.templates:
        if t.name in TEMPLATES:
            out += [Candidate(op="gemm", template=t.name, source=bundle.template_sources[t.name], config=c,
                              proposer="schedule_gpu") for c in prune(t, w, props)[0]]
    base = {**gluon_ws().config(), "EPILOGUE": "none", "TRANS_B": 0}
    for name, patch in UNSAFE.items():
        broken = apply_patch(gluon_ws(), patch, name=name.replace("-", "_"))
        out.append(Candidate(op="gemm", template="schedule", source=lower(broken),
                             config=base, proposer="schedule_gpu", hypothesis=name))
    deeper = dict(base, num_stages=4)   # 4 stages of 128x256 with the whole tile staged: over shared memory
    out.append(Candidate(op="gemm", template="schedule_ws", source=bundle.template_sources["schedule_ws"],
                         config=deeper, proposer="schedule_gpu", hypothesis="over-shared-memory"))
    return out


def gate_precision(out: Path) -> dict:
    """The loop in audit mode (`gate="audit"`): each candidate's schedule checked, then its build by the build stage
    checked (no second compile), every decision archived, and every candidate run on the GPU all the same."""
    bundle = load_op(ops_dir() / "gemm")
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    cands = candidates(bundle, w)
    proposer = TaskProposer({w.id: cands})
    opts = RunOptions(device="cuda", budget_evals=len(cands), confirm=False, sanitize=False, checks=2,
                      timeouts=Timeouts(check=120.0, bench=300.0), gate="audit")
    run_dir = out / "gate-run"
    run_id = Controller(bundle, [w], opts, run_dir, proposer=proposer).run().run_id
    from kernelloop.core.archive import Archive
    with Archive(run_dir / "archive.sqlite") as a:
        decided = {d.candidate_id: d for d in decisions(a, run_id)}
        p = precision(a, run_id)
    rows = [{"candidate": c.label, "hypothesis": c.hypothesis,
             "gate": decided[c.id].passed if c.id in decided else None,
             "checked": decided[c.id].checked if c.id in decided else None,
             "findings": decided[c.id].message() if c.id in decided else "no decision",
             "gpu": proposer.trials[(c.id, w.id)].verdict.status.value if (c.id, w.id) in proposer.trials else None}
            for c in cands]
    result = {"precision": p.model_dump(mode="json"), "candidates": rows}
    (out / "gate-precision.json").write_text(json.dumps(result, indent=1))
    return result


def search(out: Path, budget: int) -> None:
    run = out / "search-run"
    cmd = [sys.executable, "-m", "kernelloop.cli.app", "optimize", "gemm", "--budget", str(budget), "--out", str(run)]
    for t in TEMPLATES:
        cmd += ["--template", t]
    subprocess.run(cmd, check=False)
    show = subprocess.run([sys.executable, "-m", "kernelloop.cli.app", "show", str(run), "--json"], capture_output=True,
                          text=True)
    (out / "search.json").write_text(show.stdout)
    gated = subprocess.run([sys.executable, "-m", "kernelloop.cli.app", "gate", "precision", str(run), "--json"],
                           capture_output=True, text=True)
    (out / "search-gate.json").write_text(gated.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=6, help="evaluations per workload of the search")
    ap.add_argument("--skip-search", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = gate_precision(args.out)
    print(json.dumps({k: v for k, v in result.items() if k != "candidates"}, indent=1))
    if not args.skip_search:
        search(args.out, args.budget)


if __name__ == "__main__":
    main()
