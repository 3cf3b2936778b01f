"""A worker outlives no controller: once its parent is killed, the watch thread ends it, even while the candidate
code in it spins forever (core/execute/child.py `exit_with_parent`)."""

import os
import signal
import subprocess
import sys
import time


# the "worker": the watch thread, then a loop that never returns (a hanging candidate's launch)
SPIN = ("from kernelloop.core.execute.child import exit_with_parent; exit_with_parent(0.1)\n"
        "while True:\n    pass\n")
# the "controller": starts the worker, says its pid, then waits to be killed
PARENT = ("import subprocess, sys, time\n"
          f"p = subprocess.Popen([sys.executable, '-c', {SPIN!r}])\n"
          "print(p.pid, flush=True)\n"
          "time.sleep(600)\n")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"   # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_spinning_worker_ends_when_its_controller_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pid = int(parent.stdout.readline())
    try:
        time.sleep(1.0)
        assert _alive(pid), "the worker runs while its controller does"
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.time() + 10
        while _alive(pid) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(pid), "the orphaned worker still runs"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        parent.kill()


def test_the_watch_leaves_a_process_whose_parent_lives_alone():
    code = ("import time\nfrom kernelloop.core.execute.child import exit_with_parent\nt = exit_with_parent(0.05)\n"
            "time.sleep(0.5)\nprint('alive', t.is_alive(), t.daemon)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.returncode == 0 and out.stdout.strip() == "alive True True", out


def test_the_worker_program_starts_the_watch_after_its_view_and_before_its_first_request(monkeypatch):
    """child.main: the read-only view first (it needs a process of one thread), then the watch, then the loop."""
    import kernelloop.core.execute.child as child
    import kernelloop.core.sandbox.confine as confine
    import kernelloop.core.execute.worker as worker
    calls = []
    monkeypatch.setattr(confine, "confine_from_env", lambda: calls.append("view") or "the view")
    monkeypatch.setattr(child, "exit_with_parent", lambda: calls.append("watch"))
    monkeypatch.setattr(worker, "worker_main", lambda conn, device, log, root, view: calls.append(("loop", view)))
    monkeypatch.setattr(child, "Connection", lambda fd: fd)
    child.main(["7", "interpret", "log", "jobs"])
    assert calls == ["view", "watch", ("loop", "the view")]
