"""Load and validate op specs and workloads; expand and prune configuration spaces."""

from .loader import OpBundle, SpecError, load_op, load_workloads

__all__ = ["OpBundle", "SpecError", "load_op", "load_workloads"]
