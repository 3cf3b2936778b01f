"""The Python API of the loop: optimize an op, load a run, read its best, trials, fronts and summary as records.

    run = kernelloop.optimize("layernorm", budget=4, device="interpret", out="runs/ln")
    run = kernelloop.Run.load("runs/ln")
    run.best("layernorm[64x256]:fp16").search.kernel_us     # a BestSummary (None: nothing passed)
    run.trials(status="PASSED")                             # [kernelloop.base.records.Trial]
    run.front()                                             # [FrontEntry] of the only workload
    run.summary()                                           # RunSummary: what `kernelloop show --json` prints
    run.throughput()                                        # Throughput: trials/min, device busy, build wait
    run.result                                              # optimize's Run: the RunResult Controller.run returned

`optimize` is `plan` (the arguments read into an op, workloads and a checked `kernelloop.tune.loop.RunOptions`) and
`kernelloop.tune.loop.run` (the one way into the loop); `kernelloop optimize` calls the same two with its flags' names
in the messages, and `kernelloop show` the same `summarize`, so the CLI's `--json` and these records are one thing. Bad
arguments raise `UsageError` (a ValueError) naming what is wrong and what would be accepted; a malformed spec or
workload file raises `kernelloop.core.spec.SpecError` naming the file and field. The worker that runs candidate code is
its own program (`kernelloop.core.execute.child`), so a script without an `if __name__ == "__main__":` guard, `python
-c` and a notebook cell can call `optimize`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
import warnings
from typing import Any, Callable, Sequence

from pydantic import ValidationError

from ..base.records import Status, Trial, Workload
from ..base.records.device import KINDS, Device, DeviceKind
from ..base.records.run import RunResult, Throughput
from ..base.records.summary import BestSummary, FrontEntry, RunSummary, WarmStart, WorkloadSummary
from ..tune.search import DEFAULT_STRATEGY
from ..base.usage import UsageError, usage_error

DEVICES = KINDS


def resolve_device(device: str | None) -> str:
    """`cuda` or `interpret` (a records.Device's text); None means cuda when a GPU is present, else the Triton
    interpreter."""
    from ..core.device import cuda_available
    dev = device or (DeviceKind.CUDA if cuda_available() else DeviceKind.INTERPRET).value
    try:
        parsed = Device.of(dev)
    except ValueError:
        raise UsageError(f"device {dev!r}: use cuda or interpret") from None
    if parsed.is_cuda and not cuda_available():
        raise UsageError(f"device {dev!r}: no CUDA device is available here (use device='interpret')")
    return str(parsed)


def parse_devices(devices: int | str | Sequence[str] | None, device: str) -> list[Device] | None:
    """The devices of a run (one evaluation worker each): a count N (the first N GPUs, or N interpreter workers), a
    list ('cuda:0,cuda:1', 'interpret:0,interpret:1', 'cuda:MIG-...'), or None (every GPU of GPU 0's model; one
    interpreter worker)."""
    if devices is None:
        return None
    kind = Device.of(device).kind
    if isinstance(devices, int) or (isinstance(devices, str) and devices.strip().isdigit()):
        n = int(devices)
        if n < 1:
            raise UsageError(f"devices {devices!r}: at least one")
        return [Device(kind=kind, index=i) for i in range(n)]
    items = devices.split(",") if isinstance(devices, str) else list(devices)
    try:
        out = [Device.of(d.strip() if isinstance(d, str) else d) for d in items if not isinstance(d, str) or d.strip()]
    except ValidationError as e:   # the parser's own message, not pydantic's report around it
        first = e.errors()[0]
        raise UsageError(f"devices {devices!r}: {first.get('ctx', {}).get('error') or first['msg']}") from None
    except ValueError as e:
        raise UsageError(f"devices {devices!r}: {e}") from None
    wrong = [str(d) for d in out if d.kind != kind]
    if wrong or not out:
        raise UsageError(f"devices {devices!r}: a run on {kind} needs {kind} devices"
                         + (f", not {', '.join(wrong)}" if wrong else ""))
    return out


def check_gate(gate: str | None) -> str | None:
    """None (the default: on for a new run, the archived mode on resume) or one of 'on', 'off', 'audit'."""
    from ..tune.loop import GATE_MODES
    if gate is not None and gate not in GATE_MODES:
        raise UsageError(f"gate {gate!r}: choose from {', '.join(GATE_MODES)}")
    return gate


def check_executor(executor: str) -> str:
    """'local' or 'ray' (the cluster extra: refused with the reason when Ray does not import)."""
    from ..tune.loop import EXECUTORS
    if executor not in EXECUTORS:
        raise UsageError(f"executor {executor!r}: choose from {', '.join(EXECUTORS)}")
    if executor == "ray":
        from ..core.execute.ray_executor import ray_available
        why = ray_available()
        if why:
            raise UsageError(f"executor 'ray': {why}")
    return executor


def check_strategy(strategy: str) -> str:
    """The strategy name when it is one of `kernelloop.tune.loop.strategy_names()`."""
    from ..tune.loop import strategy_names
    if strategy not in strategy_names():
        raise UsageError(f"strategy {strategy!r}: choose from {', '.join(strategy_names())}")
    return strategy


def parse_budget(budget: int | str | None, device: str) -> tuple[int | None, float | None, float | None]:
    """(evaluations per workload, seconds of wall time, GPU seconds): `kernelloop.tune.loop.Budget.parse` as a tuple.
    Parts: N evaluations, a wall-time duration ('90s', '10m', '1h') and GPU time 'gpu:DURATION', e.g.
    '40,10m,gpu:5m'; whichever is spent first ends the search. None: 24 evaluations on cuda, 8 in the interpreter."""
    from ..tune.loop.budget import Budget
    return Budget.parse(budget, device).as_tuple()


def load_bundle(op: str | Path):
    """The op (`kernelloop.core.spec.OpBundle`) from a folder, its spec.toml, a name under ./ops or a built-in op's name."""
    from ..base.builtin import builtin_ops, resolve_op
    from ..core.spec import load_op
    path = resolve_op(op)
    if not path.exists():
        raise UsageError(f"unknown op {str(op)!r}: not an op folder or spec.toml, not ./ops/{op}, not a built-in op "
                         f"({', '.join(builtin_ops())})")
    return load_op(path)


def resumed_workloads(run_dir: str | Path | None) -> list[Workload] | None:
    """The workloads of the run a `resume` continues (None: no run there, or one archived before workloads were
    kept): what a resume without workloads goes on with, not the op's default file."""
    path = Path(run_dir) / "archive.sqlite" if run_dir is not None else None
    if path is None or not path.is_file():
        return None
    from ..core.archive import Archive
    from ..tune.loop.freeze import archived_workloads
    with Archive(path, readonly=True) as a:
        runs = a.runs()
        return archived_workloads(a.get_run(runs[0]["id"])["options"].get("workloads")) if runs else None


def default_workloads(folder: Path, device: str) -> Path:
    """The op's workloads-interpret.toml in the interpreter when it has one, else its workloads.toml."""
    interp = folder / "workloads-interpret.toml"
    if not Device.of(device).is_cuda and interp.is_file():
        return interp
    return folder / "workloads.toml"


def load_workloads(path: str | Path, spec) -> list[Workload]:
    """A workloads TOML file, or a package's counts JSON (every shape the dispatcher saw, weighted by calls)."""
    from ..base.builtin import resolve_path
    from ..core.spec import SpecError
    from ..core.spec import load_workloads as load_toml
    path = resolve_path(path)
    if path.suffix == ".json":
        from .package.counts import CountsError, workloads_from_counts
        try:
            return workloads_from_counts(path, spec)
        except CountsError as e:
            raise SpecError(path, "", str(e).removeprefix(f"{path}: ")) from None
    return load_toml(path, spec)


def check_fixed(fixed: str | dict | None, bundle, templates: Sequence[str] | None = None,
                flag: str = "fixed") -> dict[str, str] | None:
    """Pinned parameters ('NAME=V,NAME=V' or a mapping; values as text) when some (selected) template of the op has
    every named parameter with those values; UsageError otherwise. `flag` names the argument in messages."""
    if fixed is None:
        return None
    from ..tune.loop.checks import check_fixed as fits
    from ..core.spec.start import StartError, parse_assignments
    if isinstance(fixed, dict):
        pins = {str(k): str(v) for k, v in fixed.items()}
        if not pins:
            raise UsageError(f"{flag}: the mapping is empty")
    else:
        try:
            pins = parse_assignments(fixed)
        except StartError as e:
            raise UsageError(str(e).replace("--start", flag)) from None
    fits(pins, bundle, templates, {"fixed": flag})
    return pins


def parse_start(start: str | dict | None, flag: str = "start") -> dict[str, str] | None:
    """The planner's first configuration ('NAME=V,NAME=V' or a mapping) as text values; UsageError when it does
    not parse (RunOptions checks it against the strategy and every workload's pruned space)."""
    if start is None:
        return None
    from ..core.spec.start import StartError, parse_assignments
    try:
        return {str(k): str(v) for k, v in start.items()} if isinstance(start, dict) else parse_assignments(start)
    except StartError as e:
        raise UsageError(str(e).replace("--start", flag)) from None


def check_start(start: str | dict | None, strategy: str, bundle, workloads: Sequence[Workload], device: str,
                flag: str = "start") -> dict[str, str] | None:
    """The planner's first configuration, checked against every workload's pruned space; UsageError otherwise."""
    from ..tune.loop import PLANNER
    from ..tune.loop.checks import check_start as fits
    config = parse_start(start, flag)
    if config is not None and strategy != PLANNER:
        by = "--strategy" if flag.startswith("--") else "strategy"
        raise UsageError(f"{flag} is only used by {by} {PLANNER} (got {by} {strategy})")
    fits(config, bundle, workloads, device, {"start": flag})
    return config


def check_space(bundle, workloads: Sequence[Workload], device: str, templates: Sequence[str] | None = None,
                fixed: dict[str, str] | None = None) -> dict[str, str]:
    """Each workload left with nothing to try on this device once the (selected, pinned) templates are pruned,
    with why: {workload label: the most common pruning reasons}. UsageError when that is every workload (the run
    would evaluate nothing); the caller reports the rest (`kernelloop.tune.loop.checks.check_space`)."""
    from ..tune.loop.checks import check_space as check
    return check(bundle, workloads, device, templates, fixed)


def check_prior(paths: Sequence[str | Path] | str | Path | None, strategy: str, bundle,
                flag: str = "prior") -> WarmStart | None:
    """What the run archives about its warm start (files with their sha256, configurations), read from the
    recordings; UsageError when the strategy takes none or a recording does not fit the op."""
    if not paths:
        return None
    from ..tune.replay.prior import read_prior
    from ..tune.search import STRATEGIES, takes_prior
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not takes_prior(strategy):
        by = "--strategy" if flag.startswith("--") else "strategy"
        raise UsageError(f"{flag} is only used by {by} "
                         f"{', '.join(s for s in STRATEGIES if takes_prior(s))} (got {by} {strategy})")
    try:
        return read_prior(files if len(files) > 1 else files[0], bundle.spec.name).warm_start()
    except ValueError as e:
        # with several files the message names the file it is about
        raise UsageError(f"{flag} {files[0]}: {e}" if len(files) == 1 else f"{flag}: {e}") from None


# Keywords renamed so that every setting has one name (the RunOptions field's): old name -> new name.
RENAMED_KEYWORDS = {"gpu_budget": "gpu_seconds", "fix": "fixed"}


def deprecated_keywords(function: str, given: dict[str, Any], **current: Any) -> dict[str, Any]:
    """`current` (the new keywords' values) with the old keywords in `given` moved to their new names, each with a
    DeprecationWarning; TypeError for a keyword that never was one, UsageError for a setting given under both names."""
    out = dict(current)
    for old, value in given.items():
        new = RENAMED_KEYWORDS.get(old)
        if new is None or new not in current:
            raise TypeError(f"{function}() got an unexpected keyword argument {old!r}")
        warnings.warn(f"{function}({old}=...) is deprecated: use {new}=...", DeprecationWarning, stacklevel=3)
        if out[new] is not None:
            raise UsageError(f"{old} and {new} are one setting: give {new} only")
        out[new] = value
    return out


def default_run_dir(op_name: str) -> Path:
    return Path("runs") / f"{op_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def summarize(archive, run_id: str | None = None, run_dir: str | Path | None = None) -> RunSummary:
    """The summary record of a run in an open `Archive` (its first run unless `run_id` names one)."""
    from .report.summary import run_summary
    return run_summary(archive, run_id, str(run_dir) if run_dir is not None else None)


def archive_file(path: str | Path) -> Path:
    """The archive of a run folder, or the archive file itself (.sqlite, .sqlite.xz, .sqlite.gz); else FileNotFoundError."""
    p = Path(path)
    file = p / "archive.sqlite" if p.is_dir() else p
    if not file.is_file():
        raise FileNotFoundError(f"no run archive at {file} (a run folder holds archive.sqlite; "
                                f"kernelloop.optimize(..., out=FOLDER) writes one)")
    return file


class Run:
    """A finished (or interrupted) run, read once from its archive: summary, trials, fronts, best per workload."""

    def __init__(self, path: Path, summary: RunSummary, trials: list[Trial], result: RunResult | None = None):
        self.path = path                 # the archive file
        self._summary = summary
        self._trials = trials
        self.result = result             # what Controller.run returned (optimize's Run only; None for Run.load)

    @classmethod
    def load(cls, path: str | Path, run_id: str | None = None) -> "Run":
        """Read a run folder or its archive (plain, .sqlite.xz or .sqlite.gz); the archive is never written."""
        from ..core.archive import Archive
        file = archive_file(path)
        with Archive(file, readonly=True) as archive:
            summary = summarize(archive, run_id, run_dir=file.parent if file.name == "archive.sqlite" else None)
            trials = archive.trials(summary.run)
        return cls(file, summary, trials)

    @property
    def id(self) -> str:
        return self._summary.run

    @property
    def workloads(self) -> list[WorkloadSummary]:
        return list(self._summary.workloads)

    def throughput(self) -> Throughput:
        """Trials per minute, each device's busy share of the wall time and the time lost waiting for builds."""
        return self._summary.throughput

    def summary(self) -> RunSummary:
        """The run's summary record (`kernelloop show --json` prints exactly its JSON)."""
        return self._summary

    def best(self, workload: str | None = None) -> BestSummary | None:
        """The fastest PASSED candidate of a workload (id or label; None: the run's only workload) with its search
        measurement; None when no candidate passed."""
        return self._summary.workload(workload).best

    def front(self, workload: str | None = None) -> list[FrontEntry]:
        """The Pareto front (latency, registers, shared memory, compile time) of a workload."""
        return list(self._summary.workload(workload).front)

    def trials(self, status: Status | str | None = None, workload: str | None = None) -> list[Trial]:
        """The run's trials in the order they were asked for; only one verdict status's (e.g. "PASSED") and/or one
        workload's (id or label) when given."""
        if status is not None:
            try:
                status = Status(status)
            except ValueError:
                raise UsageError(f"status {status!r}: choose from {', '.join(s.value for s in Status)}") from None
        wid = self._summary.workload(workload).id if workload is not None else None
        return [t for t in self._trials
                if (status is None or t.verdict.status is status) and (wid is None or t.workload_id == wid)]

    def __repr__(self) -> str:
        s = self._summary
        return (f"Run({s.run!r}, op={s.op!r}, status={str(s.status)!r}, workloads={len(s.workloads)}, "
                f"path='{self.path}')")


def optimize(op: str | Path, workloads: str | Path | Sequence[Workload] | None = None, budget: int | str | None = None,
             device: str | None = None, strategy: str = DEFAULT_STRATEGY, *, out: str | Path | None = None,
             gpu_seconds: float | None = None, screen_samples: int | None = None,
             seed: int = 0, checks: int = 2, confirm: bool = True, sanitize: bool = True,
             templates: Sequence[str] | None = None,
             baselines: Sequence[str] | None = None, fixed: str | dict | None = None,
             prior: Sequence[str | Path] | str | Path | None = None, start: str | dict | None = None,
             profile_timeout_s: float = 300.0, resume: bool = False,
             devices: int | str | Sequence[str] | None = None, executor: str = "local", in_flight: int | None = None,
             build_jobs: int | None = None, gate: str | None = None, on_progress: Callable | None = None,
             **deprecated: Any) -> Run:
    """Run the closed loop on an op and return the archived run.

    op: an op folder, its spec.toml, a name under ./ops or a built-in op's name. workloads: a workloads TOML, a
    package's counts JSON or a list of `Workload` records (default: the op's workloads.toml, or
    workloads-interpret.toml in the interpreter). budget: evaluations per workload (int), a duration ('90s',
    '10m'), GPU time ('gpu:5m') or several ('40,10m,gpu:5m'; `parse_budget`); default 24 on cuda, 8 in the
    interpreter; gpu_seconds: the same GPU time in seconds (stop once the trials have used this many compile +
    verification + timing seconds). screen_samples: time a candidate the search's model does not rank in its best
    third with this many samples first, in full only when it could win or successive halving promotes it
    (kernelloop.tune.search.budget; verification is never screened). device: 'cuda' or 'interpret' (default:
    cuda when a GPU is present). strategy: a name of `kernelloop.tune.loop.strategy_names()`. sanitize: run
    compute-sanitizer over each winner on a small shape before its confirmation (tune/select/sanitize.py). out: the run folder
    (default runs/<op>-<time>); resume=True continues the run there (UsageError when `out` holds none). templates / baselines: search only these
    templates; confirm against only these baselines. fixed: pin parameters ('BLOCK_N=4096,ROWS=1' or a mapping):
    only templates that have them, only configurations with these values. prior: warm-start the staged search from
    recordings (a `kernelloop record` space, a Kernel Tuner cache, an earlier run). start / profile_timeout_s: the
    planner's first configuration and the deadline of one Nsight Compute run. devices: one evaluation worker per
    device (`parse_devices`: a count, a list, or None for every GPU of GPU 0's model / one interpreter worker);
    executor: 'local' or 'ray' (actors on a Ray cluster, the cluster extra); in_flight: candidates asked ahead of
    their results (equal values give equal archives on every executor); build_jobs: build processes on this host's
    CPU (default: its cores, at most 8). gate: the static gate before the GPU (kernelloop.tune.gate): 'on' (the default
    for a new run) rejects what it finds, 'audit' records its decisions and rejects nothing, 'off' has none; None on
    resume goes on with the run's archived mode. on_progress: called with
    `kernelloop.tune.loop.Progress` after every trial. The Run's `result` is the `RunResult` of this invocation (stop
    reason, trials evaluated and replayed, best per workload, throughput). The keywords `gpu_budget` and `fix`
    (this function's names before every setting had one name) are still accepted, with a DeprecationWarning.

    Raises UsageError for bad arguments, SpecError for a malformed spec or workload file, FileExistsError for a
    used run folder without resume, and RuntimeError / ManifestChanged / ArchiveError when the run cannot continue.
    """
    renamed = deprecated_keywords("optimize", deprecated, gpu_seconds=gpu_seconds, fixed=fixed)
    p = plan(op, workloads, budget, device, strategy, out=out, gpu_seconds=renamed["gpu_seconds"],
             screen_samples=screen_samples, seed=seed, checks=checks, confirm=confirm, sanitize=sanitize,
             templates=templates, baselines=baselines, fixed=renamed["fixed"], prior=prior, start=start, profile_timeout_s=profile_timeout_s, resume=resume, devices=devices,
             executor=executor, in_flight=in_flight, build_jobs=build_jobs, gate=gate)
    from ..tune import loop
    result = loop.run(p.bundle, p.workloads, p.options, p.run_dir, resume=p.resume, on_progress=on_progress)
    run = Run.load(result.archive, result.run_id)
    run.result = result
    return run


@dataclass(frozen=True)
class Plan:
    """What a run is made of once its arguments are read: the op, the workloads, the checked options, the folder,
    whether it resumes, and the workloads left with nothing to try (label: why; the others still run)."""

    bundle: object
    workloads: list[Workload]
    options: object          # kernelloop.tune.loop.RunOptions, checked against bundle and workloads
    run_dir: Path
    resume: bool = False
    empty: dict[str, str] = field(default_factory=dict)


def plan(op, workloads: str | Path | Sequence[Workload] | None = None, budget: int | str | None = None,
         device: str | None = None, strategy: str = DEFAULT_STRATEGY, *, out: str | Path | None = None,
         gpu_seconds: float | None = None, screen_samples: int | None = None, seed: int = 0, checks: int = 2,
         confirm: bool = True, sanitize: bool = True, templates: Sequence[str] | None = None,
         baselines: Sequence[str] | None = None, fixed: str | dict | None = None,
         prior: Sequence[str | Path] | str | Path | None = None, start: str | dict | None = None,
         profile_timeout_s: float = 300.0, resume: bool = False, devices: int | str | Sequence[str] | None = None,
         executor: str = "local", in_flight: int | None = None, build_jobs: int | None = None,
         gate: str | None = None, names: dict[str, str] | None = None, **deprecated: Any) -> Plan:
    """`optimize`'s arguments read and checked, nothing created or run: UsageError (its message naming each setting
    as `names` does: the API's keywords by default, `kernelloop.tune.loop.checks.CLI_NAMES` for the CLI) or the Plan.
    `op` may also be a loaded `OpBundle`. `gpu_budget` and `fix` are accepted for `gpu_seconds` and `fixed`, with a
    DeprecationWarning."""
    renamed = deprecated_keywords("plan", deprecated, gpu_seconds=gpu_seconds, fixed=fixed)
    gpu_seconds, fixed = renamed["gpu_seconds"], renamed["fixed"]
    from ..tune.loop import RunOptions
    from ..tune.loop.budget import Budget
    from ..tune.loop.checks import API_NAMES, empty_spaces
    names = names or API_NAMES
    bundle = op if hasattr(op, "spec") and hasattr(op, "folder") else load_bundle(op)
    dev = resolve_device(device)
    check_strategy(strategy)
    check_gate(gate)
    budget_record = Budget.parse(budget, dev, gpu_seconds, names["gpu_seconds"], names["budget"])
    if resume and out is None:
        raise UsageError(f"{names['resume']} needs {names['out']}")
    if resume and not (Path(out) / "archive.sqlite").is_file():
        what = "does not exist" if not Path(out).exists() else "holds no run (no archive.sqlite)"
        raise UsageError(f"{names['resume']}: {names['out']} {out} {what}: nothing to continue (leave out "
                         f"{names['resume']} to start a new run there)")
    wls = _workloads(workloads, bundle, dev, out if resume else None)
    fixed = check_fixed(fixed, bundle, templates, names["fixed"])
    data = dict(device=dev, budget=budget_record, screen_samples=screen_samples, strategy=strategy, seed=seed,
                checks=checks, confirm=confirm, sanitize=sanitize, templates=list(templates) if templates else None,
                baselines=list(dict.fromkeys(baselines)) if baselines else None, fixed=fixed,
                start=parse_start(start, names["start"]), profile_timeout_s=profile_timeout_s,
                prior=check_prior(prior, strategy, bundle, names["prior"]), devices=parse_devices(devices, dev),
                executor=executor, in_flight=in_flight, build_jobs=build_jobs,
                **({"gate": gate} if gate is not None else {}))
    try:
        options = RunOptions.model_validate(data, context={"bundle": bundle, "workloads": wls, "names": names})
    except ValidationError as e:
        raise usage_error(e) from None
    run_dir = Path(out) if out is not None else default_run_dir(bundle.spec.name)
    return Plan(bundle, wls, options, run_dir, resume, empty_spaces(bundle, wls, dev, options.templates, fixed))


def _workloads(workloads, bundle, device: str, resumed_from: str | Path | None) -> list[Workload]:
    """The run's workloads: those a resumed run archived (when none are given), a file's, or the records given."""
    wls = resumed_workloads(resumed_from) if resumed_from is not None and workloads is None else None
    if wls is None and (workloads is None or isinstance(workloads, (str, Path))):
        wls = load_workloads(workloads if workloads is not None else default_workloads(bundle.folder, device),
                             bundle.spec)
    elif wls is None:
        wls = [w if isinstance(w, Workload) else Workload.model_validate(w) for w in workloads]
    if not wls:
        raise UsageError("workloads: the list is empty")
    return wls


__all__ = ["DEVICES", "Plan", "Run", "UsageError", "archive_file", "check_executor", "check_fixed", "check_gate", "check_prior", "check_space", "check_start", "check_strategy", "default_run_dir", "default_workloads",
           "load_bundle", "load_workloads", "optimize", "parse_budget", "parse_devices", "parse_start", "plan", "resolve_device", "summarize"]
