"""Read `ops/<op>/spec.toml` and workload files into validated records.

Every problem is a `SpecError` that names the file and the field, e.g.
`ops/x/spec.toml: dtypes.0: Input should be 'fp16', 'bf16' or 'fp32'`.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..records import DType, OpSpec, Workload, sha256_hex


class SpecError(ValueError):
    """A malformed spec or workload file."""

    def __init__(self, file: Path | str, field: str, message: str):
        self.file, self.field, self.message = str(file), field, message
        super().__init__(f"{file}: {field}: {message}" if field else f"{file}: {message}")


@dataclass(frozen=True)
class OpBundle:
    """A loaded op folder: the validated spec plus the sources it names."""

    spec: OpSpec
    folder: Path
    reference_source: str
    template_sources: dict[str, str]

    @property
    def reference_hash(self) -> str:
        return sha256_hex(self.reference_source)


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(path, "", "file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, "", f"not valid TOML: {e}") from None


def _first_error(path: Path, err: ValidationError) -> SpecError:
    e = err.errors()[0]
    field = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"]
    extra = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return SpecError(path, field, msg + extra)


def _defines(source: str, name: str) -> bool:
    tree = ast.parse(source)
    return any(isinstance(n, (ast.FunctionDef, ast.Assign)) and
               (getattr(n, "name", None) == name or any(getattr(t, "id", None) == name for t in getattr(n, "targets", [])))
               for n in tree.body)


def load_op(path: str | Path) -> OpBundle:
    """Load an op from its folder or its spec.toml."""
    path = Path(path)
    spec_file = path / "spec.toml" if path.is_dir() else path
    folder = spec_file.parent
    data = _read_toml(spec_file)
    try:
        spec = OpSpec.model_validate(data)
    except ValidationError as e:
        raise _first_error(spec_file, e) from None
    if spec.name != folder.name:
        raise SpecError(spec_file, "name", f"{spec.name!r} differs from its folder name {folder.name!r}")
    ref_file = folder / spec.reference
    if not ref_file.is_file():
        raise SpecError(spec_file, "reference", f"reference file {ref_file} does not exist")
    ref_src = ref_file.read_text()
    try:
        if not _defines(ref_src, "reference"):
            raise SpecError(ref_file, "reference", "the reference file defines no function `reference`")
    except SyntaxError as e:
        raise SpecError(ref_file, "reference", f"syntax error: {e}") from None
    sources = {}
    for i, t in enumerate(spec.templates):
        f = folder / t.file
        if not f.is_file():
            raise SpecError(spec_file, f"templates.{i}.file", f"template file {f} does not exist")
        src = f.read_text()
        try:
            if not _defines(src, "launch"):
                raise SpecError(f, "launch", "the template defines no function `launch`")
        except SyntaxError as e:
            raise SpecError(f, "", f"syntax error: {e}") from None
        sources[t.name] = src
    return OpBundle(spec=spec, folder=folder, reference_source=ref_src, template_sources=sources)


def load_workloads(path: str | Path, spec: OpSpec) -> list[Workload]:
    """Load `[[workload]]` entries and check them against the spec's axes and dtypes."""
    path = Path(path)
    data = _read_toml(path)
    op = data.get("op", spec.name)
    if op != spec.name:
        raise SpecError(path, "op", f"workloads are for {op!r}, the spec is {spec.name!r}")
    entries = data.get("workload")
    if not isinstance(entries, list) or not entries:
        raise SpecError(path, "workload", "expected at least one [[workload]] table")
    out: list[Workload] = []
    for i, entry in enumerate(entries):
        where = f"workload.{i}"
        if not isinstance(entry, dict):
            raise SpecError(path, where, "expected a table")
        try:
            w = Workload.model_validate({"op": spec.name, **entry})
        except ValidationError as e:
            err = _first_error(path, e)
            raise SpecError(path, f"{where}.{err.field}", err.message) from None
        if set(w.axes) != set(spec.axes):
            raise SpecError(path, f"{where}.axes", f"axes {sorted(w.axes)} differ from the spec's {sorted(spec.axes)}")
        for name, value in w.axes.items():
            ax = spec.axes[name]
            if value < ax.min or (ax.max is not None and value > ax.max):
                bound = f"[{ax.min}, {ax.max}]" if ax.max is not None else f">= {ax.min}"
                raise SpecError(path, f"{where}.axes.{name}", f"value {value} is outside {bound}")
        if w.dtype not in spec.dtypes:
            raise SpecError(path, f"{where}.dtype", f"{w.dtype.value} is not among the spec's dtypes "
                            f"{[d.value for d in spec.dtypes]}")
        out.append(w)
    ids = [w.id for w in out]
    if len(set(ids)) != len(ids):
        raise SpecError(path, "workload", "duplicate workloads")
    return out


def dtype_of(name: str) -> DType:
    return DType(name)
