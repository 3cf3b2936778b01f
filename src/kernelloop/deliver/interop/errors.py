"""InteropError: a FlashInfer-Trace record that is malformed, or that has no kernelloop equivalent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class InteropError(ValueError):
    """Names the record (file or kind), the field (dotted path, e.g. `inputs.x.dtype`) and why.

    Raised for input that does not validate against the format and for content that does validate but that
    kernelloop cannot represent (a float8 tensor, a safetensors input, ...); never for a bug."""

    def __init__(self, field: str, message: str, where: str = ""):
        self.field, self.message, self.where = field, message, where
        head = f"{where}: " if where else ""
        super().__init__(f"{head}{field}: {message}" if field else f"{head}{message}")

    def at(self, where: str) -> "InteropError":
        """The same error, located in `where` (a file) unless it already names one."""
        return self if self.where else InteropError(self.field, self.message, where)

    def under(self, prefix: str) -> "InteropError":
        """The same error with `prefix.` in front of its field (an error inside a nested record)."""
        return InteropError(f"{prefix}.{self.field}" if self.field else prefix, self.message, self.where)


def first_error(err: ValidationError, where: str = "") -> InteropError:
    """The first pydantic error as an InteropError naming its field."""
    errors = err.errors()
    e = errors[0]
    field = ".".join(str(p) for p in e["loc"]) or "(top level)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    msg = e["msg"]
    if e.get("type") == "enum" and "expected" in e.get("ctx", {}):
        msg = f"{e['input']!r} is not one of {e['ctx']['expected']}"
    return InteropError(field, msg + more, where)


def parse(model: type[M], data: dict | str | bytes, where: str = "") -> M:
    """Validate `data` (a dict or JSON text) as `model`; InteropError naming the field when it does not fit."""
    try:
        if isinstance(data, (str, bytes)):
            data = json.loads(data)
    except json.JSONDecodeError as e:
        raise InteropError("", f"not valid JSON: {e}", where) from None
    if not isinstance(data, dict):
        raise InteropError("(top level)", f"expected a JSON object, got {type(data).__name__}", where)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise first_error(e, where) from None


def read_json(model: type[M], path: str | Path) -> M:
    """One record from a .json file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InteropError("", f"cannot read: {e.strerror or e}", str(path)) from None
    return parse(model, text, str(path))


def read_jsonl(model: type[M], path: str | Path) -> list[M]:
    """Records from a .jsonl file, one per non-empty line (errors name the line)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InteropError("", f"cannot read: {e.strerror or e}", str(path)) from None
    return [parse(model, line, f"{path}:{i + 1}") for i, line in enumerate(lines) if line.strip()]
