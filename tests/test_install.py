"""A non-editable install works from any directory: build the wheel from a copy of the source tree, install it into
a fresh virtual environment (`--system-site-packages`, so torch, triton and pydantic are reused and nothing is
downloaded), and from a folder outside the clone run `kernelloop ops` and
`kernelloop optimize layernorm --device interpret --budget 1 --no-confirm` — the built-in op and its interpreter
workloads found by name in the installed package's data, a worker started from the installed package. The
confirmation (two more fresh workers per workload, nothing of the install's own) is left to the tests of the
confirmation and the README's quickstart run. About 35 s on two cores."""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from kernelloop.base.builtin import builtin_ops

ROOT = Path(__file__).resolve().parents[1]
BUILTIN = ROOT / "src" / "kernelloop" / "builtin"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter install walk")]


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET", "VIRTUAL_ENV")}
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def _source_files(folder: Path) -> set[str]:
    return {p.relative_to(folder.parents[2]).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The venv's bin folder, with the wheel built from a copy of src/, pyproject.toml and README.md installed."""
    pytest.importorskip("setuptools.build_meta", reason="the build backend (setuptools) is not installed")
    base = tmp_path_factory.mktemp("install")
    src = base / "source"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "src", src / "src", ignore=ignore)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, src / f)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(base / "dist"), str(src)], cwd=base)
    wheels = list((base / "dist").glob("kernelloop-*.whl"))
    assert len(wheels) == 1, wheels
    venv.create(base / "venv", system_site_packages=True, with_pip=False)
    bin_dir = base / "venv" / "bin"
    # the interpreter's own pip installs into the venv when run as the venv's python
    _run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[0])], cwd=base)
    return bin_dir


def test_wheel_carries_every_builtin_file(installed):
    site = Path(_run([str(installed / "python"), "-c", "import kernelloop, pathlib; "
                      "print(pathlib.Path(kernelloop.__file__).parent)"], cwd=installed).stdout.strip())
    assert installed.parent in site.parents, f"kernelloop imported from {site}, not from the venv"
    want = _source_files(BUILTIN)
    got = _source_files(site / "base" / "builtin")
    assert want - got == set(), f"the installed package lacks {sorted(want - got)}"
    assert {"kernelloop/base/builtin/ops/layernorm/spec.toml", "kernelloop/base/builtin/knowledge/hopper-facts.toml",
            "kernelloop/base/builtin/prompts/v1/system.md"} <= got
    templates = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "kernelloop").glob("*/*/templates/*")
                 if p.is_file()}
    assert "kernelloop/tune/schedule/templates/schedule_module.py.j2" in templates
    missing = sorted(t for t in templates if not (site.parent / t).is_file())
    assert not missing, f"the installed package lacks {missing}"


def test_ops_and_optimize_from_outside_the_clone(installed, tmp_path):
    walk = tmp_path / "walk"
    walk.mkdir()
    assert ROOT not in walk.parents
    listing = json.loads(_run([str(installed / "kernelloop"), "ops", "--json"], cwd=walk).stdout)
    assert [o["name"] for o in listing["ops"]] == builtin_ops()
    assert all(installed.parent in Path(o["folder"]).parents and o["error"] is None for o in listing["ops"])
    _run([str(installed / "kernelloop"), "optimize", "layernorm", "--device", "interpret", "--budget", "1",
          "--no-confirm"], cwd=walk)
    runs = list((walk / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("layernorm-")
    summary = json.loads(_run([str(installed / "kernelloop"), "show", str(runs[0]), "--json"], cwd=walk).stdout)
    assert summary["workloads"] and all("best" in w for w in summary["workloads"])
