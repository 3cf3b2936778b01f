"""Realise one plan as a verified kernelloop op: write its folder, then either reuse the pattern table's
realisation (re-verified on this model's shapes, no search) or search its template's space with the ordinary loop.

    r = realise(plan, op, steps, operands, options, table=PatternTable(...))     # a Realisation

The table path: the entry must be usable and its conditions met (same template source, a verified dtype and
scalar names, the alignment facts it was verified under, its configuration not pruned on the new shapes); then a
loop run whose only proposer is `TableProposer` -- the entry's candidate, once per workload -- verifies it on every
new shape (and on a GPU times it beside the unfused sequence, which confirms or evicts an entry admitted on
verification alone). A miss, a failed re-verification or an eviction falls back to the search.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.fx as fx

from ...base.records import Candidate, Trial, Workload, sha256_hex
from . import evidence as E
from . import graph as G
from .opgen import OpGenError, write_op
from .plans import OpPlan
from .records import Signature
from .table import PatternTable, pattern_key

TABLE_PROPOSER = "pattern-table"


@dataclass(frozen=True)
class RealiseOptions:
    """How realisations are searched and checked (the loop's options)."""

    device: str = "interpret"
    budget: int | str | None = 2
    strategy: str = "staged"
    seed: int = 0
    confirm: bool = True
    sanitize: bool = True
    checks: int = 2
    fixed: dict | None = None     # kind -> parameters pinned in its search ('NAME=V,NAME=V'), e.g. a GPU's few configs


class TableProposer:
    """Proposes the pattern table's candidate once per workload: re-verification, not search."""

    name = TABLE_PROPOSER

    def __init__(self, candidate: Candidate):
        self.candidate = candidate
        self.asked: set[str] = set()

    def size(self, workload: Workload) -> int:
        return 1

    def ask(self, workload: Workload) -> Candidate | None:
        if workload.id in self.asked:
            return None
        self.asked.add(workload.id)
        return self.candidate

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        pass


def _pruned(bundle, template: str, config: dict, workloads: list[Workload], device: str) -> str:
    """Why the configuration is pruned on one of the workloads ('' when it is kept on all)."""
    from ...core.device import device_properties
    from ...core.spec.space import selected_space
    props = device_properties(device)
    fixed = {k: str(v) for k, v in config.items()}
    for w in workloads:
        space = selected_space(bundle.spec.templates, w, props, [template], fixed)
        if not any(kept for _, kept, _ in space):
            return f"its configuration is pruned on {w.label} (the template's constraints or the device's limits)"
    return ""


def _loop(bundle, workloads: list[Workload], options: RealiseOptions, run_dir: Path, proposer=None):
    """One loop run: the template's search, or the table's candidate when `proposer` is given."""
    from ..api import optimize
    from ...tune import loop
    from ...tune.loop import Budget, RunOptions
    if proposer is None:
        kind = bundle.spec.templates[0].name
        return optimize(bundle.folder, workloads=workloads, budget=options.budget, device=options.device,
                        strategy=options.strategy, out=run_dir, seed=options.seed, checks=options.checks,
                        confirm=options.confirm, sanitize=options.sanitize, fixed=(options.fixed or {}).get(kind))
    opts = RunOptions(device=options.device, budget=Budget(evals=1), strategy=options.strategy, seed=options.seed,
                      checks=options.checks, confirm=options.confirm, sanitize=options.sanitize)
    loop.run(bundle, workloads, opts, run_dir, proposer=proposer)


def _winner(ev: E.Evidence) -> str | None:
    """The candidate of the workload whose unfused sequence takes longest (the largest, in the interpreter)."""
    rows = [w for w in ev.workloads if w.candidate_id is not None]
    if not rows:
        return None

    def weight(w):
        size = 1
        for v in w.axes.values():
            size *= v
        return (w.eager_us or 0.0, size)
    return max(rows, key=weight).candidate_id


@dataclass
class Job:
    """A realisation under way: its op, its workloads, and the run it needs (table re-verification or search)."""

    base: dict
    bundle: object
    workloads: list[Workload]
    key: str
    sha: str
    ops: list[str]
    run_dir: Path
    entry: object = None          # the table entry re-verified by this job's run (None: a search)
    table_note: str = ""

    @property
    def source(self) -> str:
        return "table" if self.entry is not None else "search"


def prepare(plan: OpPlan, signature: Signature, op: str, steps: list[fx.Node], operands: dict[str, fx.Node],
            ops_root: Path, runs_root: Path, options: RealiseOptions, table: PatternTable | None,
            model_dtype: torch.dtype) -> Job | E.Realisation:
    """Write the op and decide its run: the table's realisation when usable and its conditions hold, else a
    search. An op that cannot be written is a Realisation with its error."""
    from ..api import load_workloads
    from ...core.spec import SpecError, load_op
    key = pattern_key(signature, plan)
    base = dict(op=op, folder=str(Path(ops_root) / op), pattern=key, plan=plan)
    try:
        folder, notes = write_op(plan, op, steps, operands, ops_root, model_dtype)
        bundle = load_op(folder)
        workloads = load_workloads(folder / "workloads.toml", bundle.spec)
    except (OpGenError, SpecError, OSError) as e:
        return E.Realisation(**base, error=f"{type(e).__name__}: {e}")
    base["tolerance_notes"] = notes
    sha = sha256_hex(bundle.template_sources[plan.kind])
    ops = [G.target(steps[k]) for k in plan.steps if not G.is_view(steps[k])]
    job = Job(base=base, bundle=bundle, workloads=workloads, key=key, sha=sha, ops=ops, run_dir=Path(runs_root) / op)
    if table is None:
        return job
    entry = table.find(key, plan.kind)
    if entry is None:
        table.note(key, plan.kind, "miss", "no usable entry")
        job.table_note = "miss: no usable entry"
        return job
    why = entry.conditions.unmet(plan.dtype.value, plan.scalars, [dict(w.axes) for w in workloads], sha) or \
        _pruned(bundle, entry.template, entry.config, workloads, options.device)
    if why:
        table.note(key, plan.kind, "miss", why)
        job.table_note = f"miss: {why}"
        return job
    job.entry = entry
    return job


def _candidate(job: Job) -> Candidate | None:
    e = job.entry
    if e is None:
        return None
    return Candidate(op=job.base["op"], template=e.template, source=e.source, config=dict(e.config),
                     proposer=TABLE_PROPOSER, hypothesis="the pattern table's realisation, re-verified on this "
                                                         "model's shapes")


def run(job: Job, options: RealiseOptions) -> None:
    """The job's loop run in this process."""
    cand = _candidate(job)
    _loop(job.bundle, job.workloads, options, job.run_dir, TableProposer(cand) if cand is not None else None)


def run_all(jobs: list[Job], options: RealiseOptions, parallel: int = 1) -> dict[str, str]:
    """Every job's loop run. With `parallel` > 1 the jobs are dealt to that many processes (`python -m
    kernelloop.deliver.fuse.realise JOBS.json`: a run's worker folder is per process), each running its share in turn.
    Returns op -> why its run failed (the others go on)."""
    failed: dict[str, str] = {}
    if parallel <= 1 or len(jobs) <= 1:
        for job in jobs:
            try:
                run(job, options)
            except Exception as e:  # noqa: BLE001 - one op's failed run is reported, the others go on
                failed[job.base["op"]] = f"{type(e).__name__}: {e}"
        return failed
    lanes = [jobs[i::parallel] for i in range(min(parallel, len(jobs)))]
    procs = []
    for i, lane in enumerate(lanes):
        root = lane[0].run_dir.parent
        root.mkdir(parents=True, exist_ok=True)
        spec = root / f"lane-{i}.json"
        spec.write_text(json.dumps({"options": asdict(options), "jobs": [{
            "op": job.base["op"], "folder": str(job.bundle.folder), "run_dir": str(job.run_dir),
            "workloads": [w.model_dump(mode="json") for w in job.workloads],
            "candidate": c.model_dump(mode="json") if (c := _candidate(job)) is not None else None}
            for job in lane]}))
        log = open(root / f"lane-{i}.log", "w+")
        procs.append((lane, log, subprocess.Popen([sys.executable, "-m", "kernelloop.deliver.fuse.realise", str(spec)],
                                                  stdout=log, stderr=subprocess.STDOUT)))
    for lane, log, proc in procs:
        proc.wait()
        log.seek(0)
        text = log.read()
        log.close()
        for job in lane:
            mark = f"FAILED {job.base['op']}: "
            line = next((ln for ln in text.splitlines() if ln.startswith(mark)), None)
            if line is not None:
                failed[job.base["op"]] = line[len(mark):]
            elif not (job.run_dir / "archive.sqlite").is_file():
                failed[job.base["op"]] = f"its process exited {proc.returncode}: {text[-1500:]}"
    return failed


def _main(path: str) -> int:
    """Run a lane of jobs (what `run_all` writes), one after the other; a failure is printed and the lane goes on."""
    from ...core.spec import load_op
    d = json.loads(Path(path).read_text())
    options = RealiseOptions(**d["options"])
    for job in d["jobs"]:
        try:
            cand = Candidate.model_validate(job["candidate"]) if job["candidate"] else None
            _loop(load_op(job["folder"]), [Workload.model_validate(w) for w in job["workloads"]], options,
                  Path(job["run_dir"]), TableProposer(cand) if cand is not None else None)
        except Exception as e:  # noqa: BLE001 - reported to the parent by op, the lane goes on
            print(f"FAILED {job['op']}: {type(e).__name__}: {str(e)[:1000]}".replace("\n", " "), flush=True)
    return 0


def finish(job: Job, table: PatternTable | None) -> E.Realisation | Job:
    """What the job's run showed, entered into the table; a search Job to run next when the table's realisation
    failed on the new shapes or was evicted."""
    plan = job.base["plan"]
    ev = E.from_run(job.run_dir, job.source)
    if job.entry is not None:
        e = job.entry
        note = table.reverified(e, plan, ev)
        if ev.passed and not note.startswith("evicted"):
            return E.Realisation(**job.base, candidate_id=_winner(ev), template=e.template, config=dict(e.config),
                                 evidence=ev, table=note)
        return Job(base=job.base, bundle=job.bundle, workloads=job.workloads, key=job.key, sha=job.sha, ops=job.ops,
                   run_dir=job.run_dir.parent / "search" / job.run_dir.name, table_note=note)
    winner = _winner(ev)
    if winner is None:
        return E.Realisation(**job.base, evidence=ev, table=job.table_note, error="no candidate passed")
    from ...core.archive import Archive
    from ..api import archive_file
    with Archive(archive_file(job.run_dir), readonly=True) as archive:
        cand = archive.get_candidate(winner)
    admitted = table.admit(job.key, plan, job.ops, cand.template, cand.source, dict(cand.config), cand.id, ev,
                           job.sha) if table is not None else "no table"
    note = f"{job.table_note}; {admitted}" if job.table_note else admitted
    return E.Realisation(**job.base, candidate_id=cand.id, template=cand.template, config=dict(cand.config),
                         evidence=ev, table=note)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
