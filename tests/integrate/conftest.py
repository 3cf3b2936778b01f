"""Shared by the apply tests: independent interpreter optimize runs started side by side."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def optimize_side_by_side(jobs: dict[str, tuple[Path, Path, list[str]]], logs: Path) -> None:
    """Run `kernelloop optimize OP --workloads W --budget 1 --no-confirm --out OUT *EXTRA` for every
    OP -> (W, OUT, EXTRA) at once (each has its own workloads and run folder); each must exit 0, its log's tail in
    the failure; none is left running."""
    procs = []
    try:
        for op, (workloads, out, extra) in jobs.items():
            log = open(logs / f"{op}.log", "w+")
            procs.append((op, log, subprocess.Popen(
                [sys.executable, "-m", "kernelloop.cli.app", "optimize", op, "--workloads", str(workloads),
                 "--budget", "1", "--no-confirm", "--out", str(out), *extra], cwd=ROOT, stdout=log,
                stderr=subprocess.STDOUT)))
        for op, log, proc in procs:
            rc = proc.wait(timeout=600)
            log.seek(0)
            assert rc == 0, f"optimize {op} exited {rc}:\n{log.read()[-3000:]}"
    finally:
        for _, log, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


@pytest.fixture(scope="session")
def side_by_side():
    return optimize_side_by_side
