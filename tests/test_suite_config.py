"""How the suite runs: two pytest-xdist workers by default (the README's test command unchanged), tests grouped so
shared set-ups are made once and the longest groups start first, and the GPU tier in one process."""

from __future__ import annotations

import importlib.util
import re
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


def _items(*tests: tuple[str, tuple[str, ...]]) -> list[SimpleNamespace]:
    return [SimpleNamespace(nodeid=nodeid, fixturenames=("tmp_path", *names)) for nodeid, names in tests]


def test_modules_sharing_a_long_set_up_are_one_group_named_by_the_first():
    conftest = _suite_conftest()
    items = _items(("tests/z/test_c.py::t1", ("package_dir",)), ("tests/z/test_c.py::t2", ()),
                   ("tests/b/test_b.py::t", ("package_dir", "persistent_rmsnorm_runs")),
                   ("tests/y/test_d.py::t", ("persistent_rmsnorm_runs",)),   # joined through tests/b
                   ("tests/a/test_a.py::t", ("layernorm", "tmp_path")), ("tests/ptx/test_x.py::t", ("surveyed",)),
                   ("tests/ptx/test_y.py::t", ()))
    assert conftest.xdist_groups(items) == {
        "tests/z/test_c.py": "tests/b/test_b.py", "tests/b/test_b.py": "tests/b/test_b.py",
        "tests/y/test_d.py": "tests/b/test_b.py", "tests/a/test_a.py": "tests/a/test_a.py",
        "tests/ptx/test_x.py": "tests/ptx/test_x.py", "tests/ptx/test_y.py": "tests/ptx/test_y.py"}


def test_workers_take_the_longest_groups_first_and_keep_the_rest_in_order():
    conftest = _suite_conftest()
    first, third = conftest.LONGEST_GROUPS[0], conftest.LONGEST_GROUPS[2]
    items = _items(("tests/a/test_x.py::t1", ()), ("tests/zz/test_late.py::t", ("package_dir",)),
                   (first + "::t", ()), ("tests/a/test_x.py::t2", ()), (third + "::t", ("package_dir",)),
                   ("tests/b/test_y.py::t", ()))
    ids = [i.nodeid for i in items]
    conftest.longest_first(items, conftest.xdist_groups(items))
    assert [i.nodeid for i in items] == [ids[2], ids[1], ids[4], ids[0], ids[3], ids[5]]


def test_the_longest_groups_and_shared_set_ups_name_what_is_there():
    """A renamed test file or fixture leaves the lists: every entry names a module, or a session fixture."""
    conftest = _suite_conftest()
    for group in conftest.LONGEST_GROUPS:
        assert (ROOT / group).is_file(), group
    fixtures = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    for name in conftest.SHARED_SET_UPS:
        assert re.search(rf'@pytest\.fixture\(scope="session"\)\ndef {name}\(', fixtures), name


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


def test_a_module_runs_on_one_xdist_worker():
    """The default run (two workers): every test of a module on the same worker, its module set-up made once; the
    test ids carry their group (pytest-xdist reads the marks conftest.py adds, so it must add them first)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "tests/test_suite_config.py",
                        "tests/test_pyast.py", "-k", "not one_xdist_worker and not starts_no_workers"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    ran = re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (tests/[\w/]+\.py)::\w+@(\S+)", r.stdout, re.M)
    workers: dict[str, set[str]] = {}
    for worker, module, group in ran:
        assert group == module
        workers.setdefault(module, set()).add(worker)
    assert set(workers) == {"tests/test_suite_config.py", "tests/test_pyast.py"}, r.stdout[-3000:]
    assert all(len(w) == 1 for w in workers.values()), workers
