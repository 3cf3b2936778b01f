"""The sandbox of processes that import candidate code (core/sandbox/policy.py): each forbidden action denied and named,
through paths the static rules never see (the candidates here run with the rules off, as code the rules cannot
parse would); honest candidates untouched; a real sm_90 ahead-of-time compile (ptxas, cuobjdump, Triton's cache)
working inside it; the OS layer detected or reported unavailable (its read-only view: test_sandbox_view.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.core.sandbox import policy as sandbox
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.verify.explain import failure_reason

W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")
CONFIG = {"BLOCK_N": 256, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0}

# Each attack runs in a fresh interpreter with the sandbox armed (an audit hook is never removed); the script
# prints, per attack, the denial message or "allowed".
PROBE = r'''
import json, os, sys
from kernelloop.core.sandbox.policy import SandboxDenied, default_policy, install
job, outside = sys.argv[1], sys.argv[2]
box = install(default_policy([job], os.path.join(job, "sandbox.denied")))
def attempt(name, fn):
    try:
        fn()
        return name, "allowed"
    except SandboxDenied as e:
        return name, str(e)
def link_trick():
    os.symlink(outside, os.path.join(job, "link"))
    open(os.path.join(job, "link")).read()
def cffi_load():
    mod = "cf" + "fi"
    __import__(mod).FFI().dlopen(None)
ATTACKS = {
    "read outside": lambda: open(outside).read(),
    "write outside": lambda: open(outside + ".new", "w"),
    "os.open outside": lambda: os.open(outside, os.O_RDONLY),
    "list outside": lambda: os.listdir(os.path.dirname(outside)),
    "symlink to outside": link_trick,
    "parent's environment": lambda: open(f"/proc/{os.getppid()}/environ").read(),
    "socket": lambda: __import__("socket").socket(),
    "connect": lambda: __import__("socket").create_connection(("127.0.0.1", 9)),
    "subprocess": lambda: __import__("subprocess").run(["/bin/sh", "-c", "true"]),
    "os.system": lambda: os.system("true"),
    "os.execv": lambda: os.execv("/bin/true", ["true"]),
    "fork": lambda: os.fork(),
    "kill parent": lambda: os.kill(os.getppid(), 0),
    "signal the process group": lambda: os.kill(0, 0),
    "ctypes dlopen": lambda: __import__("ctypes").CDLL("libc.so.6"),
    "ctypes raw memory": lambda: __import__("ctypes").string_at(id(box), 8),
    "cffi": cffi_load,
    "heap walk": lambda: __import__("gc").get_objects(),
    "remove the denial record": lambda: os.remove(os.path.join(job, "sandbox.denied")),
    # allowed: the job folder, the interpreter's libraries, Triton's toolchain
    "job folder": lambda: open(os.path.join(job, "x.txt"), "w").write("ok"),
    "stdlib": lambda: open(os.__file__).read(),
    "ptxas --version": lambda: __import__("subprocess").run([p for p in box.policy.tools
                                                            if p.endswith("ptxas")][:1] or ["/bin/true"],
                                                           capture_output=True) if any(
        p.endswith("ptxas") for p in box.policy.tools) else None,
    "signal itself": lambda: os.kill(os.getpid(), 0),
}
print(json.dumps(dict(attempt(n, f) for n, f in ATTACKS.items())))
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    base = tmp_path_factory.mktemp("probe")
    job, secret = base / "job", base / "secret" / "run-key"
    (job / "tmp").mkdir(parents=True)
    secret.parent.mkdir()
    secret.write_text("the run's archive")
    out = subprocess.run([sys.executable, "-c", PROBE, str(job), str(secret)], capture_output=True, text=True,
                         timeout=300, cwd=job, env={**os.environ, "TMPDIR": str(job / "tmp")})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), job, secret


DENIED = {"read outside": "open('{secret}')", "write outside": "open('{secret}.new', write)",
          "os.open outside": "open('{secret}')", "list outside": "os.listdir('{secret_dir}')",
          "symlink to outside": "os.symlink", "parent's environment": "/environ')", "socket": "socket.__new__",
          "connect": "socket.", "subprocess": "subprocess.Popen(/bin/sh -c true)", "os.system": "os.system(b'true')",
          "os.execv": "os.exec(", "fork": "os.fork(", "kill parent": "os.kill(pid ", "signal the process group": "os.kill(pid 0",
          "ctypes dlopen": "ctypes.dlopen('libc.so.6')", "ctypes raw memory": "ctypes.", "cffi": "import('cffi')",
          "heap walk": "gc.get_objects()", "remove the denial record": "os.remove("}


@pytest.mark.parametrize("attack", sorted(DENIED))
def test_each_forbidden_action_is_denied_and_named(probe, attack):
    results, job, secret = probe
    expected = DENIED[attack].format(secret=secret, secret_dir=secret.parent)
    assert results[attack].startswith("sandbox: ") and results[attack].endswith(" denied"), results[attack]
    assert expected in results[attack], results[attack]


@pytest.mark.parametrize("allowed", ["job folder", "stdlib", "ptxas --version", "signal itself"])
def test_what_the_job_needs_stays_allowed(probe, allowed):
    results, job, _ = probe
    assert results[allowed] == "allowed"


def test_every_denial_is_also_in_the_denial_file(probe):
    results, job, _ = probe
    recorded = [d.message for d in sandbox.read_denials(job / sandbox.DENIAL_FILE)]
    denied = [m for m in results.values() if m != "allowed"]
    assert denied and all(m in recorded for m in denied), (denied, recorded)


def test_a_second_sandbox_in_one_process_is_refused(tmp_path):
    script = ("from kernelloop.core.sandbox.policy import default_policy, install\n"
              f"install(default_policy([{str(tmp_path)!r}]))\n"
              "try:\n    install(default_policy([]))\nexcept RuntimeError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "refused: a sandbox is already installed" in out.stdout, out.stderr[-2000:]


def test_rebinding_the_sandbox_modules_helpers_after_arming_changes_no_decision(tmp_path):
    """The hook calls the helpers it was armed with: replacing the event rules or the watched events in the modules
    afterwards (code that reached them) turns nothing off."""
    job, outside = tmp_path / "job", tmp_path / "outside.txt"
    (job / "tmp").mkdir(parents=True)
    outside.write_text("not the job's")
    script = ("from kernelloop.core.sandbox import events, policy\n"
              f"box = policy.install(policy.default_policy([{str(job)!r}]))\n"
              "allow = lambda *a, **k: None\n"
              "events.file_denial = policy.file_denial = allow\n"
              "events.process_denial = policy.process_denial = allow\n"
              "policy._WATCHED = ('nothing.',)\n"
              "policy._under = lambda path, roots: True\n"
              f"for what, act in (('open', lambda: open({str(outside)!r})), ('system', lambda: __import__('os')"
              ".system('true'))):\n"
              "    try:\n        act()\n        print(what, 'allowed')\n"
              "    except PermissionError:\n        print(what, 'denied')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=job,
                         env={**os.environ, "TMPDIR": str(job / "tmp")})
    assert "open denied" in out.stdout and "system denied" in out.stdout, (out.stdout, out.stderr[-2000:])


def test_tritons_launcher_cache_key_works_once_armed(tmp_path):
    """Triton's launcher build keys its cache with platform.architecture(), which runs `file -b` on the
    interpreter: computed before arming, so the first CUDA launch of an honest candidate is not denied for it."""
    script = ("import sys\n"
              "from kernelloop.core.sandbox.policy import default_policy, install\n"
              f"box = install(default_policy([{str(tmp_path)!r}], {str(tmp_path / 'denials')!r}))\n"
              "from triton.runtime.build import platform_key\n"
              "print('key', platform_key())\n"
              "import subprocess\n"
              "try:\n    subprocess.run(['file', '-b', sys.executable])\nexcept PermissionError:\n"
              "    print('still denied')\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "key x86_64" in out.stdout or "key aarch64" in out.stdout, out.stderr[-2000:]
    assert "still denied" in out.stdout       # priming the key allows nothing else


def test_the_policy_names_the_job_folder_tritons_cache_and_its_toolchain(tmp_path):
    p = sandbox.default_policy([tmp_path], tmp_path / "d")
    assert str(tmp_path.resolve()) in p.write_roots and sandbox.triton_cache_dir() in p.write_roots
    assert str(Path.home() / ".config") not in p.read_roots and "/" not in p.read_roots
    assert any(t.endswith("ptxas") for t in p.tools)
    assert sandbox.SandboxPolicy.model_validate_json(p.model_dump_json()) == p


# ---- through the worker and the evaluator ------------------------------------------------------------------

def test_an_honest_kernel_passes_with_nothing_denied(sandbox_evaluator, layernorm, job_dir):
    honest = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"], config=CONFIG)
    ev = sandbox_evaluator.evaluate(honest, W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.PASSED, ev.verdict
    assert sandbox.read_denials(sandbox_evaluator.worker.work_dir / sandbox.DENIAL_FILE) == []


KEY_READ = 'open(__import__("os").path.expanduser("~/.config/kernelloop/keys/" + "run-1")).read()'


@pytest.mark.parametrize("where,code,named", [
    ("import", KEY_READ, "sandbox: open('"),
    ("launch", KEY_READ, "sandbox: open('"),
    ("launch", 'getattr(__import__("sock" + "et"), "socket")()', "sandbox: socket.__new__"),
    ("launch", '__import__("subprocess").run(["/bin/sh", "-c", "echo pwned"])', "sandbox: subprocess.Popen(/bin/sh"),
    ("launch", '__import__("ctypes").CDLL("libc.so.6")', "sandbox: ctypes.dlopen('libc.so.6')"),
    ("launch", 'import os\nos.kill(os.getppid(), 0)', "sandbox: os.kill(pid "),
])
def test_a_denied_action_is_a_rejected_verdict_naming_it(sandbox_evaluator, with_code, layernorm, job_dir, where,
                                                         code, named):
    cand = with_code(module_code=code) if where == "import" else with_code(launch_code=code)
    ev = sandbox_evaluator.evaluate(cand, W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.REJECTED, ev.verdict
    assert ev.verdict.message.startswith(named) and ev.verdict.message.endswith("denied"), ev.verdict.message
    assert failure_reason(ev.verdict) == "rejected: sandbox"
    assert ev.measurement is None
    # the run goes on: the next honest candidate passes in a fresh worker
    honest = sandbox_evaluator.evaluate(Candidate(op="layernorm", template="rowwise",
                                                  source=layernorm.template_sources["rowwise"], config=CONFIG),
                                        W, job_dir(sandbox_evaluator, "next"))
    assert honest.verdict.status is Status.PASSED, honest.verdict


def test_a_denial_the_candidate_swallows_is_still_rejected(sandbox_evaluator, with_code, job_dir):
    code = 'try:\n    open("/root/.ssh/id_rsa")\nexcept Exception:\n    pass'
    ev = sandbox_evaluator.evaluate(with_code(launch_code=code), W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.REJECTED and "sandbox: open('/root/.ssh/id_rsa') denied" in ev.verdict.message


def test_a_denial_before_the_worker_dies_is_read_from_its_denial_file(sandbox_evaluator, with_code, job_dir):
    code = 'try:\n    open("/root/.ssh/id_rsa")\nexcept Exception:\n    __import__("os")._exit(3)'
    ev = sandbox_evaluator.evaluate(with_code(launch_code=code), W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.REJECTED and "sandbox: open('/root/.ssh/id_rsa') denied" in ev.verdict.message


@pytest.mark.parametrize("code,op,library", [
    ('import torch.nn.functional as F\ny.copy_(F.layer_norm(x, x.shape[-1:], weight, bias, eps))\nreturn',
     "aten.native_layer_norm", True),
    ('y.copy_((x - x.mean(-1, keepdim=True)) * weight + bias)\nreturn', "aten.mean", False),
])
def test_a_launch_that_computes_with_torch_is_rejected_naming_the_aten_op(sandbox_evaluator, with_code, job_dir,
                                                                         code, op, library):
    ev = sandbox_evaluator.evaluate(with_code(launch_code=code), W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.REJECTED, ev.verdict
    assert ev.verdict.message.startswith(f"aten-op: the launch issued {op}"), ev.verdict.message
    assert ("the library implementation" in ev.verdict.message) is library
    assert failure_reason(ev.verdict) == "rejected: aten-op"


def test_torch_compute_at_import_is_rejected_too(sandbox_evaluator, with_code, job_dir):
    # torch.from_file reads a file in C++ (no audit event): at import the ATen recorder sees it
    code = 'import torch\n_stolen = torch.from_file(torch.__file__, size=1, dtype=torch.uint8)'
    ev = sandbox_evaluator.evaluate(with_code(module_code=code), W, job_dir(sandbox_evaluator))
    assert ev.verdict.status is Status.REJECTED, ev.verdict
    assert ev.verdict.message.startswith("aten-op: the import issued aten.from_file"), ev.verdict.message
    assert "at import" in ev.verdict.message


# ---- the ahead-of-time build path (a real sm_90 compile on the CPU) -----------------------------------------

@pytest.mark.skipif(sandbox.read_only_view(sandbox.os_layer()),
                    reason="the same build runs with the read-only view on in test_sandbox_view.py")
def test_a_real_sm90_compile_works_inside_the_sandbox(real_sm90_build):
    """Where the OS layer has no read-only view: the audit hook alone lets a real build through (the fixture checks
    that ptxas and cuobjdump ran and the cubin is in the cache)."""
    assert real_sm90_build.status == "built" and real_sm90_build.kernels


def test_a_template_that_reaches_out_fails_its_build_naming_the_action(layernorm, tmp_path, aot):
    evil = tmp_path / "evil.py"
    evil.write_text(layernorm.template_sources["rowwise"].replace(
        "\ndef launch(", '\nimport os\nos.listdir(os.path.expanduser("~/.config"))\n\ndef launch(', 1))
    out = aot(layernorm, evil, tmp_path / "cache")
    assert out.status != "built" and f"sandbox: os.listdir('{Path.home() / '.config'}') denied" in out.error, out


# ---- the OS layer ------------------------------------------------------------------------------------------

def test_the_os_layer_is_detected_and_the_worker_has_no_network_inside_it(tmp_path):
    layer = sandbox.os_layer()
    assert layer.startswith((sandbox.NET, sandbox.MOUNT, "unavailable: ")), layer
    argv = [sys.executable, "-c", "print(open('/proc/net/dev').read())"]
    wrapped = sandbox.wrap_command(argv, layer)
    if layer.startswith("unavailable: "):
        assert wrapped == argv
        pytest.skip(f"no OS layer on this machine: {layer}")
    out = subprocess.run(wrapped, capture_output=True, text=True, timeout=60)
    interfaces = [line.split(":")[0].strip() for line in out.stdout.splitlines()[2:] if ":" in line]
    assert interfaces == ["lo"], out.stdout


def test_without_unshare_the_os_layer_is_reported_unavailable(monkeypatch):
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    sandbox.os_layer.cache_clear()
    try:
        layer = sandbox.os_layer()
    finally:
        sandbox.os_layer.cache_clear()
    assert layer == "unavailable: no unshare binary"
    assert sandbox.wrap_command(["python"], layer) == ["python"]


def test_the_environment_record_names_the_sandbox(monkeypatch):
    from kernelloop.core.device import environment
    assert environment("interpret").sandbox.startswith("audit hook; os layer: ")
    monkeypatch.setenv("KERNELLOOP_SANDBOX", "off")
    assert environment("interpret").sandbox == "off"


def test_denials_read_back_from_an_offset_and_past_a_cut_line(tmp_path):
    f = tmp_path / sandbox.DENIAL_FILE
    first = sandbox.Denial(action="open", detail="'/a'")
    second = sandbox.Denial(action="socket.connect", detail="")
    f.write_text(first.model_dump_json() + "\n" + second.model_dump_json() + "\n" + '{"action": "op')
    assert sandbox.read_denials(f) == [first, second]
    assert sandbox.read_denials(f, len(first.model_dump_json()) + 1) == [second]
    assert sandbox.read_denials(tmp_path / "absent") == []
    assert sandbox.denial_verdict_message([first, second]) == "sandbox: open('/a') denied (and 1 more)"
    assert sandbox.denial_verdict_message([second]) == "sandbox: socket.connect() denied"


def test_a_module_first_imported_after_arming_writes_no_bytecode_and_is_no_denial(tmp_path):
    """A fresh checkout has no __pycache__: a trusted module the worker imports after arming (kernelloop's own)
    must not make the import system try to write its .pyc outside the job folder (that was recorded as a denial,
    and the honest candidate REJECTED)."""
    lib, job = tmp_path / "lib", tmp_path / "job"
    (lib / "freshmod").mkdir(parents=True)
    job.mkdir()
    (lib / "freshmod" / "__init__.py").write_text("VALUE = 41 + 1\n")
    script = r'''
import os, sys
from kernelloop.core.sandbox.policy import default_policy, install
job, lib = sys.argv[1], sys.argv[2]
policy = default_policy([job], os.path.join(job, "sandbox.denied"))
policy.read_roots.append(lib)
policy.import_roots.append(lib)
box = install(policy)
sys.path.insert(0, lib)
import freshmod
print(freshmod.VALUE, len(box.take_denials()))
'''
    out = subprocess.run([sys.executable, "-c", script, str(job), str(lib)], capture_output=True, text=True,
                         timeout=300, cwd=job, env={**{k: v for k, v in os.environ.items()
                                                      if k != "PYTHONDONTWRITEBYTECODE"}, "TMPDIR": str(job)})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["42", "0"]
    assert not (lib / "freshmod" / "__pycache__").exists()
