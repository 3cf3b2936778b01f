"""Timing and stream tricks: work off the caller's stream or in a CUDA graph (`new-stream`), and the timer's own
tools (`timing-access`).
"""

from __future__ import annotations

from .registry import STREAM, TIMING, rule
from .source import _Module


@rule(STREAM, """Kernels must run on the caller's current stream. Work launched on a new or side stream, or
    replayed from a CUDA graph, is not ordered with the timer's events: the timed region closes before the work
    is done, so the kernel looks free.""")
def _new_stream(m: _Module):
    yield from m.hits_for(STREAM)


@rule(TIMING, """Timing belongs to the controller. A candidate that reads clocks or creates timing events can
    detect that it is being benchmarked (rapid repeated calls) and behave differently, and the same modules are
    what a patched timer is built from.""")
def _timing_access(m: _Module):
    yield from m.hits_for(TIMING)
