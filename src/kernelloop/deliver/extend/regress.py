"""Extending the representation with a regression check: every op's task set before and after one change.

An extension — a schedule field or lowering, a template parameter, a verifier rule, a proposer hint — is one
change. Its check re-runs the task set and compares each task's verdict with the verdicts recorded before:
- interpreter tasks (`interpret`): a template configuration on an interpreter workload, judged by the loop's own
  verifier in worker processes (kernelloop.tune.loop.run on the Triton interpreter);
- ahead-of-time tasks (`sm_90`): a configuration of a template that runs on Hopper, built for sm_90 on this host
  and judged by the static gate (kernelloop.tune.gate).
A task regresses when it was good before (PASSED; passed the gate) and is not now, or is gone. Any regression
refuses the extension. Accepted or refused, the extension and its effect (regressions, improvements, tasks added)
are appended to a ledger of JSON lines: the rules learned.

    tasks = task_set("ci")                      # or "full": every op, every template, the first configurations
    before = run_tasks(tasks, workdir)          # on the tree without the change (`kernelloop extend baseline`)
    ...change...
    result = check_extension(ext, before, run_tasks(tasks, workdir))   # `kernelloop extend check`
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from ...base.records import Candidate, Workload
from ...base.records.base import Record, canonical_json

Mode = Literal["interpret", "sm_90"]
GOOD = {"interpret": "PASSED", "sm_90": "passed"}

CI_INTERPRET = {"rmsnorm": 1}          # op -> configurations per template (first of the pruned space)
CI_SM90 = {"gemm": ("schedule_ws", "schedule_subtiled", "schedule_pingpong")}


class Task(Record):
    op: str
    template: str
    config: dict
    workload: Workload
    mode: Mode

    @property
    def key(self) -> str:
        return f"{self.mode}:{self.op}:{self.template}:{canonical_json(self.config)}:{self.workload.label}"


class TaskVerdict(Record):
    key: str
    op: str
    template: str
    mode: Mode
    status: str = Field(description="interpret: the verifier's status; sm_90: 'passed' or 'rejected: <check>'.")
    detail: str = ""

    @property
    def good(self) -> bool:
        return self.status == GOOD[self.mode]


class Extension(Record):
    name: str = Field(min_length=1)
    kind: Literal["schedule field", "lowering", "template parameter", "verifier rule", "proposer hint"]
    description: str = Field(min_length=1)


class Change(Record):
    key: str
    before: str
    after: str


class ExtensionResult(Record):
    """One extension's check: accepted when no verdict regressed; its effect on the task set."""

    extension: Extension
    accepted: bool
    tasks: int
    regressions: list[Change] = Field(default_factory=list)
    improvements: list[Change] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list, description="Tasks with no verdict before (new templates, "
                                                                "parameters, ops).")
    unchanged: int = 0
    checked: float = Field(default_factory=time.time)


def task_set(subset: Literal["ci", "full"] = "ci", ops: list[str] | None = None, per_template: int = 2) -> list[Task]:
    """The tasks of every built-in op (or `ops`). 'ci': the fixed subset CI runs (CI_INTERPRET, CI_SM90); 'full':
    for every template, its first `per_template` configurations on every interpreter workload and on the op's first
    workload built for sm_90."""
    from ...base.builtin import builtin_ops, ops_dir
    from ...core.device import VIRTUAL_HOPPER
    from ...core.spec import load_op, load_workloads
    from ...core.spec.space import prune
    hopper = VIRTUAL_HOPPER.with_(virtual=False)
    names = ops or (sorted({*CI_INTERPRET, *CI_SM90}) if subset == "ci" else builtin_ops())
    out: list[Task] = []
    for op in names:
        bundle = load_op(ops_dir() / op)
        interp = load_workloads(bundle.folder / "workloads-interpret.toml", bundle.spec)
        gpu = load_workloads(bundle.folder / "workloads.toml", bundle.spec)[:1]
        for t in bundle.spec.templates:
            if subset == "ci":
                n_i = CI_INTERPRET.get(op, 0) if t is bundle.spec.templates[0] else 0
                n_g = 1 if t.name in CI_SM90.get(op, ()) else 0
                interp_w, gpu_w = interp[:1], gpu
            else:
                n_i = n_g = per_template
                interp_w, gpu_w = interp, gpu
            for w in interp_w if n_i else []:
                out += [Task(op=op, template=t.name, config=c, workload=w, mode="interpret")
                        for c in prune(t, w, VIRTUAL_HOPPER)[0][:n_i]]
            for w in gpu_w if n_g else []:
                out += [Task(op=op, template=t.name, config=c, workload=w, mode="sm_90")
                        for c in prune(t, w, hopper)[0][:n_g]]
    return out


class TaskProposer:
    """Hands the controller each workload's task candidates once (the Proposer protocol)."""

    name = "regression"

    def __init__(self, by_workload: dict[str, list[Candidate]]):
        self.by_workload = {k: list(v) for k, v in by_workload.items()}
        self.trials: dict[tuple[str, str], object] = {}

    def size(self, workload: Workload) -> int | None:
        return len(self.by_workload.get(workload.id, []))

    def ask(self, workload: Workload) -> Candidate | None:
        todo = self.by_workload.get(workload.id, [])
        return todo.pop(0) if todo else None

    def tell(self, candidate: Candidate, workload: Workload, trial) -> None:
        self.trials[(candidate.id, workload.id)] = trial


def _interpret(op: str, tasks: list[Task], workdir: Path) -> list[TaskVerdict]:
    from ...base.builtin import ops_dir
    from ...tune import loop
    from ...tune.loop import Budget, RunOptions
    from ...core.spec import load_op
    bundle = load_op(ops_dir() / op)
    cands = {t.key: Candidate(op=op, template=t.template, source=bundle.template_sources[t.template],
                              config=t.config, proposer="regression") for t in tasks}
    workloads = list({t.workload.id: t.workload for t in tasks}.values())
    by_w: dict[str, list[Candidate]] = {w.id: [] for w in workloads}
    for t in tasks:
        by_w[t.workload.id].append(cands[t.key])
    proposer = TaskProposer(by_w)
    opts = RunOptions(device="interpret", budget=Budget(evals=max(len(v) for v in by_w.values())), confirm=False,
                      sanitize=False, checks=1)
    loop.run(bundle, workloads, opts, workdir / f"interpret-{op}", proposer=proposer)
    out = []
    for t in tasks:
        trial = proposer.trials.get((cands[t.key].id, t.workload.id))
        status = trial.verdict.status.value if trial is not None else "NOT_RUN"
        detail = (trial.verdict.message or "")[:300] if trial is not None else "the loop did not run it"
        out.append(TaskVerdict(key=t.key, op=op, template=t.template, mode="interpret", status=status, detail=detail))
    return out


def _sm90(op: str, tasks: list[Task], jobs: int) -> list[TaskVerdict]:
    from ...base.builtin import ops_dir
    from ...tune.gate import gate
    from ...core.spec import load_op
    from ...core.build.aot import build_configs
    bundle = load_op(ops_dir() / op)
    files = {t.name: bundle.folder / t.file for t in bundle.spec.templates}
    out = []
    for wid in dict.fromkeys(t.workload.id for t in tasks):
        mine = [t for t in tasks if t.workload.id == wid]
        outs = build_configs(bundle.spec, files, mine[0].workload, [{"template": t.template, **t.config} for t in mine],
                             jobs=jobs)
        for t, o in zip(mine, outs):
            cand = Candidate(op=op, template=t.template, source=bundle.template_sources[t.template], config=t.config)
            d = gate(cand, o, workload=t.workload)
            out.append(TaskVerdict(key=t.key, op=op, template=t.template, mode="sm_90",
                                   status="passed" if d.passed else f"rejected: {d.first.check}",
                                   detail=d.message()[:300]))
    return out


def run_tasks(tasks: list[Task], workdir: Path, jobs: int = 2) -> list[TaskVerdict]:
    """Every task's verdict (interpreter tasks one loop run per op; sm_90 tasks one build batch per workload)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    out: list[TaskVerdict] = []
    for op in dict.fromkeys(t.op for t in tasks):
        mine = [t for t in tasks if t.op == op]
        if any(t.mode == "interpret" for t in mine):
            out += _interpret(op, [t for t in mine if t.mode == "interpret"], workdir)
        if any(t.mode == "sm_90" for t in mine):
            out += _sm90(op, [t for t in mine if t.mode == "sm_90"], jobs)
    return out


def check_extension(extension: Extension, before: list[TaskVerdict], after: list[TaskVerdict]) -> ExtensionResult:
    """Compare the verdicts; accepted when nothing good before is bad or gone now."""
    old = {v.key: v for v in before}
    new = {v.key: v for v in after}
    regressions, improvements, unchanged = [], [], 0
    for key, v in old.items():
        now = new.get(key)
        if now is None:
            if v.good:
                regressions.append(Change(key=key, before=v.status, after="(task gone)"))
        elif v.good and not now.good:
            regressions.append(Change(key=key, before=v.status, after=now.status))
        elif now.good and not v.good:
            improvements.append(Change(key=key, before=v.status, after=now.status))
        else:
            unchanged += 1
    added = sorted(k for k in new if k not in old)
    return ExtensionResult(extension=extension, accepted=not regressions, tasks=len(new), regressions=regressions,
                           improvements=improvements, added=added, unchanged=unchanged)


def record(ledger: Path, result: ExtensionResult) -> None:
    """Append the extension and its effect to the ledger (JSON lines)."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a") as f:
        f.write(result.to_json() + "\n")


def repository_ledger() -> Path | None:
    """The ledger of the clone this package runs from (`extensions/ledger.jsonl` beside its pyproject.toml, the
    package being the clone's src/kernelloop), wherever the command runs; None for a package installed elsewhere."""
    root = Path(__file__).resolve().parents[4]
    if (root / "pyproject.toml").is_file() and (root / "extensions").is_dir():
        return root / "extensions" / "ledger.jsonl"
    return None


def ledger_entries(ledger: Path) -> list[ExtensionResult]:
    """The ledger's entries in order (none when the file does not exist); ValueError naming the file and line of
    one that is not an extension's result."""
    from pydantic import ValidationError
    if not Path(ledger).is_file():
        return []
    out = []
    for n, line in enumerate(Path(ledger).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(ExtensionResult.model_validate_json(line))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise ValueError(f"{ledger} line {n} is not a ledger entry: {(where + ': ') if where else ''}"
                             f"{first['msg']}") from None
    return out


__all__ = ["CI_INTERPRET", "CI_SM90", "Change", "Extension", "ExtensionResult", "Task", "TaskVerdict",
           "check_extension", "ledger_entries", "record", "repository_ledger", "run_tasks", "task_set"]
