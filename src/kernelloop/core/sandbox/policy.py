"""Least privilege for processes that import candidate code: a Python audit hook, armed just before the import.

`install(policy)` adds a `sys.addaudithook` hook (it cannot be removed) that denies, from then on:
- file opens (and listing, creating, removing, renaming, linking) outside the allowed roots: read-write the job
  folders and Triton's cache and temp folders, read-only the interpreter's own libraries and the packages torch,
  triton and kernelloop live in, `/usr`, `/etc`, `/sys`, this process's own `/proc` entries and a few devices;
  other `sys.path` entries only for importable files (`.py`, `.pyc`, `.so`, `.pth`);
- sockets (creation, connect, bind, name resolution);
- new processes (subprocess, os.system, os.exec*, posix_spawn, fork) except the binaries Triton's toolchain runs
  (ptxas, cuobjdump, nvdisasm, ldconfig) with every path argument inside an allowed root, and a C compiler only
  when Triton's own build module calls it (the launcher Triton builds in its cache);
- signals to other processes (os.kill, os.killpg);
- `ctypes` library loading and raw-memory calls except from torch's or triton's own code or of the CUDA driver
  libraries; importing `cffi`;
- heap walks (`gc.get_objects`, `gc.get_referrers`, `gc.get_referents`) and other threads' frames
  (`sys._current_frames`), which would find the hook's closures;
- any open of a protected folder (the run-key folder), whatever was granted.

A denied action raises `SandboxDenied` (a PermissionError) in the code that tried it, and is recorded twice: in the
hook's own list (the worker sends it with its next reply) and as a JSON line in the process's denial file (read by
the controller when the worker died before it could reply). The controller turns either into a REJECTED verdict
that names the action, e.g. "sandbox: open('/home/u/ws/.kernelloop/run-interpret/archive.sqlite') denied".

The hook's state is out of reach of Python code: it lives in the closures `install` makes as immutable values (grant
tuples rebound by the grant functions, a frozenset-like tuple of protected folders, no "busy" flag: re-entry is
seen on the stack), the returned `Sandbox` handle holds only the grant and denial functions, and a hook cannot be
removed. Candidate code that reaches the handle through frames can grant itself folders, never a protected one.
What it does not stop: native code (a C extension, ctypes from code that passes for torch's or triton's, Triton's
own C build helpers called directly) can bypass it. docs/verification.md states the threat model; `os_layer()`
reports whether an OS layer is available beside it: user and network namespaces (no network), and a mount namespace
in which the process makes everything read-only but the folders it writes and hides the protected folders under an
empty read-only tmpfs (`core/sandbox/confine.py`); `wrap_command` starts a process inside.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from pydantic import Field

from ...base.records.base import Record
from .events import command_line, file_denial, path_arguments_ok, popen_command, process_denial, real_path

DENIAL_FILE = "sandbox.denied"
SANDBOX_ENV = "KERNELLOOP_SANDBOX"   # "off" in the controller's environment: workers run without the sandbox
IMPORTABLE = (".py", ".pyc", ".so", ".pth", ".pyi", ".typed")
# ATen's and the driver's libraries a process may open through ctypes from any caller
LIBRARIES = ("libcuda.so", "libnvidia-ml.so", "libcudart.so", "libnvrtc.so", "libnvJitLink.so")
TOOLS = ("ptxas", "cuobjdump", "nvdisasm", "ldconfig")


class SandboxDenied(PermissionError):
    """An action the sandbox forbids; the message names it."""


class Denial(Record):
    """One denied action."""

    action: str = Field(description="The audit event, e.g. 'open', 'socket.connect', 'subprocess.Popen'.")
    detail: str = Field("", description="What it was asked to do: a path, a command line, a library name.")

    @property
    def message(self) -> str:
        return f"sandbox: {self.action}({self.detail}) denied"


class SandboxPolicy(Record):
    """What a process that imports candidate code may still do."""

    read_roots: list[str] = Field(description="Folders readable in full.")
    import_roots: list[str] = Field(default_factory=list, description="Folders readable for importable files only.")
    write_roots: list[str] = Field(description="Folders readable and writable (job folders, Triton's cache, temp).")
    read_files: list[str] = Field(default_factory=list, description="Single files readable.")
    tools: list[str] = Field(default_factory=list, description="Executables Triton's toolchain runs (real paths).")
    compilers: list[str] = Field(default_factory=list, description="C compilers, allowed from Triton's build only.")
    trusted_code: list[str] = Field(default_factory=list, description="Package folders whose frames may use ctypes.")
    protected: list[str] = Field(default_factory=list, description="Folders never opened, whatever was granted "
                                 "(the run-key folder): a grant cannot cover them.")
    denial_file: str = Field("", description="Where denials are appended as JSON lines ('' for none).")
    enforce: bool = Field(True, description="False: record denials without raising (to survey a workload).")


def _package_dir(name: str) -> str | None:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None)
    return str(Path(f).resolve().parent) if f else None


def triton_cache_dir() -> str:
    try:
        from triton import knobs
        return str(knobs.cache.dir)
    except (ImportError, AttributeError):
        return os.environ.get("TRITON_CACHE_DIR") or str(Path.home() / ".triton" / "cache")


def _triton_home(cache: Path) -> str:
    """Triton's home (~/.triton: cache, dump and override folders) when the cache is its default place in it."""
    return str(cache.parent) if cache.name == "cache" and cache.parent.name == ".triton" else str(cache)


def _tool_paths() -> list[str]:
    found = []
    nvidia = _package_dir("triton")
    if nvidia:
        found += [str(p) for p in Path(nvidia, "backends", "nvidia", "bin").glob("*")]
    for name in TOOLS:
        w = shutil.which(name) or (f"/sbin/{name}" if os.path.exists(f"/sbin/{name}") else None)
        if w:
            found.append(w)
    for var in ("TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH"):
        if os.environ.get(var):
            found.append(os.environ[var])
    return sorted({real_path(p) for p in found})


def _compilers() -> list[str]:
    names = [os.environ.get("CC") or "", "cc", "gcc", "clang"]
    return sorted({real_path(w) for w in (shutil.which(n) for n in names if n) if w})


def default_policy(job_roots: list[str | os.PathLike], denial_file: str | os.PathLike = "",
                   enforce: bool = True) -> SandboxPolicy:
    """The policy of a worker or build process: its job folders writable, the interpreter and its libraries
    readable, Triton's cache and temp folders writable, Triton's toolchain runnable."""
    for name in ("torch", "triton", "kernelloop", "numpy"):
        __import__(name)
    paths = sysconfig.get_paths()
    read = {sys.prefix, sys.base_prefix, sys.exec_prefix, paths.get("stdlib", ""), paths.get("platstdlib", ""),
            paths.get("purelib", ""), paths.get("platlib", ""), "/usr", "/lib", "/lib64", "/etc", "/sys",
            "/proc/self", "/proc/thread-self", f"/proc/{os.getpid()}", "/proc/driver/nvidia", "/proc/sys",
            "/opt/conda", "/usr/local/cuda"}
    import site
    read |= set(site.getsitepackages()) | {site.getusersitepackages()}
    pkgs = [d for d in (_package_dir(n) for n in ("torch", "triton", "kernelloop", "numpy")) if d]
    read |= {str(Path(d).parent) if Path(d).name != "kernelloop" else d for d in pkgs}
    cache = Path(triton_cache_dir())
    write = {real_path(p) for p in job_roots} | {str(cache), _triton_home(cache), tempfile.gettempdir()}
    imports = {p for p in sys.path if p and os.path.isdir(p)}
    files = ["/dev/null", "/dev/urandom", "/dev/random", "/dev/zero", "/proc/cpuinfo", "/proc/meminfo",
             "/proc/stat", "/proc/loadavg", "/dev/shm"]
    trusted = [d for d in (_package_dir(n) for n in ("torch", "triton")) if d]
    try:   # NVML through ctypes: the timer's clock and temperature snapshots
        import pynvml
        trusted.append(str(Path(pynvml.__file__).resolve()))
    except ImportError:
        pass
    return SandboxPolicy(read_roots=sorted(real_path(p) for p in read if p), import_roots=sorted(real_path(p) for p in imports),
                         write_roots=sorted(write), read_files=files, tools=_tool_paths(), compilers=_compilers(),
                         trusted_code=trusted, protected=protected_paths(), denial_file=str(denial_file),
                         enforce=enforce)


from .confine import PROTECTED_ENV  # noqa: E402 - JSON list of folders a confined child hides


def protected_paths() -> list[str]:
    """Folders no process that imports candidate code may open: the run-key folder (core/sandbox/keys.py), as the
    controller named it in $KERNELLOOP_PROTECTED, and as this process would find it."""
    from .keys import key_dir
    named = json.loads(os.environ.get(PROTECTED_ENV) or "[]")
    default = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "kernelloop" / "keys"
    return sorted({real_path(p) for p in [*named, key_dir(), default]})


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class Sandbox:
    """The armed hook's handle for the trusted code of its process: grants and the denials so far.

    It holds no state the hook decides with: grants go through functions that only add to the hook's (immutable,
    rebound) tuples, and no grant reaches a protected folder (checked at every open, not at the grant). Candidate
    code that reaches this handle through frames can at most grant itself folders; it cannot turn the hook off."""

    def __init__(self, policy: SandboxPolicy, grant_read, grant_write, take_denials):
        self.policy = policy
        self.grant_read, self.grant_write, self.take_denials = grant_read, grant_write, take_denials


_INSTALLED: list[bool] = []   # one hook per process


def _prime_toolchain() -> None:
    """Compute, before arming, what Triton's toolchain caches per process and first computes with a subprocess:
    the launcher build's cache key calls platform.architecture(), which runs `file -b` on the interpreter (the
    first CUDA launch of every candidate was denied for it on a GPU host)."""
    try:
        from triton.runtime.build import platform_key
    except ImportError:
        return
    platform_key()


_WATCHED = ("open", "os.", "shutil.", "socket.", "subprocess.", "pty.", "signal.pthread_kill", "ctypes.", "import",
            "gc.get_", "sys._current_")


def _caller(skip: tuple[str, ...]) -> str:
    """File of the innermost frame outside the hook (this module) and the modules in `skip`."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__ or f.f_code.co_filename.startswith(skip)):
        f = f.f_back
    return f.f_code.co_filename if f is not None else ""


def _access_rules(policy: SandboxPolicy):
    """`readable`, `writable` and the two grant functions; the grants are tuples in this call's closure that only
    the grant functions rebind, and no grant reaches a protected folder or the denial record."""
    read_roots, write_roots = tuple(policy.read_roots), tuple(policy.write_roots)
    protected, imports = tuple(policy.protected), tuple(policy.import_roots)
    files = frozenset(real_path(f) for f in policy.read_files)
    record_path = real_path(policy.denial_file) if policy.denial_file else ""
    real, under = real_path, _under   # bound once (see `_checker`)

    def readable(path: str, listing: bool = False) -> bool:
        if path == record_path or under(path, protected):
            return False
        if path in files or under(path, read_roots) or under(path, write_roots):
            return True
        if under(path, imports):
            return listing or os.path.isdir(path) or path.endswith(IMPORTABLE)
        return False

    def writable(path: str) -> bool:
        return path != record_path and not under(path, protected) and \
            (path in ("/dev/null",) or under(path, write_roots))

    def grant_read(path: str | os.PathLike) -> None:
        nonlocal read_roots
        read_roots = (*read_roots, real(path))

    def grant_write(path: str | os.PathLike) -> None:
        nonlocal write_roots
        write_roots = (*write_roots, real(path))

    return readable, writable, grant_read, grant_write


def _denier(denials: list[Denial], record_fd: int, enforce: bool):
    """`deny(action, detail)`: keep the denial, append it to the denial record, raise when enforcing."""
    def deny(action: str, detail: str) -> None:
        d = Denial(action=action, detail=detail[:300])
        denials.append(d)
        if record_fd >= 0:
            try:
                os.write(record_fd, (d.model_dump_json() + "\n").encode())
            except OSError:
                pass
        if enforce:
            raise SandboxDenied(d.message)
    return deny


def _checker(policy: SandboxPolicy, readable, writable, deny, record_fd: int):
    """`check(event, args)`: the hook's decision on one audit event. Files and other processes go through
    `events`; commands, native code, imports and frames are judged here, by who asks."""
    # The helpers bound once, here: rebinding a module attribute later changes nothing the hook calls.
    real, under, caller, popen, cmdline, args_ok, files_rule, process_rule = (
        real_path, _under, _caller, popen_command, command_line, path_arguments_ok, file_denial, process_denial)
    tools, compilers, trusted = frozenset(policy.tools), frozenset(policy.compilers), tuple(policy.trusted_code)
    own_pid, triton_dir = os.getpid(), triton_cache_dir()
    subprocess_file, ctypes_dir = subprocess.__file__, str(Path(os.__file__).parent / "ctypes")
    bootstrap = ("<frozen importlib", str(Path(os.__file__).parent / "importlib"))
    census_file = str(Path(__file__).with_name("census.py"))
    spawn: str | None = None

    def command_ok(exe: str, argv: list, from_file: str) -> bool:
        exe_path = real(shutil.which(exe) or exe) if exe else ""
        if exe_path in compilers:   # Triton's launcher build, or inductor's C++ build of the torch.compile baseline
            return from_file.endswith(os.path.join("triton", "runtime", "build.py")) or \
                os.path.join("torch", "_inductor", "") in from_file
        return exe_path in tools and args_ok(argv, readable)

    def code_denial(event: str, args: tuple) -> str | None:
        if event.startswith("ctypes."):
            if event == "ctypes.dlopen" and args and args[0] is not None:
                name = os.fsdecode(args[0])
                if os.path.basename(name).startswith(LIBRARIES) or under(real(name), (triton_dir,)):
                    return None
            ok = trusted and caller((ctypes_dir, *bootstrap)).startswith(trusted)
            return None if ok else ", ".join(repr(a)[:120] for a in args[:1])
        if event == "import":
            cffi = args and args[0] in ("cffi", "_cffi_backend") and args[0] not in sys.modules
            return repr(args[0]) if cffi else None
        if event in ("sys._current_frames", "sys._current_exceptions"):
            # The worker's thread census names new threads by their frames; another thread's frames may be the
            # hook's own, while it runs.
            return "" if caller(()) != census_file else None
        return "" if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents") else None

    def check(event: str, args: tuple) -> None:
        nonlocal spawn
        if event == "subprocess.Popen":
            exe, argv = popen(args)
            if not command_ok(exe, argv, caller((subprocess_file,))):
                deny(event, cmdline(argv))
            spawn = real(shutil.which(exe) or exe)   # subprocess goes on to posix_spawn this binary
            return
        if event in ("os.posix_spawn", "os.exec") and args and spawn == real(args[0]):
            spawn = None     # the spawn of the command line just allowed above
            return
        detail = files_rule(event, args, readable, writable, record_fd)
        if detail is None and event.startswith("socket."):
            detail = ", ".join(repr(a)[:80] for a in args[:2])
        if detail is None:
            detail = process_rule(event, args, own_pid)
        if detail is None:
            detail = code_denial(event, args)
        if detail is not None:
            deny(event, detail)

    return check


def _guarded(check):
    """The audit hook: `check` on the watched events, skipped while a check runs (the checks themselves raise
    audit events, realpath's for one): re-entry is seen on the stack, with no flag to forge."""
    check_code, watched = check.__code__, _WATCHED   # bound once (see `_checker`)

    def hook(event: str, args: tuple) -> None:
        if not event.startswith(watched):
            return
        f = sys._getframe(1)
        while f is not None:
            if f.f_code is check_code:
                return
            f = f.f_back
        check(event, args)

    return hook


def install(policy: SandboxPolicy) -> Sandbox:
    """Arm the hook for the rest of this process's life.

    What the hook decides with lives only in the closures `install` and its builders make, as immutable values:
    the grants are tuples that `grant_*` rebind, the protected folders a tuple no grant covers, re-entry is seen on
    the stack (no flag), and nothing of it is an attribute of a module or of the returned handle."""
    if _INSTALLED:
        raise RuntimeError("a sandbox is already installed in this process")
    _prime_toolchain()
    record_fd = -1
    if policy.denial_file:
        record_fd = os.open(policy.denial_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    denials: list[Denial] = []
    readable, writable, grant_read, grant_write = _access_rules(policy)
    hook = _guarded(_checker(policy, readable, writable, _denier(denials, record_fd, policy.enforce), record_fd))

    def take_denials() -> list[Denial]:
        """Denials since the last call."""
        out = list(denials)
        denials.clear()
        return out

    # No bytecode caches from here on: the import system would try to write __pycache__ files next to modules
    # first imported after arming (kernelloop's own in a fresh checkout), which lie outside what may be written.
    # Denying those writes is right (a planted .pyc of a trusted module would outlive the candidate), so they must
    # not be attempted at all.
    sys.dont_write_bytecode = True
    sys.addaudithook(hook)
    _INSTALLED.append(True)
    return Sandbox(policy, grant_read, grant_write, take_denials)


def read_denials(path: str | os.PathLike, offset: int = 0) -> list[Denial]:
    """The denials a process appended to its denial file from byte `offset` on (a cut last line is skipped)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(Denial.model_validate_json(line))
        except ValueError:
            continue
    return out


def denial_verdict_message(denials: list[Denial]) -> str:
    more = f" (and {len(denials) - 1} more)" if len(denials) > 1 else ""
    return denials[0].message + more


NET = "user+net namespaces"            # os_layer(): no network but `lo`
MOUNT = "user+net+mount namespaces"    # os_layer(): and a read-only view of all but the writable folders
VIEW_ENV = "KERNELLOOP_READONLY_VIEW"   # "off" in the controller's environment: the network namespace only
VIEW = "read-only view except the job folder, Triton's cache, the temp folder, the log file and /proc"


def _unshare_probe(exe: str, flags: list[str], argv: list[str], env: dict | None = None):
    try:
        r = subprocess.run([exe, *flags, *argv], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"{type(e).__name__}: {e}"[:200]
    return r, (r.stderr.strip().splitlines() or ["refused"])[-1][:200]


@functools.lru_cache(maxsize=1)
def os_layer() -> str:
    """What the OS adds to the audit hook here, probed once per process:
    - f'{MOUNT}, {VIEW}' when `unshare --user --map-root-user --net --mount` runs and, inside it, `sandbox.confine`
      makes every mount read-only but a test folder, a write outside it is refused and a remount read-write too;
    - f'{NET}; read-only view unavailable: <why>' when only the network namespace works;
    - 'unavailable: <why>' when no namespace can be had (no unshare binary, or the kernel refuses)."""
    exe = shutil.which("unshare")
    if exe is None:
        return "unavailable: no unshare binary"
    r, why = _unshare_probe(exe, ["--user", "--map-root-user", "--net"], ["true"])
    if r is None or r.returncode != 0:
        return f"unavailable: {why}"
    if os.environ.get(VIEW_ENV, "on") == "off":
        return f"{NET}; read-only view unavailable: turned off ({VIEW_ENV}=off)"
    with tempfile.TemporaryDirectory(prefix="kernelloop-view-") as tmp:
        job, outside = Path(tmp, "job"), Path(tmp, "outside")
        job.mkdir()
        outside.mkdir()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[3]),
                                                          env.get("PYTHONPATH")]))
        r, why = _unshare_probe(exe, ["--user", "--map-root-user", "--net", "--mount"],
                                [sys.executable, "-m", "kernelloop.core.sandbox.confine", str(job), str(outside)], env)
        if r is None or r.returncode != 0:
            return f"{NET}; read-only view unavailable: {why}"
        try:
            result = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return f"{NET}; read-only view unavailable: the probe printed no result"
        from .confine import PROBE_OUTSIDE
        if (outside / PROBE_OUTSIDE).exists():
            return f"{NET}; read-only view unavailable: a write outside the writable folder went through"
    if not result.get("ok"):
        return f"{NET}; read-only view unavailable: {str(result.get('why', 'refused'))[:200]}"
    return f"{MOUNT}, {VIEW}"


def read_only_view(layer: str) -> bool:
    """Whether `layer` (an `os_layer()` value) gives the worker a read-only view of the file system."""
    return layer.startswith(MOUNT)


def writable_roots(job_roots: list[str | os.PathLike], log_path: str | os.PathLike | None = None) -> list[str]:
    """What stays writable in the read-only view of a process whose job folders are `job_roots`: the folders the
    audit hook lets it write (the job folders, Triton's cache and home) and its log file (an existing file). Its
    temp folder is not added: the caller sets TMPDIR inside a job folder (the worker: `<job folder>/tmp`)."""
    cache = Path(triton_cache_dir())
    roots = [*(str(p) for p in job_roots), str(cache), _triton_home(cache)]
    if log_path:
        roots.append(str(log_path))
    return [real_path(p) for p in roots]


def wrap_command(argv: list[str], layer: str, writable: list[str] | None = None,
                 env: dict | None = None) -> list[str]:
    """`argv` run inside fresh namespaces when the OS layer is available, else unchanged. With the read-only view,
    `writable` (what the process may still write) goes into `env` for `sandbox.confine.confine_from_env`, which
    the process calls before it imports candidate code."""
    exe = shutil.which("unshare") or "unshare"
    if read_only_view(layer) and writable is not None and env is not None:
        from .confine import WRITABLE_ENV
        env[WRITABLE_ENV] = json.dumps([str(p) for p in writable])
        return [exe, "--user", "--map-root-user", "--net", "--mount", *argv]
    if layer.startswith(NET) or read_only_view(layer):
        return [exe, "--user", "--map-root-user", "--net", *argv]
    return argv
