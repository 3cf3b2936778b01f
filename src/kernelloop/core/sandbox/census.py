"""The thread census of the worker: every OS thread of the process, named, with the files of Python threads' frames.

The worker counts threads after a candidate's first call (lazily started runtime pools exist by then) and again
after its verification or timed calls; a count that grew is a thread left behind, which the controller rejects
(work outside the call escapes the timer). `new_threads` names the newcomers for the verdict.
"""

from __future__ import annotations

import os


def thread_count() -> int:
    """OS threads of this process (native threads included), or Python threads where /proc is absent."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading
        return threading.active_count()


def thread_names() -> dict[str, str]:
    """tid -> thread name (/proc/self/task/<tid>/comm) of every OS thread of this process; {} where /proc is absent."""
    out = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out[tid] = f.read().strip()
        except OSError:  # the thread ended between the listing and the read
            continue
    return out


def new_threads(before: dict[str, str]) -> list[dict]:
    """Threads that did not exist in `before`: name, and for Python threads the files of their innermost frames
    (a thread started from the candidate's module shows that module's path; a runtime pool shows its library).
    Each entry has the fields of execute.protocol.NewThread."""
    import sys
    import threading
    by_ident = {t.native_id: t for t in threading.enumerate() if getattr(t, "native_id", None) is not None}
    frames = sys._current_frames()
    out = []
    for tid, name in sorted(thread_names().items()):
        if tid in before:
            continue
        entry = {"tid": int(tid), "name": name, "python": False}
        t = by_ident.get(int(tid))
        if t is not None:
            entry.update(python=True, python_name=t.name)
            f, files = frames.get(t.ident), []
            while f is not None and len(files) < 8:
                files.append(f.f_code.co_filename)
                f = f.f_back
            entry["files"] = files
        out.append(entry)
    return out


def settled_thread_count(poll_s: float = 0.2, stable_polls: int = 3, limit_s: float = 5.0) -> int:
    """The thread count once it has not changed for `stable_polls` consecutive polls (or after `limit_s`)."""
    import time
    last, same, deadline = thread_count(), 0, time.monotonic() + limit_s
    while same < stable_polls and time.monotonic() < deadline:
        time.sleep(poll_s)
        now = thread_count()
        same = same + 1 if now == last else 0
        last = now
    return last
