"""compute-sanitizer over one candidate: memcheck, racecheck, synccheck, initcheck on a small shape.

A kernel can read out of bounds or race on shared memory and still match the reference on every test input; the
tool made for it sees what the verifier cannot. For each tool this module builds the command line

    compute-sanitizer --tool <tool> --error-exitcode 86 --print-limit <n> [tool options]
        python -m kernelloop.core.verify.sanitize_runner <job.json>

runs it under a deadline (the whole process group is killed past it), parses the report
(`sanitizer_report.parse_report`) and returns a `SanitizerReport`; `report.verdict()` is REJECTED naming the tool and
its first finding, with the report in `log`, when any tool reported errors. Without compute-sanitizer (not on PATH,
not in $CUDA_HOME/bin or /usr/local/cuda/bin, or $KERNELLOOP_COMPUTE_SANITIZER unset) or without CUDA every tool is
`not_run` with the reason -- never a pass.

    from kernelloop.core.verify.sanitizer import sanitize
    report = sanitize(candidate.source, candidate.config, spec, workload)     # all four tools
    if (v := report.verdict()) is not None: ...                              # REJECTED with the tool's report
    elif not report.clean: ...                                               # not_run / error: not verified

PyTorch's caching allocator would hide a read past a tensor's end inside its pooled block, so the runner runs with
PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor is its own allocation, whose bounds memcheck knows. The candidate is
launched once without the tool first (`warm`), which compiles it into Triton's cache, so the sanitized runs time the
launch and not the compiler, and a candidate that fails on its own is reported as such.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...base.records import Candidate, OpSpec, Workload
from .sanitize_runner import FAILED_EXIT, LAUNCHED_MARK
from .sanitizer_report import TOOLS, SanitizerReport, ToolRun, parse_report

ERROR_EXIT = 86
"""--error-exitcode: the tool's exit status when it reported errors (the runner itself exits 0 or 3)."""
TOOL_OPTIONS = {
    "memcheck": ["--leak-check", "no", "--report-api-errors", "explicit"],
    "racecheck": ["--racecheck-report", "all"],
    "synccheck": [],
    "initcheck": [],
}
OUTPUT_LIMIT = 40_000


def find_sanitizer() -> str | None:
    """The compute-sanitizer executable: $KERNELLOOP_COMPUTE_SANITIZER, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin."""
    env = os.environ.get("KERNELLOOP_COMPUTE_SANITIZER")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (p := Path(home) / "bin" / "compute-sanitizer").is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def runner_command(job_file: Path | str) -> list[str]:
    """The wrapped process: this interpreter running the runner module on the job file."""
    return [sys.executable, "-m", "kernelloop.core.verify.sanitize_runner", str(job_file)]


def command_line(tool: str, job_file: Path | str, executable: str = "compute-sanitizer",
                 print_limit: int = 100) -> list[str]:
    """The full command for one tool."""
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r} (one of {', '.join(TOOLS)})")
    return [executable, "--tool", tool, "--error-exitcode", str(ERROR_EXIT), "--print-limit", str(print_limit),
            "--show-backtrace", "device", *TOOL_OPTIONS[tool], *runner_command(job_file)]


def runner_env(base: dict | None = None) -> dict:
    """The wrapped process's environment: compiled kernels (never the interpreter), no pooled allocations."""
    env = dict(os.environ if base is None else base)
    env.pop("TRITON_INTERPRET", None)
    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def write_job(folder: Path, source: str, config: dict, spec: OpSpec, workload: Workload, seed: int = 0,
              device: str = "cuda") -> Path:
    """The candidate's source and the job file the runner reads."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "candidate.py"
    src.write_text(source)
    job = folder / "job.json"
    job.write_text(json.dumps({"source_file": str(src), "config": dict(config), "spec": spec.to_json(),
                               "workload": workload.to_json(), "seed": seed, "device": device}))
    return job


def _clip(text: str) -> str:
    return text if len(text) <= OUTPUT_LIMIT else text[:OUTPUT_LIMIT // 4] + "\n...\n" + text[-3 * OUTPUT_LIMIT // 4:]


def run_command(cmd: list[str], env: dict, deadline_s: float, cwd: Path | None = None) -> tuple[int | None, str, float]:
    """(exit code or None past the deadline, stdout+stderr, seconds). Its own process group, killed whole on time."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True, text=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=deadline_s)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            code = None     # the group ended between the timeout and the kill: nothing left to stop
        out, _ = proc.communicate()
        code = None
    return code, out or "", time.monotonic() - t0


def judge(tool: str, cmd: list[str], code: int | None, output: str, seconds: float, deadline_s: float) -> ToolRun:
    """A ToolRun from the tool's exit code and text."""
    count, findings = parse_report(tool, output)
    errors = [f for f in findings if f.severity == "error"]
    base = dict(tool=tool, command=cmd, exit_code=code, error_count=count, findings=findings,
                seconds=round(seconds, 2), output=_clip(output))
    if code is None:
        return ToolRun(status="findings" if errors else "error", reason=f"deadline of {deadline_s:g} s passed", **base)
    if errors or (count or 0) > 0 or code == ERROR_EXIT:
        return ToolRun(status="findings", reason="" if errors or count else "exit code says errors", **base)
    if count is None:
        return ToolRun(status="error", reason=f"no ERROR SUMMARY in the tool's output (exit {code})", **base)
    if code != 0:
        why = "the candidate failed under the tool" if code == FAILED_EXIT else f"exit {code}"
        return ToolRun(status="error", reason=why, **base)
    if LAUNCHED_MARK not in output:
        return ToolRun(status="error", reason="the runner never reported the launch", **base)
    return ToolRun(status="clean", **base)


def _not_run(tools, reason: str, cmds: dict | None = None) -> list[ToolRun]:
    return [ToolRun(tool=t, status="not_run", reason=reason, command=(cmds or {}).get(t, [])) for t in tools]


def sanitize(candidate_source: str, config: dict, spec: OpSpec, workload: Workload,
             tools: tuple[str, ...] | list[str] = TOOLS, *, seed: int = 0, deadline_s: float = 600.0,
             print_limit: int = 100, executable: str | None = None, warm: bool = True,
             workdir: Path | None = None, candidate_id: str | None = None,
             cuda_available: bool | None = None) -> SanitizerReport:
    """Run each tool over one launch of the candidate on `workload` (keep it small: the tools slow kernels by
    10-100x). `deadline_s` bounds each tool's run. Returns every tool's run; see `SanitizerReport.verdict()`."""
    tools = tuple(tools)
    for t in tools:
        if t not in TOOLS:
            raise ValueError(f"unknown compute-sanitizer tool {t!r} (one of {', '.join(TOOLS)})")
    cid = candidate_id or Candidate(op=spec.name, template="custom", source=candidate_source, config=config).id
    case = f"{workload.label} seed {seed}"
    exe = executable or find_sanitizer()
    if exe is None:
        return SanitizerReport(candidate=cid, case=case, runs=_not_run(
            tools, "no compute-sanitizer (not on PATH, not in $CUDA_HOME/bin or /usr/local/cuda/bin; "
                   "set $KERNELLOOP_COMPUTE_SANITIZER)"))
    if cuda_available is None:
        import torch
        cuda_available = torch.cuda.is_available()
    if not cuda_available:
        return SanitizerReport(candidate=cid, case=case, runs=_not_run(tools, "no CUDA device in this process"))
    tmp = None
    if workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kl-sanitize-")
        workdir = Path(tmp.name)
    try:
        job = write_job(Path(workdir), candidate_source, config, spec, workload, seed)
        env = runner_env()
        cmds = {t: command_line(t, job, exe, print_limit) for t in tools}
        if warm:
            code, out, secs = run_command(runner_command(job), env, deadline_s, cwd=workdir)
            if code != 0 or LAUNCHED_MARK not in out:
                how = "deadline passed" if code is None else f"exit {code}"
                last = out.strip().splitlines()[-1][:300] if out.strip() else "no output"
                why = f"the candidate does not launch without the tool ({how}): {last}"
                runs = [r.model_copy(update={"output": _clip(out)}) for r in _not_run(tools, why, cmds)]
                return SanitizerReport(candidate=cid, case=case, runs=runs)
        runs = []
        for t in tools:
            code, out, secs = run_command(cmds[t], env, deadline_s, cwd=workdir)
            runs.append(judge(t, cmds[t], code, out, secs, deadline_s))
        return SanitizerReport(candidate=cid, case=case, runs=runs)
    finally:
        if tmp is not None:
            tmp.cleanup()


SMALL_ELEMENTS = 1 << 16
"""`small_workload` shrinks a shape until its tensors hold at most this many elements in all (or no axis can move)."""
SMALL_PRIMARY = (5, 3)
"""Values tried first for the primary (row/token) axes: small and odd, so a partial tile is exercised."""


def _elements(spec: OpSpec, axes: dict[str, int]) -> int:
    total = 0
    for t in [*spec.inputs, *spec.outputs]:
        n = 1
        for d in t.dims(axes):
            n *= d
        total += n
    return total


def small_workload(spec: OpSpec, workload: Workload, accept=None, fixed: tuple[str, ...] = (),
                   target: int = SMALL_ELEMENTS) -> Workload:
    """A small shape of the op's valid domain for the tools (which slow a kernel 10-100x): `workload`'s axes scaled
    down. The primary axes (the spec's held-out axes, else the first input's first axis) try SMALL_PRIMARY first;
    then every axis not in `fixed` is halved, largest tensor first, while the tensors hold more than `target`
    elements. A value is taken only where `accept(axes)` holds (the op's domain and, for a template's own source,
    its configuration's constraints: `Evaluator.accept`; default: the op's domain), so divisibility and the
    configuration's limits are kept; an axis that cannot move keeps its value."""
    from ..spec.loader import in_domain
    ok = accept or (lambda axes: in_domain(spec, axes, workload.dtype))
    axes = dict(workload.axes)
    primary = [a for a in (spec.heldout_axes or [spec.inputs[0].shape[0]]) if a in axes and a not in fixed]
    for ax in primary:
        for v in SMALL_PRIMARY:
            if v < axes[ax] and ok({**axes, ax: v}):
                axes[ax] = v
                break
    free = [a for a in axes if a not in fixed]
    moved = True
    while moved and _elements(spec, axes) > target:
        moved = False
        for ax in sorted(free, key=lambda a: -axes[a]):
            v = axes[ax] // 2
            if v >= max(1, spec.axes[ax].min) and v < axes[ax] and ok({**axes, ax: v}):
                axes[ax] = v
                moved = True
                break
    return workload.model_copy(update={"axes": axes})


def not_run_report(candidate_id: str, case: str, reason: str,
                   tools: tuple[str, ...] | list[str] = TOOLS) -> SanitizerReport:
    """Every tool `not_run` with the reason (where the caller knows there is nothing to run, e.g. the interpreter)."""
    return SanitizerReport(candidate=candidate_id, case=case, runs=_not_run(tuple(tools), reason))


def outcome(report: SanitizerReport, workload: Workload, report_limit: int = 20000):
    """The report as the typed record confirmation and packaging keep (records.confirm.SanitizerOutcome)."""
    from ...base.records.confirm import SanitizerOutcome, SanitizerToolOutcome
    status = report.status
    reasons = list(dict.fromkeys(r.reason for r in report.runs if r.status != "clean" and r.reason))
    v = report.verdict()
    return SanitizerOutcome(
        status=status, candidate_id=report.candidate, workload=dict(workload.axes), case=report.case,
        reason="; ".join(reasons) if status in ("not_run", "error") else "", verdict=v.message if v else "",
        tools=[SanitizerToolOutcome(tool=r.tool, status=r.status, reason=r.reason, error_count=r.error_count)
               for r in report.runs],
        report=report.text(report_limit) if status in ("findings", "error") else "")


__all__ = ["ERROR_EXIT", "SMALL_ELEMENTS", "command_line", "find_sanitizer", "judge", "not_run_report", "outcome",
           "run_command", "runner_command", "runner_env", "sanitize", "small_workload", "write_job"]
