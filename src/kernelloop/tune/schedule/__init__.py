"""Typed schedules of the warp-specialized Hopper GEMM family: the record, its lowering to Gluon, the barrier
protocol and footprint checks, the hand-written templates as schedules, and edits as JSON patches."""

from .library import LIBRARY, generated_template
from .lower import NotLowerable, lower, schedule_of
from .protocol import Finding, check_protocol
from .records import Schedule
from .resources import check_resources, footprint

__all__ = ["Finding", "LIBRARY", "NotLowerable", "Schedule", "check_protocol", "check_resources", "footprint",
           "generated_template", "lower", "schedule_of"]
