"""scripts/gpu_session.sh packs what its steps wrote into one archive even when the device call's `timeout`
stops it mid-step (only a handful of files come back from a device call)."""

import shutil
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_stopped_session_still_packs_its_steps(tmp_path):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = subprocess.run(["timeout", "8", "bash", "scripts/gpu_session.sh", "selftest"], cwd=tmp_path,
                       env={"OUT": str(out), "PATH": "/usr/bin:/bin:/usr/local/bin", "SELFTEST_SLEEP": "120"},
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 124, r.stdout + r.stderr
    assert time.monotonic() - t0 < 30      # the 120 s step was stopped, not waited for
    left = sorted(p.name for p in out.iterdir())
    assert left == ["env-selftest.txt", "session-selftest.tgz", "steps.tsv"], r.stdout + r.stderr
    with tarfile.open(out / "session-selftest.tgz") as t:
        names = {Path(n).name for n in t.getnames()}
    assert {"quick.log", "slow.log", "steps.tsv"} <= names
    steps = (out / "steps.tsv").read_text()
    assert steps.startswith("quick\t0\t") and "stopped by a signal" in steps


def test_a_finished_session_packs_and_exits_0(tmp_path):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    out = tmp_path / "out"
    r = subprocess.run(["bash", "scripts/gpu_session.sh", "selftest"], cwd=tmp_path,
                       env={"OUT": str(out), "PATH": "/usr/bin:/bin:/usr/local/bin", "SELFTEST_SLEEP": "0"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["env-selftest.txt", "session-selftest.tgz", "steps.tsv"]
    steps = (out / "steps.tsv").read_text().splitlines()
    assert [line.split("\t")[:2] for line in steps] == [["quick", "0"], ["slow", "0"]]


def test_every_repository_file_a_phase_reads_exists():
    """A phase that names a missing workload file or prior archive would spend a device call on an error."""
    import re
    text = (ROOT / "scripts" / "gpu_session.sh").read_text()
    refs = set(re.findall(r"(?<![\w$/])((?:benchmarks|ops)/[\w./-]+\.(?:toml|sqlite|json|gz))", text))
    assert len(refs) >= 20 and "benchmarks/workloads/gemm-prefill-few-tiles.toml" in refs
    assert [r for r in sorted(refs) if not (ROOT / r).is_file()] == []
