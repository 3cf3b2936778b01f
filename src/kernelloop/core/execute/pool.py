"""A supervised worker process: spawn, request with a deadline, kill and replace.

A job that exceeds its deadline gets its worker killed (SIGKILL) and reports `timeout`; a worker that
dies (segfault, SIGKILL, os._exit) reports `died` with its exit code and the tail of its log; a worker
whose CUDA context was poisoned by an illegal access is replaced before the next job.

The worker is its own program (`python -m kernelloop.core.execute.child`, started through subprocess, messages over a
socket pair, the records of core/execute/protocol.py), not a multiprocessing child: nothing of the caller's `__main__` is re-imported, so scripts without a
`__main__` guard, `python -c` and notebooks can run the loop.

What comes back is bytes of JSON, read with a length limit and validated before use; nothing is unpickled. A reply
that does not decode, answers another request than the one sent (`seq`), is followed by a second reply (the sync
after every reply, core/execute/protocol.py) or names an arena outside the request's job folder is a protocol violation:
status `violation`, the worker replaced.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ...base.records.device import Device
from ..sandbox.keys import KEY_ENV
from ..sandbox.policy import SANDBOX_ENV
from . import protocol as P
from . import shared
from .child import PATH_ENV

HIDDEN_ENV = (KEY_ENV,)   # environment variables a worker process never inherits


@dataclass
class Reply:
    """What became of one request. `record`: the worker's reply (execute.protocol: Loaded, Checked, Benched, or
    Failed for status error/denied); None when the worker timed out or died before replying."""

    # ok | error | timeout | died | denied (the sandbox denied an action: core/sandbox/policy.py) | violation (the worker
    # broke the protocol: core/execute/protocol.py; record a Failed of stage 'protocol' naming how)
    status: str
    record: Any = None
    exitcode: int | None = None
    log_tail: str = ""
    seconds: float = 0.0
    owned: list | None = None   # the controller's own copies of what the reply shared (core/execute/shared.py), if taken
    request: Any = None         # the request this answers, as the controller sent it

    @property
    def error(self) -> str:
        """The worker's error text ('' when it sent none)."""
        return getattr(self.record, "error", "") or ""


class Worker:
    """One spawned worker. `request` never raises for candidate misbehaviour; it returns a Reply."""

    def __init__(self, device: Device | str, work_dir: Path, start_timeout: float = 180.0, log_path: Path | None = None,
                 remove_work_dir: bool = False, sandbox: bool | None = None):
        self.device = Device.of(device)
        self.work_dir = Path(work_dir).resolve()
        # candidate code runs under core/sandbox/policy.py unless the caller or $KERNELLOOP_SANDBOX=off says otherwise
        self.sandbox = sandbox if sandbox is not None else os.environ.get(SANDBOX_ENV, "on") != "off"
        self.os_layer = "off"
        self.view = ""        # what the worker reported of its read-only view ('' without one)
        self.writable: list[str] = []   # what the running worker's read-only view keeps writable
        self._extra_writable: list[str] = []   # job folders outside work_dir that requests name (make_writable)
        self._denial_mark = 0
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # absolute: the worker process runs in work_dir, where a relative path would name another file
        self.log_path = Path(log_path).resolve() if log_path else self.work_dir / "worker.log"
        self.remove_work_dir = remove_work_dir
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.conn: Connection | None = None
        self.starts = 0
        self.seq = 0   # the last request's sequence number: from a random start for every worker process

    def _start(self) -> None:
        mine, theirs = socket.socketpair()
        # The run key stays with the controller: the worker (which imports candidate code) starts without it.
        env = {k: v for k, v in os.environ.items() if k not in HIDDEN_ENV}
        package_root = str(Path(__file__).resolve().parents[3])   # kernelloop importable however it was found
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        env[PATH_ENV] = json.dumps([os.path.abspath(p) for p in sys.path if p])
        env[SANDBOX_ENV] = "on" if self.sandbox else "off"
        from ..sandbox.confine import PROTECTED_ENV
        from ..sandbox.keys import key_dir
        env[PROTECTED_ENV] = json.dumps([str(key_dir())])   # hidden from it, by the hook and the read-only view
        tmp = self.work_dir / "tmp"        # the worker's temp folder (Triton's ptxas files): its own, not /tmp
        tmp.mkdir(exist_ok=True)
        env["TMPDIR"] = str(tmp)
        # torch's compile cache (the torch.compile baseline; torch may also create it on its own) in the run's folder
        env["TORCHINDUCTOR_CACHE_DIR"] = str(self.work_dir / "inductor")
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"   # inductor compiles in the worker, not in a pool of processes
        visible = worker_visible_devices(self.device, env.get("CUDA_VISIBLE_DEVICES"))
        if visible is not None:   # a worker per GPU sees only its own (as 'cuda')
            env["CUDA_VISIBLE_DEVICES"] = visible
        argv = [sys.executable, "-m", "kernelloop.core.execute.child", str(theirs.fileno()), str(self.device),
                str(self.log_path), str(self.work_dir)]
        self.writable, self.view = [], ""
        self.log_path.touch()   # exists before the read-only view keeps it writable
        if self.sandbox:
            from ..sandbox.policy import os_layer, read_only_view, wrap_command, writable_roots
            self.os_layer = os_layer()
            if read_only_view(self.os_layer):
                # a GPU worker shares its buffers by CUDA IPC, whose reference counter torch keeps in /dev/shm
                # (core/execute/shared.py); the audit hook still refuses Python opens there
                shm = [Path("/dev/shm")] if self.device.is_cuda and Path("/dev/shm").is_dir() else []
                self.writable = writable_roots([self.work_dir, *self._extra_writable, *shm], self.log_path)
            argv = wrap_command(argv, self.os_layer, self.writable, env)
        self._denial_mark = 0
        try:
            with open(self.log_path, "ab") as log:   # what the interpreter prints before the worker redirects
                self.proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=log, env=env, cwd=self.work_dir)
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        parent = Connection(mine.detach())
        self.conn = parent
        self.starts += 1
        if not parent.poll(self.start_timeout):
            self.kill()
            raise RuntimeError(f"worker did not start within {self.start_timeout:.0f} s; log: {self._tail()}")
        try:
            ready = P.decode_reply(P.receive(parent, P.MAX_REPLY_BYTES))
        except P.ProtocolViolation as e:
            self.kill()
            raise RuntimeError(f"worker broke the protocol while starting: {e}") from None
        except (EOFError, OSError):
            code = self._wait(30)
            self.kill()
            raise RuntimeError(f"worker died while starting (exit {code}); log: {self._tail()}") from None
        self.seq = secrets.randbits(48)
        self.view = ready.view if isinstance(ready, P.Ready) else ""
        if self.writable and not self.view.startswith("read-only view except"):
            # the probe said the view works, this worker could not set it up: it runs with the network namespace
            # and the audit hook only, and says so
            from ..sandbox.policy import NET
            self.os_layer = f"{NET}; {self.view or 'read-only view unavailable: the worker did not report it'}"
            self.writable = []

    def make_writable(self, path: str | os.PathLike) -> bool:
        """Keep `path` (a job folder a request will name) writable in the worker's read-only view. True when the
        running worker had to be stopped for it: the next request starts a fresh one, whose view includes it
        (modules loaded so far are gone). Always False without a read-only view."""
        if not self.sandbox:
            return False
        from ..sandbox.policy import os_layer, read_only_view
        running = self.proc is not None
        if not read_only_view(self.os_layer if running else os_layer()):
            return False
        p = os.path.realpath(path)
        roots = self.writable if running else [str(self.work_dir), *self._extra_writable]
        if any(p == r or p.startswith(r.rstrip("/") + "/") for r in roots):
            return False
        self._extra_writable.append(p)
        if running:
            self.kill()
        return running

    def _tail(self, n: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _wait(self, timeout: float) -> int | None:
        """The worker's exit code (negative: killed by that signal) once it has ended, None if it has not yet."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self._wait(30)
        if self.conn is not None:
            self.conn.close()
        self.proc, self.conn = None, None

    def close(self) -> None:
        if self.alive:
            try:
                P.send(self.conn, P.ExitRequest())
                self._wait(10)
            except (OSError, BrokenPipeError):
                pass
        self.kill()
        if self.remove_work_dir:
            import shutil
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def request(self, msg: "P.LoadRequest | P.CheckRequest | P.BenchRequest | dict", timeout: float) -> Reply:
        """Send a request (a record of execute.protocol, or its dict form) and wait up to `timeout` seconds."""
        import time
        if isinstance(msg, dict):
            msg = P.parse_request(msg)
        if self.alive and self.conn.poll(0):   # bytes nobody asked for since the last sync: never read as a reply
            self.kill()
        if not self.alive:
            self.kill()
            self._start()
        self.seq += 1
        msg = msg.model_copy(update={"seq": self.seq})
        mark = self.log_path.stat().st_size if self.log_path.exists() else 0
        t0 = time.perf_counter()
        try:
            P.send(self.conn, msg)
        except (BrokenPipeError, OSError):
            return self._sandboxed(self._died(mark, t0))
        got = self._reply(msg, timeout, t0, mark)
        if isinstance(got, Reply):
            return got
        record, dt = got
        problem = self._sync(timeout, record, msg)
        if problem:
            return self._violation(problem, t0, mark, msg)
        denied = self._sandboxed(Reply("error", record, seconds=dt, request=msg))
        if denied.status == "denied":
            return denied
        if not record.ok or isinstance(record, (P.Ready, P.Synced)):
            if getattr(record, "cuda_fault", False):
                self.kill()  # the CUDA context is unusable after a fault: replace the worker
            if record.ok:
                return self._violation(f"the worker answered a {type(msg).__name__} with {type(record).__name__}",
                                       t0, mark, msg)
            return Reply("error", record, seconds=dt, log_tail=self._tail_since(mark), request=msg)
        return Reply("ok", record, seconds=dt, request=msg)

    def _reply(self, msg, timeout: float, t0: float, mark: int):
        """(the reply record, seconds since the request was sent), or the Reply of a worker that timed out, died or
        broke the protocol."""
        import time
        if not self.conn.poll(timeout):
            self.kill()
            return self._sandboxed(Reply("timeout", seconds=time.perf_counter() - t0,
                                         log_tail=self._tail_since(mark), request=msg))
        try:
            record = P.decode_reply(P.receive(self.conn, P.MAX_REPLY_BYTES))
        except P.ProtocolViolation as e:
            return self._violation(str(e), t0, mark, msg)
        except (EOFError, OSError):
            return self._sandboxed(self._died(mark, t0))
        dt = time.perf_counter() - t0
        if record.seq != msg.seq:
            return self._violation(f"a reply to request {record.seq}, not to the request sent ({msg.seq})", t0,
                                   mark, msg)
        outside = shared.arenas_outside(record, getattr(msg, "job_dir", ""))
        if outside:
            return self._violation(f"the reply names arenas outside the request's job folder: {outside[:3]}", t0,
                                   mark, msg)
        return record, dt

    def _sync(self, timeout: float, record, msg) -> str:
        """Send the sync that must be answered next: '' when it was, else what came instead (a second reply to the
        request, bytes that are no reply, nothing)."""
        if not self.alive:   # a worker that ended after replying (its reply is judged as it is)
            return ""
        self.seq += 1
        sync = P.SyncRequest(seq=self.seq)
        try:
            P.send(self.conn, sync)
            if not self.conn.poll(max(timeout, 5.0)):
                return "the worker did not answer the sync after its reply"
            got = P.decode_reply(P.receive(self.conn, P.MAX_REPLY_BYTES))
        except P.ProtocolViolation as e:
            return f"after its reply: {e}"
        except (EOFError, OSError, BrokenPipeError):
            return ""   # it died after replying: the next request starts a fresh worker
        if isinstance(got, P.Synced) and got.seq == sync.seq:
            return ""
        if got.seq == msg.seq:
            return (f"a second reply ({type(got).__name__}) to request {msg.seq}: more than one reply was written "
                    f"onto the worker's connection")
        return f"a {type(got).__name__} with sequence number {got.seq} where the sync {sync.seq} was answered"

    def _violation(self, problem: str, t0: float, mark: int, msg=None) -> Reply:
        """The Reply of a worker that broke the protocol: it is replaced, its request gets a protocol failure."""
        import time
        self.kill()
        record = P.Failed(stage="protocol", error=f"protocol-violation: {problem}"[:2000])
        return self._sandboxed(Reply("violation", record, seconds=time.perf_counter() - t0,
                                     log_tail=self._tail_since(mark), request=msg))

    def _sandboxed(self, reply: Reply) -> Reply:
        """A reply whose request had the sandbox deny something becomes status 'denied' (its record a Failed of
        stage 'sandbox' listing the denials, sandbox.policy.Denial), whatever else happened; the worker is replaced,
        since the code that tried may have left state behind. Denials come from the reply, or from the worker's
        denial file when it died or hung before replying."""
        from ..sandbox.policy import DENIAL_FILE, read_denials
        listed = list(reply.record.denied) if reply.record is not None else []
        path = self.work_dir / DENIAL_FILE
        if not listed and self.sandbox:
            listed = list(read_denials(path, self._denial_mark))
        try:
            self._denial_mark = path.stat().st_size
        except OSError:
            self._denial_mark = 0
        if not listed:
            return reply
        self.kill()
        was = reply.record
        record = P.Failed(stage="sandbox", log=getattr(was, "log", "") or "", error=getattr(was, "error", "") or "",
                          build=getattr(was, "build", None), case=getattr(was, "case", None), denied=listed)
        return Reply("denied", record, exitcode=reply.exitcode, log_tail=reply.log_tail, seconds=reply.seconds,
                     request=reply.request)

    def _tail_since(self, mark: int) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(mark)
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def _died(self, mark: int, t0: float) -> Reply:
        import time
        code = self._wait(30) if self.proc is not None else None
        self.kill()
        return Reply("died", exitcode=code, seconds=time.perf_counter() - t0, log_tail=self._tail_since(mark))


def worker_visible_devices(device: Device, inherited: str | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for a worker that sees only `device`: its UUID, or the entry at its ordinal in what the
    controller itself sees (`inherited`), or the ordinal; None for the default GPU and the interpreter."""
    if not device.is_cuda or (device.index is None and device.uuid is None):
        return None
    if device.uuid is not None:
        return device.uuid
    seen = [v.strip() for v in inherited.split(",") if v.strip()] if inherited else []
    if seen:
        if device.index >= len(seen):
            raise ValueError(f"device {device}: the controller sees {len(seen)} GPU(s) (CUDA_VISIBLE_DEVICES="
                             f"{inherited})")
        return seen[device.index]
    return str(device.index)


def signal_name(code: int | None) -> str | None:
    """'SIGSEGV' for a process killed by that signal (a negative exit code), else None."""
    if code is None or code >= 0:
        return None
    import signal
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "worker exited (code unknown)"
    if code < 0:
        import signal
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


def job_root(base: Path) -> Path:
    """A fast folder for check outputs: tmpfs when present."""
    import shutil
    shm = Path("/dev/shm")
    fast = shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 4 * 2**30
    root = (shm if fast else Path(base) / "jobs") / f"kernelloop-{os.getpid()}"
    root.mkdir(parents=True, exist_ok=True)
    return root
