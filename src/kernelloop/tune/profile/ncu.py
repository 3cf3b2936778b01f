"""Run Nsight Compute on one candidate's kernel, in a subprocess, with a deadline; read the report back.

The profiled process is `python -m kernelloop.tune.profile.harness JOB.json`, which builds the workload's
seeded inputs, calls the candidate's `launch` (or, in baseline mode, a baseline such as eager PyTorch) a few
times (JIT compile, warm-up) and then once more inside an NVTX range. ncu is told to profile only launches inside
that range (`--nvtx --nvtx-include RANGE/`) and, when the kernel names are known, only those kernels
(`--kernel-name regex:NAMES`); every matching launch of the one profiled call is kept (no `--launch-count`) and
the caller sums them (`aggregate.py`). `--clock-control none` keeps the clocks the timer saw (ncu would otherwise
lock them), `--cache-control all` flushes caches before each replay pass, `--config-file off` keeps a stray
config.ncu-cfg from adding options.

Failures are data: `NcuRun.status` is `ok`, `not-found` (no ncu), `timeout`, `failed` or `no-kernel`.
When ncu rejects a requested raw metric (names differ between GPU generations and ncu versions), the
rejected names are dropped and the run repeated once, and the run records what it dropped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ...base.records import KernelProfile
from .metrics import EXTRA_RAW_METRICS, SECTIONS
from .ncu_csv import parse_details_csv, select_kernel
from .ncu_report_adapter import find_ncu, load_ncu_report_module, read_report

NVTX_RANGE = "kernelloop-profile"
"""Name of the NVTX push/pop range the harness wraps the profiled launch in."""

# ncu's messages when a requested metric does not exist on this GPU / in this version.
_BAD_METRIC = re.compile(r"(?:Failed to find metric|Unknown metric|Invalid metric(?: name)?)[^A-Za-z0-9_]*"
                         r"(?:regex:\^?)?([A-Za-z0-9_.\\]+)", re.IGNORECASE)
_NO_PERMISSION = "ERR_NVGPUCTRPERM"


def _rejected(log: str, requested: tuple[str, ...]) -> list[str]:
    """Requested metrics ncu said it cannot find. ncu may quote a name as a regex (`regex:^name\\.avg...`)
    or name only its base: a requested metric is rejected when it equals the name or extends it."""
    out = set()
    for raw in _BAD_METRIC.findall(log):
        name = re.split(r"\\?\.\(|\$", raw)[0].replace("\\.", ".").rstrip(".")
        out |= {m for m in requested if m == name or m.startswith(name + ".")}
    return sorted(out)
_NO_KERNEL = ("No kernels were profiled", "no kernels were profiled")


@dataclass(frozen=True)
class NcuOptions:
    """What to collect and how. Every field lands in the archived command line."""

    sections: tuple[str, ...] = SECTIONS
    metrics: tuple[str, ...] = EXTRA_RAW_METRICS
    clock_control: str = "none"
    cache_control: str = "all"        # flush caches between replay passes: every pass sees a cold L2
    replay_mode: str = "kernel"
    kernel_regex: str | None = None   # e.g. the Triton kernel's name; None = any kernel in the NVTX range
    nvtx_range: str | None = NVTX_RANGE
    launch_skip: int = 0
    launch_count: int | None = 1      # None: every launch the filters let through (all kernels of the NVTX range)
    timeout_s: float = 600.0


@dataclass
class NcuRun:
    """One ncu invocation: status, command, log and the report it wrote."""

    status: Literal["ok", "not-found", "timeout", "failed", "no-kernel"]
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    seconds: float = 0.0
    log: str = ""
    report: Path | None = None
    dropped_metrics: list[str] = field(default_factory=list)


def ncu_command(ncu: str | os.PathLike, target: list[str], out_stem: str | os.PathLike,
                options: NcuOptions) -> list[str]:
    """The ncu command line profiling `target` into `out_stem`.ncu-rep."""
    cmd = [str(ncu), "--config-file", "off",  # no stray config.ncu-cfg may add options
           "--clock-control", options.clock_control, "--cache-control", options.cache_control,
           "--replay-mode", options.replay_mode, "--target-processes", "all", "--force-overwrite",
           "--export", str(out_stem)]
    for s in options.sections:
        cmd += ["--section", s]
    if options.metrics:
        cmd += ["--metrics", ",".join(options.metrics)]
    if options.nvtx_range:
        cmd += ["--nvtx", "--nvtx-include", f"{options.nvtx_range}/"]
    if options.kernel_regex:
        cmd += ["--kernel-name", f"regex:{options.kernel_regex}"]
    if options.launch_skip:
        cmd += ["--launch-skip", str(options.launch_skip)]
    if options.launch_count is not None:
        cmd += ["--launch-count", str(options.launch_count)]
    return cmd + ["--", *target]


def _run(cmd: list[str], timeout_s: float, env: dict | None, cwd: str | None) -> tuple[int | None, str, float, bool]:
    """Run in its own process group; on timeout kill the whole group (ncu and the profiled process)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                            env=env, cwd=cwd, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out or "", time.monotonic() - t0, False
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, out or "", time.monotonic() - t0, True


def run_ncu(target: list[str], out_stem: str | os.PathLike, options: NcuOptions = NcuOptions(), *,
            ncu: str | os.PathLike | None = None, env: dict | None = None, cwd: str | None = None) -> NcuRun:
    """Profile `target` (argv) under ncu; see the module docstring for the statuses."""
    exe = find_ncu(ncu)
    if exe is None:
        return NcuRun(status="not-found", log="ncu not found: set KERNELLOOP_NCU or put Nsight Compute on PATH")
    out_stem = Path(out_stem)
    report = out_stem.with_name(out_stem.name + ".ncu-rep")
    out_stem.parent.mkdir(parents=True, exist_ok=True)
    dropped: list[str] = []
    opts = options
    for _attempt in range(2):
        cmd = ncu_command(exe, target, out_stem, opts)
        if report.exists():
            report.unlink()
        code, log, seconds, timed_out = _run(cmd, opts.timeout_s, env, cwd)
        if timed_out:
            return NcuRun("timeout", cmd, None, seconds, log, None, dropped)
        if _NO_PERMISSION in log:
            return NcuRun("failed", cmd, code, seconds, "no permission to read the GPU's performance counters "
                          "(ERR_NVGPUCTRPERM: see NVIDIA's ERR_NVGPUCTRPERM page)\n" + log, None, dropped)
        bad = _rejected(log, opts.metrics)
        if code != 0 and bad and not dropped:
            dropped = sorted(set(bad))
            opts = NcuOptions(**{**opts.__dict__, "metrics": tuple(m for m in opts.metrics if m not in dropped)})
            continue
        if code != 0:
            return NcuRun("failed", cmd, code, seconds, log, report if report.exists() else None, dropped)
        if not report.exists() or any(s in log for s in _NO_KERNEL):
            return NcuRun("no-kernel", cmd, code, seconds, log, None, dropped)
        return NcuRun("ok", cmd, code, seconds, log, report, dropped)
    raise AssertionError("unreachable")  # pragma: no cover


SOURCE_SECTION = "SourceCounters"
"""The section whose counters the source page shows per SASS instruction (warp-state samples, executed counts)."""


def export_csv(report: str | os.PathLike, *, ncu: str | os.PathLike | None = None, timeout_s: float = 300.0,
               page: Literal["details", "source"] = "details") -> str:
    """A page of the report as CSV text: the details page in base units (`ncu --import R --csv --page details`), or
    the source page's SASS with its per-instruction counters (`--page source --print-source sass`)."""
    exe = find_ncu(ncu)
    if exe is None:
        raise FileNotFoundError("ncu not found: cannot export the report to CSV")
    cmd = [str(exe), "--import", str(report), "--csv", "--page", page,
           *(["--print-units", "base"] if page == "details" else ["--print-source", "sass"])]
    code, out, _, timed_out = _run(cmd, timeout_s, None, None)
    if timed_out or code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({'timeout' if timed_out else f'exit {code}'}): {out[-2000:]}")
    return out


def load_profiles(report: str | os.PathLike, *, ncu: str | os.PathLike | None = None,
                  use_module: bool = True) -> tuple[list[KernelProfile], list[str]]:
    """The report's launches, via `ncu_report` when it imports, else via the CSV export; plus notes."""
    notes: list[str] = []
    if use_module:
        module = load_ncu_report_module(ncu)
        if module is not None:
            try:
                return read_report(report, module), notes
            except Exception as e:  # noqa: BLE001 - a module/report version mismatch: fall back to CSV
                notes.append(f"ncu_report could not read {report}: {type(e).__name__}: {e}; used the CSV export")
        else:
            notes.append("ncu_report module not found next to ncu; used the CSV export")
    return parse_details_csv(export_csv(report, ncu=ncu)), notes


@dataclass
class CandidateProfile:
    """The outcome of profiling one subject: the kept launches (empty on failure) and how it went.

    `kernel` is the first kept launch (the one launch when `launch_count` is 1); `kernels` are all the launches
    of the report that match the kernel filter, in report order.
    """

    run: NcuRun
    kernel: KernelProfile | None
    notes: list[str]
    kernels: list[KernelProfile] = field(default_factory=list)


def harness_job(op_dir: str | os.PathLike, source_file: str | os.PathLike, config: dict, workload_json: str,
                seed: int, warmup: int = 3, nvtx_range: str = NVTX_RANGE) -> dict:
    """The job description `kernelloop.tune.profile.harness` reads (candidate mode)."""
    return {"mode": "candidate", "op_dir": str(op_dir), "source_file": str(source_file), "config": config,
            "workload": workload_json, "seed": seed, "warmup": warmup, "nvtx_range": nvtx_range}


def baseline_job(op_dir: str | os.PathLike, name: str, workload, seed: int, warmup: int = 3,
                 nvtx_range: str = NVTX_RANGE) -> dict:
    """The harness job (baseline mode) that runs baseline `name` on `workload`'s seeded inputs.

    It carries what the controller's bench message gives the worker for baselines (`Evaluator.bench`): the op's
    reference file (eager, torch.compile), its `baselines.py` ('' when the op has none) and the formula's bytes
    (copy); the harness builds the callable with the worker's own `make_baseline`.
    """
    from ...core.spec import load_op
    bundle = load_op(op_dir)
    baselines_file = bundle.folder / "baselines.py"
    return {"mode": "baseline", "baseline": name, "op_dir": str(op_dir), "workload": workload.model_dump_json(),
            "seed": seed, "warmup": warmup, "nvtx_range": nvtx_range,
            "reference_file": str(bundle.folder / bundle.spec.reference),
            "baselines_file": str(baselines_file) if baselines_file.is_file() else "",
            "bytes_moved": bundle.spec.bytes_moved(workload.axes, workload.dtype)}


def profile_candidate(job: dict, work_dir: str | os.PathLike, options: NcuOptions = NcuOptions(), *,
                      ncu: str | os.PathLike | None = None, python: str = sys.executable) -> CandidateProfile:
    """Write `job`, run the harness under ncu, read back the profiled launch(es) (see CandidateProfile)."""
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    job_file = work / "profile-job.json"
    job_file.write_text(json.dumps(job))
    options = NcuOptions(**{**options.__dict__, "nvtx_range": job.get("nvtx_range", options.nvtx_range)})
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = run_ncu([python, "-m", "kernelloop.tune.profile.harness", str(job_file)], work / "profile", options,
                  ncu=ncu, env=env)
    notes = [f"ncu dropped unknown metric(s): {', '.join(run.dropped_metrics)}"] if run.dropped_metrics else []
    if run.status != "ok" or run.report is None:
        return CandidateProfile(run, None, notes + [f"ncu {run.status}: {run.log[-1500:]}"])
    profiles, more = load_profiles(run.report, ncu=ncu)
    notes += more
    try:
        kernel = select_kernel(profiles, options.kernel_regex)
    except LookupError as e:
        return CandidateProfile(run, None, notes + [str(e)])
    matching = [p for p in profiles if options.kernel_regex is None or re.search(options.kernel_regex, p.kernel)]
    if options.launch_count == 1:
        if len(profiles) > 1:
            notes.append(f"the report holds {len(profiles)} launches; kept the first matching one")
        return CandidateProfile(run, kernel, notes, [kernel])
    return CandidateProfile(run, kernel, notes, matching)


__all__ = ["CandidateProfile", "NVTX_RANGE", "NcuOptions", "NcuRun", "SOURCE_SECTION", "baseline_job", "export_csv",
           "harness_job", "load_profiles", "ncu_command", "profile_candidate", "run_ncu"]
