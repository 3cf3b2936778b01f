"""How the suite runs: two pytest-xdist workers by default (the README's test command unchanged), tests grouped so
shared set-ups are made once and the longest groups start first, and the GPU tier in one process."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _suite_conftest():
    spec = importlib.util.spec_from_file_location("suite_conftest", ROOT / "tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _bench_run():
    spec = importlib.util.spec_from_file_location("bench_run_config", ROOT / "benchmarks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod           # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(spec.name, None)
    return mod


def test_the_default_run_is_two_xdist_workers_in_groups():
    opts = shlex.split(PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"])
    assert opts[opts.index("-n") + 1] == "2"
    assert opts[opts.index("--dist") + 1] == "loadgroup" and "--no-loadscope-reorder" in opts
    assert any(d.startswith("pytest-xdist") for d in PYPROJECT["project"]["optional-dependencies"]["test"])


def test_workers_take_the_longest_groups_first_and_keep_the_rest_in_order():
    conftest = _suite_conftest()
    ids = ["tests/a/test_x.py::t1", "tests/ptx/test_checks.py::t", conftest.LONGEST_GROUPS[0] + "::t",
           "tests/a/test_x.py::t2", "tests/select/test_pareto.py::t", "tests/b/test_y.py::t"]
    items = [SimpleNamespace(nodeid=i) for i in ids]
    conftest.longest_first(items)
    assert [i.nodeid for i in items] == [ids[2], ids[1], ids[0], ids[3], ids[4], ids[5]]
    assert conftest.xdist_group(ids[1]) == "tests/ptx/" and conftest.xdist_group(ids[4]) == "tests/select/"
    # a renamed or removed test file leaves the list: every entry names what is there
    for group in conftest.LONGEST_GROUPS:
        assert (ROOT / group).exists(), group


def test_the_gpu_tier_steps_run_in_one_process():
    bench = _bench_run()
    steps = [s for suite in bench.SUITES.values() for s in suite.steps if "-m" in s.argv and "gpu" in s.argv]
    assert steps
    for step in steps:
        argv = list(step.argv)
        assert argv[argv.index("-p", argv.index("--timeout")) + 1] == "no:xdist", argv
        assert "addopts=-ra" in argv, argv     # the suite's addopts name -n, which pytest refuses without xdist


def test_pytest_m_gpu_starts_no_workers():
    """`pytest -m gpu` by hand (the suite's addopts unchanged): one process, the tests deselected or skipped here."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-v",
                        "tests/test_suite_config.py"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 5, r.stdout[-2000:] + r.stderr[-2000:]   # every test here deselected: no gpu marks
    assert "workers" not in r.stdout and "bringing up nodes" not in r.stdout, r.stdout[-2000:]
