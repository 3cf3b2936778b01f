"""Run archive: the durable SQLite store of an optimization run (survives kill -9, resumable)."""

from .schema import LATEST_VERSION, MIGRATIONS, Migration, SchemaError
from .store import Archive, ArchiveError

__all__ = ["Archive", "ArchiveError", "LATEST_VERSION", "MIGRATIONS", "Migration", "SchemaError"]
