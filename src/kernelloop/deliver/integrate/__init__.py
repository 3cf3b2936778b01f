"""Integration into a model: `apply` routes a model's calls to a package; `e2e` proves the gain end to end."""

from .apply import ApplyReport, Applied, Site, apply

__all__ = ["ApplyReport", "Applied", "Site", "apply"]
