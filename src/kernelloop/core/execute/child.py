"""The worker as its own program: `python -m kernelloop.core.execute.child FD DEVICE LOG_PATH JOB_ROOT`.

`execute.pool.Worker` starts it through `subprocess` and speaks to it over one end of a socket pair (file
descriptor FD), with the request and reply records of `execute.protocol` (sent as their plain-data dumps). Being
its own `__main__`, the worker never re-imports the caller's main module, so a script without an
`if __name__ == "__main__":` guard, `python -c` and a notebook cell can start runs.

Started under `unshare ... --mount` (core/sandbox/policy.py `wrap_command`), it first makes its view of the file system
read-only but for the folders it writes (core/sandbox/confine.py) and reports the outcome in its ready message.

A worker outlives no controller: a watch thread ends the process as soon as its parent is gone (killed, crashed),
so a candidate that hangs or spins cannot keep a CPU or a GPU busy, and skew later timings, after its run ended.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from multiprocessing.connection import Connection

PATH_ENV = "KERNELLOOP_WORKER_SYS_PATH"   # the caller's sys.path (JSON list), so its imports resolve here too
ORPHANED_EXIT = 70                        # the exit status of a worker that ended because its controller was gone


def exit_with_parent(poll_s: float = 0.5) -> threading.Thread:
    """Start a daemon thread that ends this process (`os._exit(ORPHANED_EXIT)`) once its parent is no longer the
    one it had at the call: the parent died and the process was re-parented. A request that never returns (a
    candidate spinning in a loop) cannot stop it. Started before the first request, so the thread census counts it
    in every baseline."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(ORPHANED_EXIT)

    thread = threading.Thread(target=watch, name="kernelloop-parent-watch", daemon=True)
    thread.start()
    return thread


def main(argv: list[str]) -> None:
    fd, device, log_path, job_root = argv
    # the read-only view (core/sandbox/confine.py) first: it needs a process of one thread, before torch is imported
    from ..sandbox.confine import confine_from_env
    view = confine_from_env()
    exit_with_parent()
    for entry in json.loads(os.environ.pop(PATH_ENV, "[]")):
        if entry and entry not in sys.path:
            sys.path.append(entry)
    from .worker import worker_main
    worker_main(Connection(int(fd)), device, log_path, job_root, view=view)


if __name__ == "__main__":
    main(sys.argv[1:])
