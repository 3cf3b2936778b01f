"""Base class of every record: frozen, validated, JSON round-trippable, content-hashed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the byte string that content hashes are taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_hex(text: str | bytes) -> str:
    """Hex sha256 of a string (UTF-8) or bytes."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any, length: int = 16) -> str:
    """Short content address of a JSON-able value: sha256 of its canonical JSON."""
    return sha256_hex(canonical_json(value))[:length]


class Record(BaseModel):
    """A frozen record. `to_json`/`from_json` round-trip exactly."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    def to_json(self) -> str:
        return canonical_json(self.model_dump(mode="json"))

    @classmethod
    def from_json(cls, text: str):
        return cls.model_validate_json(text)
