"""The worker as its own program: `python -m kernelloop.execute.child FD DEVICE LOG_PATH JOB_ROOT`.

`execute.pool.Worker` starts it through `subprocess` and speaks to it over one end of a socket pair (file
descriptor FD), with the request and reply records of `execute.protocol` (sent as their plain-data dumps). Being
its own `__main__`, the worker never re-imports the caller's main module, so a script without an
`if __name__ == "__main__":` guard, `python -c` and a notebook cell can start runs.

Started under `unshare ... --mount` (execute/sandbox.py `wrap_command`), it first makes its view of the file system
read-only but for the folders it writes (execute/confine.py) and reports the outcome in its ready message.
"""

from __future__ import annotations

import json
import os
import sys
from multiprocessing.connection import Connection

PATH_ENV = "KERNELLOOP_WORKER_SYS_PATH"   # the caller's sys.path (JSON list), so its imports resolve here too


def main(argv: list[str]) -> None:
    fd, device, log_path, job_root = argv
    # the read-only view (execute/confine.py) first: it needs a process of one thread, before torch is imported
    from .confine import confine_from_env
    view = confine_from_env()
    for entry in json.loads(os.environ.pop(PATH_ENV, "[]")):
        if entry and entry not in sys.path:
            sys.path.append(entry)
    from .worker import worker_main
    worker_main(Connection(int(fd)), device, log_path, job_root, view=view)


if __name__ == "__main__":
    main(sys.argv[1:])
