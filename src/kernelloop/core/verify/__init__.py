"""The independent verifier: runs in the trusted controller, never in the candidate's process."""

from .compare import check_outputs

__all__ = ["check_outputs"]
