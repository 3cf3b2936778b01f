"""The read-only view of the sandbox's OS layer (core/sandbox/confine.py, started by core/sandbox/policy.py `wrap_command`):
a process that imports candidate code sees every mount read-only but its job folder, Triton's cache, its temp
folder and its log, also for writes the audit hook never sees (a C++ open inside torch); it cannot make the view
writable again; Triton's compile (ptxas, a C build loaded from the cache) keeps working in it; honest candidates
PASS through the evaluator with it on; the environment record says what the probe found. Where this machine has no
read-only view the tests that need one are skipped with the probe's reason."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.core.sandbox import confine
from kernelloop.core.sandbox import policy as sandbox
from kernelloop.base.records import Candidate, Status, Workload

LAYER = sandbox.os_layer()
needs_view = pytest.mark.skipif(not sandbox.read_only_view(LAYER), reason=f"no read-only view here: {LAYER}")
W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")
CONFIG = {"BLOCK_N": 256, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0}
SRC = str(Path(confine.__file__).resolve().parents[3])

# Runs inside the namespaces with no audit hook armed (standing for native code, which the hook never sees): sets
# the view up as a worker does, then prints, per attempt, "allowed" or the errno name.
INSIDE = r'''
import ctypes, json, os, shutil, subprocess, sys, tempfile
from kernelloop.core.sandbox.confine import CLONE_NEWUSER, MS_BIND, MS_REMOUNT, _libc, confine_from_env
view = confine_from_env()
job, cache, outside = sys.argv[1:4]
def create(path):
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
def call(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
libc = _libc()
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
def build_and_load():
    """What Triton does with its launcher: a C build in the temp folder, the library copied into the cache, loaded"""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return
    tmp = tempfile.mkdtemp()
    open(os.path.join(tmp, "l.c"), "w").write("int answer(void) { return 42; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(tmp, "l.so"), os.path.join(tmp, "l.c")], check=True)
    shutil.copy(os.path.join(tmp, "l.so"), os.path.join(cache, "l.so"))
    assert ctypes.CDLL(os.path.join(cache, "l.so")).answer() == 42
ATTEMPTS = {
    "write outside": lambda: create(os.path.join(outside, "planted")),
    "mkdir outside": lambda: os.mkdir(os.path.join(outside, "planted-dir")),
    "write beside the job folder": lambda: create(os.path.join(os.path.dirname(job), "planted")),
    "remove outside": lambda: os.remove(os.path.join(outside, "keep")),
    "remount / read-write": lambda: call(libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None)),
    "unmount the job folder's bind": lambda: call(libc.umount2(job.encode(), 2)),
    "a new user namespace regains no privilege": lambda: (call(libc.unshare(CLONE_NEWUSER)),
                                                          call(libc.mount(None, b"/", None, MS_REMOUNT | MS_BIND, None))),
    "write in the job folder": lambda: create(os.path.join(job, "out.pt")),
    "write in Triton's cache": lambda: create(os.path.join(cache, "kernel.cubin")),
    "write in the temp folder": lambda: os.close(tempfile.mkstemp()[0]),
    "write /dev/null": lambda: open("/dev/null", "w").write("x"),
    "C build in temp, loaded from the cache": build_and_load,
}
out = {"view": view}
for name, fn in ATTEMPTS.items():
    try:
        fn()
        out[name] = "allowed"
    except OSError as e:
        import errno
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
'''


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}   # as on a clean machine
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def inside(tmp_path_factory):
    base = tmp_path_factory.mktemp("view")
    job, cache, outside = base / "run" / "job", base / "cache", base / "outside"
    (job / "tmp").mkdir(parents=True)
    outside.mkdir()
    (outside / "keep").write_text("the run's archive")
    env = _env(TMPDIR=str(job / "tmp"))
    argv = sandbox.wrap_command([sys.executable, "-c", INSIDE, str(job), str(cache), str(outside)], LAYER,
                                [str(job), str(cache)] if sandbox.read_only_view(LAYER) else None, env)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=job)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), job, cache, outside


REFUSED = {"write outside": "EROFS", "mkdir outside": "EROFS", "write beside the job folder": "EROFS",
           "remove outside": "EROFS", "remount / read-write": "EPERM", "unmount the job folder's bind": "EPERM",
           "a new user namespace regains no privilege": "EPERM"}


@needs_view
@pytest.mark.parametrize("attempt", sorted(REFUSED))
def test_outside_its_folders_nothing_can_be_written_even_without_the_audit_hook(inside, attempt):
    results, job, cache, outside = inside
    assert results["view"] == confine.describe([str(job.resolve()), str(cache.resolve()), *confine.KERNEL_VIEWS]), \
        results["view"]
    assert results[attempt] == REFUSED[attempt], results
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert not (job.parent / "planted").exists()


@needs_view
@pytest.mark.parametrize("attempt", ["write in the job folder", "write in Triton's cache", "write in the temp folder",
                                     "write /dev/null", "C build in temp, loaded from the cache"])
def test_the_job_folder_tritons_cache_and_the_temp_folder_stay_writable(inside, attempt):
    results, job, cache, _ = inside
    assert results[attempt] == "allowed", results
    assert (job / "out.pt").exists() and (cache / "kernel.cubin").exists()


@needs_view
def test_a_view_that_cannot_be_set_up_is_reported_and_the_process_goes_on(tmp_path):
    script = "from kernelloop.core.sandbox.confine import confine_from_env\nprint(confine_from_env())"
    env = _env()
    argv = sandbox.wrap_command([sys.executable, "-c", script], LAYER, ["/"], env)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "read-only view unavailable: [Errno 22] the root itself is to stay writable"


# ---- the probe, its record, and the fall-back ---------------------------------------------------------------

def test_the_probe_says_what_the_os_layer_is():
    assert LAYER == f"{sandbox.MOUNT}, {sandbox.VIEW}" or LAYER.startswith(f"{sandbox.NET}; read-only view unavailable: ") \
        or LAYER.startswith("unavailable: "), LAYER


def test_the_environment_record_names_the_read_only_view():
    from kernelloop.core.device import environment
    assert environment("interpret").sandbox == f"audit hook; os layer: {LAYER}"
    if sandbox.read_only_view(LAYER):
        assert environment("interpret").sandbox == (
            "audit hook; os layer: user+net+mount namespaces, read-only view except the job folder, Triton's cache, "
            "the temp folder, the log file and /proc")


def test_where_the_kernel_refuses_the_mount_namespace_the_network_namespace_stays(monkeypatch):
    real = subprocess.run

    def refuse_mount(argv, **kw):
        if "--mount" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "unshare: cannot change root filesystem propagation: "
                                                            "Operation not permitted\n")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sandbox.subprocess, "run", refuse_mount)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: "/usr/bin/unshare" if name == "unshare" else None)
    sandbox.os_layer.cache_clear()
    try:
        layer = sandbox.os_layer()
    finally:
        sandbox.os_layer.cache_clear()
        monkeypatch.setattr(sandbox.subprocess, "run", real)
    assert layer == ("user+net namespaces; read-only view unavailable: unshare: cannot change root filesystem "
                     "propagation: Operation not permitted")
    assert not sandbox.read_only_view(layer)
    env = {}
    assert sandbox.wrap_command(["python"], layer, ["/tmp/job"], env) == \
        ["/usr/bin/unshare", "--user", "--map-root-user", "--net", "python"]
    assert env == {}


def test_the_view_can_be_turned_off_alone(monkeypatch):
    monkeypatch.setenv("KERNELLOOP_READONLY_VIEW", "off")
    sandbox.os_layer.cache_clear()
    try:
        layer = sandbox.os_layer()
    finally:
        sandbox.os_layer.cache_clear()
    if layer.startswith("unavailable: "):
        pytest.skip(f"no OS layer on this machine: {layer}")
    assert layer == "user+net namespaces; read-only view unavailable: turned off (KERNELLOOP_READONLY_VIEW=off)"


# ---- through the evaluator ------------------------------------------------------------------------------------

def test_the_audit_hook_alone_does_not_see_a_write_inside_torchs_cpp(tmp_path):
    """Why the view matters: torch.save to a path opens the file in C++ (no audit event)."""
    job, target = tmp_path / "job", tmp_path / "planted.pt"
    job.mkdir()
    script = ("import sys, torch\nfrom kernelloop.core.sandbox.policy import default_policy, install\n"
              "box = install(default_policy([sys.argv[1]]))\ntorch.save(1, sys.argv[2])\n"
              "print(len(box.take_denials()))")
    out = subprocess.run([sys.executable, "-c", script, str(job), str(target)], capture_output=True, text=True,
                         timeout=300, env=_env(TMPDIR=str(job)), cwd=job)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0"] and target.exists()


@needs_view
def test_an_honest_kernel_passes_with_the_view_on(sandbox_evaluator, layernorm, tmp_path):
    honest = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"], config=CONFIG)
    ev = sandbox_evaluator.evaluate(honest, W, tmp_path / "job")   # outside the worker's folder, on purpose
    assert ev.verdict.status is Status.PASSED, ev.verdict
    worker = sandbox_evaluator.worker
    assert worker.os_layer == LAYER and worker.view.startswith("read-only view except "), (worker.os_layer,
                                                                                          worker.view)
    # its job folder lies outside the worker's own: the worker was restarted with it in its view
    assert str((tmp_path / "job").resolve()) in worker.writable
    assert worker.view.startswith(f"read-only view except {worker.work_dir}, ")   # the log lies inside it


@needs_view
def test_a_write_the_hook_cannot_see_fails_in_the_worker(sandbox_evaluator, with_code, layernorm, tmp_path, job_dir):
    target = tmp_path / "planted.pt"
    code = f'__import__("torch").save(1, {str(target)!r})'
    ev = sandbox_evaluator.evaluate(with_code(launch_code=code), W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.RUNTIME_ERROR, ev.verdict
    assert "Read-only file system" in ev.verdict.message + ev.verdict.log, ev.verdict
    assert not target.exists()
    honest = sandbox_evaluator.evaluate(Candidate(op="layernorm", template="rowwise",
                                                  source=layernorm.template_sources["rowwise"], config=CONFIG),
                                        W, job_dir(sandbox_evaluator, "next"))
    assert honest.verdict.status is Status.PASSED, honest.verdict


# ---- the ahead-of-time build (a real sm_90 compile) inside the view ----------------------------------------

@needs_view
def test_a_real_sm90_compile_builds_inside_the_view_and_a_write_outside_fails(layernorm, tmp_path, aot,
                                                                              real_sm90_build):
    target = tmp_path / "planted.pt"
    evil = tmp_path / "evil.py"
    evil.write_text(layernorm.template_sources["rowwise"].replace(
        "\ndef launch(", f'\n__import__("torch").save(1, {str(target)!r})\n\ndef launch(', 1))
    out = aot(layernorm, evil, tmp_path / "cache2")
    assert out.status != "built" and "Read-only file system" in out.error, out
    assert not target.exists()
