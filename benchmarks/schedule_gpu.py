"""GPU measurements of the typed schedules: the static gate's precision on real verdicts, and a schedule-level search
of GEMM against the hand-written Gluon templates. One command, on a GPU host (H200), results under --out:

    python3 benchmarks/schedule_gpu.py --out results/schedule-gpu [--budget 6]

1. Gate precision (`gate/`): every pruned configuration of the hand-written Gluon templates and of the templates
   generated from their schedules on fp16 4096^3, plus schedule edits the gate rejects that still launch (an MMA's
   slot released while it reads it; the data's wait on the wrong parity; a ring one stage deeper than shared memory
   allows), each gated ahead of time in audit mode (recorded, not enforced) and then run through the loop's verifier
   on the GPU. `gate-precision.json`: passed-then-failed by verdict, rejected-yet-passed (kernelloop.gate.precision).
2. Schedule-level search: `kernelloop optimize gemm` restricted to the Gluon and schedule templates on the op's GPU
   workloads with --budget evaluations per workload; `search.json` is the run's summary (best per workload, which
   template won). The archives are kept in the folder.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from kernelloop.builtin import ops_dir
from kernelloop.device import device_properties
from kernelloop.execute.evaluate import Timeouts
from kernelloop.extend.regress import TaskProposer
from kernelloop.gate import gate, precision, record_decision
from kernelloop.loop import Controller, RunOptions
from kernelloop.records import Candidate, Workload
from kernelloop.schedule.library import gluon_ws
from kernelloop.schedule.lower import lower
from kernelloop.schedule.patch import apply_patch
from kernelloop.spec import load_op
from kernelloop.spec.aot import build_configs
from kernelloop.spec.space import prune

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
    bundle = load_op(ops_dir() / "gemm")
    w = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")
    cands = candidates(bundle, w)
    decisions = [gate(c, None, workload=w) for c in cands]          # the schedules' checks, no build
    todo = [i for i, d in enumerate(decisions) if d.passed]           # the rest built for sm_90 in one batch
    files = {t.name: bundle.folder / t.file for t in bundle.spec.templates}
    outs = build_configs(bundle.spec, files, w, [{"template": cands[i].template, **cands[i].config} for i in todo],
                         jobs=16)
    for i, o in zip(todo, outs):
        decisions[i] = gate(cands[i], o, workload=w)
    decisions = [d.model_copy(update={"enforced": False}) for d in decisions]
    proposer = TaskProposer({w.id: cands})
    opts = RunOptions(device="cuda", budget_evals=len(cands), confirm=False, sanitize=False, checks=2,
                      timeouts=Timeouts(check=120.0, bench=300.0))
    run_dir = out / "gate-run"
    run_id = Controller(bundle, [w], opts, run_dir, proposer=proposer).run().run_id
    from kernelloop.archive import Archive
    with Archive(run_dir / "archive.sqlite") as a:
        for d in decisions:
            record_decision(a, run_id, d)
        p = precision(a, run_id)
    rows = [{"candidate": c.label, "hypothesis": c.hypothesis, "gate": d.passed, "findings": d.message(),
             "gpu": proposer.trials[(c.id, w.id)].verdict.status.value if (c.id, w.id) in proposer.trials else None}
            for c, d in zip(cands, decisions)]
    result = {"precision": p.model_dump(mode="json"), "pass_precision": p.pass_precision,
              "reject_precision": p.reject_precision, "candidates": rows}
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
