"""A build process of the build stage: `python -m kernelloop.core.build.aot_child --serve FOLDER`, kept running.

It compiles candidates for the GPU target without launching anything (core/build/aot_child.py: a stand-in driver that
reports the target, CPU tensors that say they live on the device), under the same confinement as the evaluation
worker (network and mount namespaces with a read-only view, the audit-hook sandbox armed before any candidate
source is imported). It never sees a GPU (CUDA_VISIBLE_DEVICES is empty), so builds never touch the devices being
timed. Kernels land in Triton's cache, which the evaluation workers share: their first call loads the binary.

One request at a time: a JSON line on its standard input naming a result file, to which it appends one event per
shape; a build that outlives its deadline or kills the process is recorded as such, and the next request starts a
fresh process.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from .aot import _events


class BuildServer:
    """One long-lived build process; `build` never raises for what a candidate does."""

    def __init__(self, folder: Path, arch: int, sm_count: int, number: int = 0, startup_s: float = 120.0):
        self.folder = Path(folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.arch, self.sm_count, self.number, self.startup_s = arch, sm_count, number, startup_s
        self.proc: subprocess.Popen | None = None
        self.requests = 0
        self.starts = 0

    def _start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["CUDA_VISIBLE_DEVICES"] = ""        # the stand-in driver: no CUDA context on the GPUs being timed
        env["TMPDIR"] = str(self.folder)       # ptxas's files in the build's own folder (the sandbox allows no other)
        src = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", "kernelloop.core.build.aot_child", "--serve", str(self.folder)]
        if env.get("KERNELLOOP_SANDBOX", "on") != "off":
            from ..sandbox.policy import os_layer, read_only_view, wrap_command, writable_roots
            layer = os_layer()
            argv = wrap_command(argv, layer, writable_roots([self.folder]) if read_only_view(layer) else None, env)
        self.err = open(self.folder / f"server{self.number}.log", "ab")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     cwd=self.folder, text=True)
        self.starts += 1

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.err.close()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):   # killed below when it does not end
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
        self.kill()

    def _usage(self) -> tuple[float, int]:
        """(CPU seconds, peak RSS bytes) of the running process, from /proc (Linux)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            rss = next((int(line.split()[1]) * 1024 for line in Path(f"/proc/{self.proc.pid}/status").read_text()
                        .splitlines() if line.startswith("VmHWM:")), 0)
            return cpu, rss
        except (OSError, ValueError, IndexError, StopIteration):
            return 0.0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024

    def build(self, spec_json: str, source: str, source_hash: str, config: dict, workloads: list[str],
              timeout_s: float) -> dict:
        """Build `source` with `config` for each workload (its JSON). Returns {"events": [...], "status": ...,
        "error", "wall_s", "cpu_s", "max_rss_bytes"}: status 'done', 'import_error', 'timeout' or 'crashed'."""
        source_file = self.folder / f"src_{source_hash[:24]}.py"
        if not source_file.exists():
            source_file.write_text(source)
        self.requests += 1
        result = self.folder / f"build{self.number}-{self.requests}.jsonl"
        request = {"arch": self.arch, "sm_count": self.sm_count, "spec": spec_json, "source_file": str(source_file),
                   "config": config, "workloads": workloads, "result": str(result)}
        fresh = self.proc is None or self.proc.poll() is not None
        if fresh:
            self.kill()
            self._start()
        cpu0, _ = self._usage()
        t0 = time.perf_counter()
        status, error = "done", ""
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            status, error = "crashed", "the build process was gone"
        # the deadline counts from the last event (a fresh process's first event waits for its imports too)
        seen, clock, limit = 0, time.monotonic(), timeout_s + (self.startup_s if fresh else 0.0)
        while status == "done":
            if self.proc.poll() is not None:
                status = "crashed"
                error = f"the build process exited with code {self.proc.returncode}"
                break
            events = _events(str(result))
            if events and events[-1].get("finished"):
                self.proc.stdout.readline()   # its acknowledgement
                break
            if len(events) != seen:
                seen, clock, limit = len(events), time.monotonic(), timeout_s
            elif time.monotonic() - clock > limit:
                status, error = "timeout", f"no build event within {limit:.0f} s"
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        cpu1, rss = self._usage() if status == "done" else (cpu0, 0)
        if status != "done":
            self.kill()
        events = [e for e in _events(str(result)) if "done" in e or "import_error" in e]
        result.unlink(missing_ok=True)
        if any("import_error" in e for e in events):
            status, error = "import_error", next(e["import_error"] for e in events if "import_error" in e)
        return {"events": events, "status": status, "error": error, "wall_s": wall, "cpu_s": max(0.0, cpu1 - cpu0),
                "max_rss_bytes": rss}
