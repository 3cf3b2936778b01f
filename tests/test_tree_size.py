"""The tracked tree stays small: at most 8 MiB (8 × 2**20 = 8,388,608 bytes) summed over `git ls-files`.

Recorded results that back a current figure are kept xz-compressed (docs/results.md); superseded ones are left to
git history. Skipped outside a git checkout (an sdist, an installed package)."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 8 * 2**20


def _tracked() -> list[Path]:
    if shutil.which("git") is None:
        pytest.skip("no git")
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True)
    if proc.returncode != 0 or not proc.stdout:
        pytest.skip("not a git checkout")
    return [ROOT / p for p in proc.stdout.decode().split("\0") if p]


def test_the_tracked_tree_is_at_most_8_mib():
    sizes = {p: p.stat().st_size for p in _tracked() if p.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:10]
    assert total <= LIMIT, (f"tracked files sum to {total:,} bytes, over {LIMIT:,}; the largest: "
                            + ", ".join(f"{p.relative_to(ROOT)} {n:,}" for p, n in largest))


def test_recorded_results_are_kept_compressed():
    """No recorded file of 64 KiB or more is kept uncompressed under benchmarks/ or examples/ (a gzipped one is
    recompressed as .xz: `kernelloop.base.compressed` reads both)."""
    big = [p.relative_to(ROOT).as_posix() for p in _tracked()
           if p.is_file() and p.relative_to(ROOT).parts[0] in ("benchmarks", "examples")
           and not p.name.endswith(".xz") and p.suffix != ".py" and p.stat().st_size >= 64 * 1024]
    assert big == []
