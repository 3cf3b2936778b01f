"""Processes and I/O: work in threads, processes or tasks outside the call (`thread-or-process`), and files, the
environment, argv or the network (`file-or-env-access`).
"""

from __future__ import annotations

from .registry import FILE, PROC, rule
from .source import _Module


@rule(PROC, """Threads, processes and asynchronous tasks run work outside the call: launch returns before the
    result exists, escaping the timer, and a second process can also reach files, devices or the controller.""")
def _thread_or_process(m: _Module):
    yield from m.hits_for(PROC)


@rule(FILE, """A kernel needs nothing outside its arguments. Files, the environment, argv and the network can
    reveal the job directory, earlier outputs, the reference or a benchmark-mode flag, and let behaviour depend on
    where it runs rather than on the inputs.""")
def _file_or_env(m: _Module):
    yield from m.hits_for(FILE)
