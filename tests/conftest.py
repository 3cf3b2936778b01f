import os
import subprocess
import sys
from pathlib import Path

import pytest
from kernelloop.base.builtin import ops_dir

# One width for every command a test runs, in process or as a subprocess: pytest-xdist's workers export
# COLUMNS=80, a plain run leaves it unset (the CLI then prints 200 columns), and a message wrapped at 80 columns
# would fail a test that reads it whole.
os.environ["COLUMNS"] = "200"

OPS = ops_dir()
FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[1]


def has_cuda() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def gpu_tier(config) -> bool:
    return (config.getoption("markexpr", "") or "").strip() == "gpu"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    # The GPU tier times kernels: one process, never pytest-xdist workers side by side on one GPU (the suite's addopts
    # ask for two workers; pytest-xdist reads numprocesses after this hook).
    if gpu_tier(config) and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0


def pytest_configure(config):
    # The GPU tier (`pytest -m gpu`): test modules that interpret Triton on the CPU set TRITON_INTERPRET=1 at import,
    # which would make every kernel imported after them run in the interpreter on the GPU host too.
    if gpu_tier(config):
        os.environ["KERNELLOOP_GPU_TIER"] = "1"
        os.environ.pop("TRITON_INTERPRET", None)


def pytest_collection_finish(session):
    # Collection imports every test module; one that sets TRITON_INTERPRET unconditionally would otherwise leave it
    # set for the in-process GPU tests that define kernels later.
    if os.environ.get("KERNELLOOP_GPU_TIER") == "1":
        os.environ.pop("TRITON_INTERPRET", None)


# Session-scoped set-ups that take long (sm_90 builds of every template, interpreter runs, an exported package):
# under pytest-xdist the test modules that use one run in one worker (a group), so each is made once, not once per
# worker.
SHARED_SET_UPS = frozenset({"surveyed", "confirmed_run", "package_dir", "persistent_rmsnorm_runs", "modes_op",
                            "library_builds", "epilogue_builds"})


def module_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def xdist_groups(items) -> dict[str, str]:
    """{test module: its pytest-xdist group (`--dist loadgroup`)}: the module itself, so its module-scoped set-up
    runs once, or, for modules that share a set-up of SHARED_SET_UPS (directly or through another module), the first
    of them by path."""
    uses: dict[str, set[str]] = {}
    for item in items:
        uses.setdefault(module_of(item.nodeid), set()).update(SHARED_SET_UPS & set(getattr(item, "fixturenames", ())))
    group = {m: m for m in uses}

    def root(m: str) -> str:
        while group[m] != m:
            m = group[m]
        return m
    first_user: dict[str, str] = {}
    for m in sorted(uses):
        for name in sorted(uses[m]):
            a, b = sorted((root(m), root(first_user.setdefault(name, m))))
            group[b] = a
    return {m: root(m) for m in uses}


# The groups that take longest (their tests' durations on an idle 2-core machine), longest first: pytest-xdist workers take them first
# (addopts keep the collection order: --no-loadscope-reorder), so the run does not end with one worker still busy
# on a long group started last. A group is named by its first module (xdist_groups). A stale list only costs balance.
LONGEST_GROUPS = (
    "tests/verify/gallery3/test_gallery3_semantics.py",
    "tests/test_walkthrough.py",
    "tests/integrate/test_apply_e2e.py",    # with every module that uses package_dir or persistent_rmsnorm_runs
    "tests/ptx/test_checks.py",             # with every module that uses the sm_90 survey
    "tests/fuse/test_fuse_pipeline.py",
    "tests/test_readme.py",
    "tests/test_loop.py",
    "tests/test_api.py",
    "tests/execute/test_verify_stress.py",
)


def longest_first(items, groups: dict[str, str]) -> None:
    """Sort `items` in place: LONGEST_GROUPS' tests first, in that order; the others after, in collection order."""
    rank = {group: i for i, group in enumerate(LONGEST_GROUPS)}
    items.sort(key=lambda item: rank.get(groups[module_of(item.nodeid)], len(rank)))


@pytest.hookimpl(tryfirst=True)   # before pytest-xdist's worker reads the xdist_group marks into the test ids
def pytest_collection_modifyitems(config, items):
    if config.pluginmanager.hasplugin("xdist"):
        groups = xdist_groups(items)
        for item in items:
            item.add_marker(pytest.mark.xdist_group(groups[module_of(item.nodeid)]))
        if hasattr(config, "workerinput"):   # a pytest-xdist worker: every worker sorts the same collection alike
            longest_first(items, groups)
    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (gpu tier: scripts/gpu_tier.sh on a GPU host)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _run_keys_in_a_temp_folder(tmp_path_factory):
    """Runs' keys (core/sandbox/keys.py) and the package signing key go to a folder of the test session, not the user's ~/.config (nor a folder
    $KERNELLOOP_KEY_DIR names outside the tests)."""
    olds = {v: os.environ.get(v) for v in ("KERNELLOOP_KEY_DIR", "KERNELLOOP_SIGNING_DIR")}
    os.environ["KERNELLOOP_KEY_DIR"] = str(tmp_path_factory.mktemp("run-keys"))
    os.environ["KERNELLOOP_SIGNING_DIR"] = str(tmp_path_factory.mktemp("signing"))   # deliver/package/signing.py
    yield
    for var, old in olds.items():
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old


@pytest.fixture(scope="session")
def layernorm():
    from kernelloop.core.spec import load_op
    return load_op(OPS / "layernorm")


@pytest.fixture(scope="session")
def interp_device() -> str:
    return "interpret"


@pytest.fixture(scope="module")
def evaluator_for(tmp_path_factory):
    """evaluator_for(bundle, secret, samples=None, sandbox=None, **options): an interpreter Evaluator over a worker
    of its own (a folder of the test session; `sandbox` as Worker takes it), timing with INTERPRETER_WALLCLOCK (at
    `samples` samples when given); `options` go to Evaluator (checks, timeouts, static_rules, aten_ops). Its
    workers are closed after the test module."""
    from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
    from kernelloop.core.execute.evaluate import Evaluator
    from kernelloop.core.execute.pool import Worker
    workers = []

    def make(bundle, secret: str, samples: int | None = None, sandbox: bool | None = None, **options):
        worker = Worker("interpret", tmp_path_factory.mktemp(f"worker-{secret}"), sandbox=sandbox)
        workers.append(worker)
        policy = INTERPRETER_WALLCLOCK if samples is None else INTERPRETER_WALLCLOCK.model_copy(
            update={"samples": samples})
        return Evaluator(bundle, "interpret", worker, policy, secret=secret, **options)
    yield make
    for worker in workers:
        worker.close()


@pytest.fixture
def job_dir(tmp_path):
    """job_dir(evaluator, name="job"): a job folder of this test inside the folder of `evaluator`'s worker. The
    worker's read-only view (core/sandbox/confine.py) keeps its own folder writable, so a job there runs in the worker
    as it is; a job folder elsewhere (tmp_path) stops the worker, and the next request starts a fresh one that
    imports torch and Triton again (seconds per test). The controller puts its jobs there too (loop.py)."""
    def make(evaluator, name: str = "job") -> Path:
        return Path(evaluator.worker.work_dir) / f"{tmp_path.name}-{name}"
    return make


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, list the trials that did not pass in any run archive the test wrote under its tmp_path (or its
    module's tmp_path_factory folders), with their verdict messages: rare failures of interpreter loop tests were
    seen in CI without saying which verdict the trial got."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    import json as _json
    import sqlite3
    roots = set()
    tmp = item.funcargs.get("tmp_path") if hasattr(item, "funcargs") else None
    if tmp is not None:
        roots.add(Path(tmp))
    try:
        roots.add(Path(item.config._tmp_path_factory.getbasetemp()))
    except Exception:  # noqa: BLE001 - diagnostics only
        pass
    lines = []
    dbs = sorted({db.resolve() for root in roots for db in root.rglob("archive.sqlite")})
    for db in dbs[:50]:
        if True:
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                for status, js in con.execute("SELECT status, json FROM trials WHERE status != 'PASSED'"):
                    msg = (_json.loads(js).get("verdict") or {}).get("message", "")
                    lines.append(f"{db}: {status}: {msg[:800]}")
                con.close()
            except Exception as e:  # noqa: BLE001
                lines.append(f"{db}: unreadable ({e})")
    if lines:
        rep.sections.append(("trials that did not pass", "\n".join(lines[:40])))


def optimize_side_by_side(jobs: list[tuple[str, Path, Path, list[str]]], logs: Path) -> None:
    """Run `kernelloop optimize OP --workloads W --budget 1 --no-confirm --out OUT *EXTRA` for every
    (OP, W, OUT, EXTRA) at once (each has its own workloads and run folder); each must exit 0, its log's tail in the
    failure; none is left running."""
    procs = []
    try:
        for i, (op, workloads, out, extra) in enumerate(jobs):
            log = open(logs / f"{i}-{op}.log", "w+")
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
    """optimize_side_by_side: independent interpreter optimize runs started side by side."""
    return optimize_side_by_side


# rmsnorm's persistent template at one pinned configuration, fp16: the run each of these modules exports a package
# from, on its own workloads (M, N)
PERSISTENT_RMSNORM = ["--template", "persistent", "--fix", "PROGRAMS_PER_SM=1,num_warps=4,PREFETCH=0"]
PERSISTENT_RMSNORM_RUNS = {
    "tests/package/test_export_runtime.py": ((5, 256), (23, 256)),
    "tests/package/test_export_sanitize.py": ((5, 256), (23, 512)),
    "tests/verify/test_cheat_gallery2.py": ((5, 256),),
}


@pytest.fixture(scope="session")
def persistent_rmsnorm_runs(request, tmp_path_factory, side_by_side) -> dict[str, Path]:
    """{module's path from the repository root: run folder} for the modules of PERSISTENT_RMSNORM_RUNS this session
    runs: interpreter runs (budget 1, no confirmation), independent, made side by side when the first is asked for."""
    wanted = sorted({item.nodeid.split("::")[0] for item in request.session.items} & set(PERSISTENT_RMSNORM_RUNS))
    base = tmp_path_factory.mktemp("persistent-rmsnorm")
    jobs, runs = [], {}
    for i, module in enumerate(wanted):
        wl = base / f"{i}.toml"
        wl.write_text('op = "rmsnorm"\n' + "".join(f'[[workload]]\naxes = {{ M = {m}, N = {n} }}\ndtype = "fp16"\n'
                                                   for m, n in PERSISTENT_RMSNORM_RUNS[module]))
        runs[module] = base / f"run-{i}"
        jobs.append(("rmsnorm", wl, runs[module], PERSISTENT_RMSNORM))
    side_by_side(jobs, base)
    return runs
