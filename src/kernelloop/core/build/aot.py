"""Ahead-of-time builds of template configurations for a GPU target, on a machine without that GPU.

Each configuration is built the way a run would build it: the template's own `launch(*inputs, *outputs, **config)`
is called on tensors of the workload's shapes and dtypes, and every Triton kernel it launches is compiled to a cubin
for the target (default sm_90) instead of being launched. What comes back per configuration:
- `built`: every kernel compiled; with each kernel's shared memory (Triton's metadata), warps, and registers,
  stack and local memory from `cuobjdump --dump-resource-usage` of its cubin;
- `compile_error`: Triton or ptxas refused it (the message is kept);
- `launch_error`: the template's Python refused the configuration before compiling (e.g. a ValueError);
- `timeout` / `crashed`: the build did not finish in the time allowed or killed its process.
`launch_limits` then says which built configurations the device would refuse to launch (shared memory over the
opt-in limit, too many threads or registers per program).

Builds run in fresh interpreters (a process that ran interpreted kernels is not a clean compiler), several
configurations per process, several processes at once; a configuration that hangs or kills its process costs
only itself. Where there is no GPU, the process stands in a driver that reports the target and hands tensors
to the template as if they lived on a CUDA device (`is_cuda`, the SM count and capability the template may
ask for); on a host whose GPU is the target, Triton's own driver does. Nothing is launched, so no data is read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ...base.records import OpSpec, Workload
from ...base.records.device import DeviceProperties

BUILT, COMPILE_ERROR, LAUNCH_ERROR, TIMEOUT, CRASHED = "built", "compile_error", "launch_error", "timeout", "crashed"


@dataclass
class BuildOutcome:
    """The ahead-of-time build of one configuration (without its "template" key in `config`)."""

    template: str
    config: dict
    status: str
    # per launched kernel: name, shared, num_warps, grid, scalars, cubin_sha256, REG, STACK, LOCAL
    kernels: list[dict] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    @property
    def shared_bytes(self) -> int:
        return max((k.get("shared") or 0 for k in self.kernels), default=0)

    @property
    def threads(self) -> int:
        return max((k.get("num_warps", 0) * 32 for k in self.kernels), default=0)

    @property
    def registers(self) -> int | None:
        regs = [k["REG"] for k in self.kernels if k.get("REG") is not None]
        return max(regs) if regs else None

    @property
    def spills(self) -> bool:
        """Whether any kernel uses local memory (register spills or local arrays)."""
        return any((k.get("LOCAL") or 0) > 0 or (k.get("STACK") or 0) > 0 for k in self.kernels)

    @property
    def launches(self) -> tuple | None:
        """What the configuration runs: each launch's binary, grid and scalar arguments, in order; two
        configurations with equal `launches` do the same work on the GPU (None: not built, or a grid unknown)."""
        if self.status != BUILT or not self.kernels or any(k.get("grid") is None for k in self.kernels):
            return None
        return tuple((k.get("cubin_sha256"), tuple(k["grid"]), tuple(k.get("scalars") or ())) for k in self.kernels)

    def as_dict(self) -> dict:
        return {"template": self.template, "config": self.config, "status": self.status, "kernels": self.kernels,
                "error": self.error, "seconds": round(self.seconds, 3)}


def launch_limits(outcome: BuildOutcome, props: DeviceProperties) -> list[str]:
    """The device limits a built configuration's kernels break at launch (empty: it launches)."""
    out = []
    for k in outcome.kernels:
        threads = k.get("num_warps", 0) * 32
        if k.get("shared") is not None and k["shared"] > props.shared_per_block_optin:
            out.append(f"{k.get('name', '?')}: shared memory {k['shared']} > {props.shared_per_block_optin} bytes")
        if threads > props.max_threads_per_block:
            out.append(f"{k.get('name', '?')}: {threads} threads > {props.max_threads_per_block}")
        if k.get("REG") is not None and k["REG"] * threads > props.regs_per_sm:
            out.append(f"{k.get('name', '?')}: {k['REG']} registers x {threads} threads > {props.regs_per_sm}")
    return out


# The build process (`aot_child.py`, run as `python -m kernelloop.core.build.aot_child JOB RESULT`): reads a job file,
# appends one JSON line per event to the result file (flushed), so the parent knows which configuration a hung or
# killed process was building.
_CHILD_MODULE = "kernelloop.core.build.aot_child"


MAX_EVENT_BYTES = 16 << 20   # a build process's result file is read up to this size (it ran candidate code)


def _events(path: str) -> list[dict]:
    """The events a build process wrote so far (a line cut by its death is skipped): JSON objects only, from at
    most MAX_EVENT_BYTES of the file -- data from a process that imported candidate code, never unpickled."""
    out = []
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_EVENT_BYTES).decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def _run_chunk(job: dict, items: list[dict], timeout_s: float, startup_s: float, workdir: Path) -> list[dict]:
    """Build `items` in fresh processes; a hung or crashed build is recorded and the rest continue."""
    results: list[dict | None] = [None] * len(items)
    todo = list(range(len(items)))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TMPDIR"] = str(workdir)   # ptxas's files in the build's own folder (the sandbox allows no other temp)
    src = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    while todo:
        fd, job_path = tempfile.mkstemp(suffix=".json", dir=workdir)
        with os.fdopen(fd, "w") as f:
            json.dump({**job, "items": [items[i] for i in todo]}, f)
        res_path = job_path + ".jsonl"
        status, tail = None, ""
        err_path = job_path + ".stderr"
        argv, child_env = [sys.executable, "-m", _CHILD_MODULE, job_path, res_path], dict(env)
        if env.get("KERNELLOOP_SANDBOX", "on") != "off":   # the OS layer too: no network, a read-only view
            from ..sandbox.policy import os_layer, read_only_view, wrap_command, writable_roots
            layer = os_layer()
            argv = wrap_command(argv, layer, writable_roots([workdir]) if read_only_view(layer) else None,
                                child_env)
        with open(err_path, "w") as err_file:  # a file, not a pipe: a full pipe would stall the child
            proc = subprocess.Popen(argv, env=child_env, stdout=subprocess.DEVNULL, stderr=err_file, cwd=workdir)
        # the parent watches the result file: `timeout_s` counts from each configuration's start line,
        # `startup_s` from the process's start to its first line (imports)
        clock, seen = time.monotonic(), 0
        limit = startup_s
        while proc.poll() is None:
            time.sleep(0.2)
            n = len(_events(res_path))
            if n != seen:
                seen, clock, limit = n, time.monotonic(), timeout_s
            elif time.monotonic() - clock > limit:
                proc.kill()
                proc.wait()
                status, tail = TIMEOUT, (f"no result within {timeout_s:.0f} s" if seen
                                         else f"the build process did not start within {startup_s:.0f} s")
                break
        err = Path(err_path).read_text(errors="replace")
        if status is None and proc.returncode != 0:
            status, tail = CRASHED, f"the build process exited with code {proc.returncode}: " + err[-1500:]
        lines = _events(res_path)
        started = None
        for ev in lines:
            if "start" in ev:
                started = ev["start"]
            else:
                results[todo[ev["done"]]] = ev
                started = None
        remaining = [i for i in todo if results[i] is None]
        if status is None or not remaining:
            break
        if started is not None:  # it was building this one: the hang or crash is its verdict
            blamed = todo[started]
        elif len(remaining) < len(todo):  # died between configurations after some progress: try the rest again
            todo = remaining
            continue
        else:  # died before its first configuration (at import: the environment, not a configuration): stop
            for i in remaining:
                results[i] = {"status": status, "kernels": [], "error": tail, "seconds": 0.0}
            break
        results[blamed] = {"status": status, "kernels": [], "error": tail, "seconds": 0.0}
        todo = [i for i in remaining if i != blamed]
    return [r if r is not None else {"status": CRASHED, "kernels": [], "error": "no result", "seconds": 0.0}
            for r in results]


def build_configs(spec: OpSpec, template_files: dict[str, Path], workload: Workload, configs: list[dict], *,
                  arch: int = 90, sm_count: int = 132, jobs: int = 2, chunk: int = 16,
                  timeout_s: float = 300.0, startup_s: float = 60.0, progress=None,
                  keep_asm: bool = False, ptx_overrides: dict[str, dict[str, str]] | None = None
                  ) -> list[BuildOutcome]:
    """Build every configuration (each with its "template" key) of `workload` ahead of time for sm_`arch`.

    `jobs` processes build at once, `chunk` configurations per process; a process gets `timeout_s` per configuration
    it has left plus `startup_s` (imports); past that, the configuration it was building is a timeout.
    With `keep_asm`, each kernel row also carries "asm": its PTX, cubin (base64) and Triton's metadata.
    `ptx_overrides` ({kernel name: {sha256 of its PTX: edited PTX file}}, kernelloop.core.build.ptx_override) compiles
    those kernels with the edited PTX substituted; their rows say so ("ptx_override")."""
    items = [{"template": c["template"], "config": {k: v for k, v in c.items() if k != "template"}}
             for c in configs]
    job = {"spec": spec.model_dump_json(), "workload": workload.model_dump_json(), "arch": arch,
           "sm_count": sm_count, "keep_asm": keep_asm, "ptx_overrides": ptx_overrides or {}, "files": {k: str(Path(v).resolve()) for k, v in template_files.items()}}
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    out: list[BuildOutcome | None] = [None] * len(items)
    with tempfile.TemporaryDirectory(prefix="kernelloop-aot-") as tmp:
        def one(ci: int) -> None:
            t0 = time.perf_counter()
            rows = _run_chunk(job, chunks[ci], timeout_s, startup_s, Path(tmp))
            for j, row in enumerate(rows):
                it = chunks[ci][j]
                out[ci * chunk + j] = BuildOutcome(template=it["template"], config=it["config"], status=row["status"],
                                                   kernels=row.get("kernels", []), error=row.get("error", ""),
                                                   seconds=row.get("seconds", 0.0))
            if progress is not None:
                progress(len(chunks[ci]), time.perf_counter() - t0)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(one, range(len(chunks))))
    return [o for o in out if o is not None]
