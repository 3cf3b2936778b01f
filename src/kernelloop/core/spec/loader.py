"""Read `ops/<op>/spec.toml` and workload files into validated records.

Every problem is a `SpecError` that names the file and the field, e.g.
`ops/x/spec.toml: dtypes.0: Input should be 'fp16', 'bf16' or 'fp32'`.
"""

from __future__ import annotations

import ast
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ...base.records import DType, OpSpec, Workload, sha256_hex
from ...base.records.spec import ReferenceOutputError, SpecError  # noqa: F401 - defined with the spec records: reference/ raises one
from ...base import pyast
from .extends import resolve


@dataclass(frozen=True)
class OpBundle:
    """A loaded op folder: the validated spec plus the sources it names."""

    spec: OpSpec
    folder: Path
    reference_source: str
    template_sources: dict[str, str]
    fixed_axes: tuple[str, ...] = ()   # `fixed_axes` in spec.toml: axes the held-out draws never vary
    spec_files: tuple[Path, ...] = ()  # the spec.toml and those it extends (`extends`), its own first

    @property
    def reference_hash(self) -> str:
        return sha256_hex(self.reference_source)

    @property
    def spec_hash(self) -> str:
        """sha256 of what the spec says: its spec.toml's bytes; for a spec that extends others, of the hashes of
        every file of the chain (its own first), so that a change to a base shows as a change of this spec."""
        files = self.spec_files or (self.folder / "spec.toml",)
        hashes = [sha256_hex(f.read_bytes()) for f in files]
        return hashes[0] if len(hashes) == 1 else sha256_hex("\n".join(hashes))

    def spec_file_names(self) -> list[str]:
        """The chain's spec files as paths relative to the op folder (`spec.toml`, `../gemm_bias/spec.toml`)."""
        files = self.spec_files or (self.folder / "spec.toml",)
        return [os.path.relpath(f, self.folder) for f in files]


def _read_text(path: Path, where: Path | None = None, field: str = "") -> str:
    """A file's text; a missing, unreadable or non-UTF-8 file is a SpecError naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(where or path, field, "file not found" if where is None else f"{path} not found") from None
    except UnicodeDecodeError as e:
        raise SpecError(where or path, field, f"{path} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise SpecError(where or path, field, f"cannot read {path}: {e.strerror or e}") from None


def _read_toml(path: Path) -> dict:
    text = _read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(path, "", f"not valid TOML: {e}") from None


def _first_error(path: Path, err: ValidationError) -> SpecError:
    e = err.errors()[0]
    field = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = e["msg"]
    extra = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return SpecError(path, field, msg + extra)


def _defines(source: str, name: str) -> bool:
    tree = pyast.parse(source)
    return any(isinstance(n, (ast.FunctionDef, ast.Assign)) and
               (getattr(n, "name", None) == name or any(getattr(t, "id", None) == name for t in getattr(n, "targets", [])))
               for n in tree.body)


def load_op(path: str | Path) -> OpBundle:
    """Load an op from its folder or its spec.toml (with the specs it `extends`, kernelloop.core.spec.extends)."""
    path = Path(path)
    spec_file = path / "spec.toml" if path.is_dir() else path
    folder = spec_file.parent
    data, chain = resolve(spec_file, _read_toml, SpecError)
    fixed = data.pop("fixed_axes", [])
    try:
        spec = OpSpec.model_validate(data)
    except ValidationError as e:
        raise _first_error(spec_file, e) from None
    if not isinstance(fixed, list) or not all(isinstance(a, str) for a in fixed):
        raise SpecError(spec_file, "fixed_axes", "expected a list of axis names")
    for i, ax in enumerate(fixed):
        if ax not in spec.axes:
            raise SpecError(spec_file, f"fixed_axes.{i}", f"unknown axis {ax!r}")
        if ax in (spec.heldout_axes or []):
            raise SpecError(spec_file, f"fixed_axes.{i}", f"{ax!r} is also a held-out axis")
    if spec.name != folder.name:
        raise SpecError(spec_file, "name", f"{spec.name!r} differs from its folder name {folder.name!r}")
    ref_file = folder / spec.reference
    if not ref_file.is_file():
        raise SpecError(spec_file, "reference", f"reference file {ref_file} does not exist")
    ref_src = _read_text(ref_file, spec_file, "reference")
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
        src = _read_text(f, spec_file, f"templates.{i}.file")
        try:
            if not _defines(src, "launch"):
                raise SpecError(f, "launch", "the template defines no function `launch`")
        except SyntaxError as e:
            raise SpecError(f, "", f"syntax error: {e}") from None
        sources[t.name] = src
    dry_run_reference(spec, ref_file, spec_file)
    return OpBundle(spec=spec, folder=folder, reference_source=ref_src, template_sources=sources,
                    fixed_axes=tuple(dict.fromkeys(fixed)), spec_files=chain)


def domain_constraints(spec: OpSpec) -> list[str]:
    """The op's own domain as its implementations state it: constraints over axes only (and `elem`) that every
    template declares, e.g. attention's 'H % HKV == 0'."""
    names = set(spec.axes) | {"elem"}
    common = None
    for t in spec.templates:
        exprs = set()
        for c in t.constraints:
            used = {n.id for n in ast.walk(pyast.parse(c.expr, mode="eval")) if isinstance(n, ast.Name)}
            if used and used <= names | {"min", "max", "cdiv", "sqrt_", "next_pow2"} and used & set(spec.axes):
                exprs.add(c.expr)
        common = exprs if common is None else common & exprs
    return sorted(common or ())


def in_domain(spec: OpSpec, axes: dict[str, int], dtype: DType, constraints: list[str] | None = None) -> bool:
    """Whether axis values lie in the op's domain: each axis within [min, max], the domain constraints hold."""
    from ...base.records import evaluate_expression
    for name, v in axes.items():
        ax = spec.axes[name]
        if v < ax.min or (ax.max is not None and v > ax.max):
            return False
    env = {**axes, "elem": dtype.itemsize}
    return all(evaluate_expression(e, env) for e in (domain_constraints(spec) if constraints is None else constraints))


def tiny_axes(spec: OpSpec) -> dict[str, int]:
    """Small axis values in the op's domain, distinct where the domain allows (so a transposed or mixed-up result
    shape shows), for the reference's dry run."""
    dtype = spec.dtypes[0]
    lo = {n: a.min for n, a in spec.axes.items()}
    clip = {n: (lambda v, a=a: max(a.min, v if a.max is None else min(a.max, v))) for n, a in spec.axes.items()}
    for attempt in ({n: clip[n](2 + i) for i, n in enumerate(spec.axes)},
                    {n: clip[n](2) for n in spec.axes}, {n: clip[n](1) for n in spec.axes}):
        if in_domain(spec, attempt, dtype):
            return attempt
    return lo


def dry_run_reference(spec: OpSpec, ref_file: Path, spec_file: Path | None = None) -> None:
    """Run the reference once on tiny seeded inputs and check its results against the declared outputs (count,
    shape, dtype): a SpecError naming the reference file and the output otherwise. Milliseconds per op."""
    from ..reference.inputs import make_inputs
    from ..reference.truth import truth
    try:
        axes = tiny_axes(spec)
    except (ArithmeticError, TypeError, ValueError, RecursionError) as e:
        raise SpecError(spec_file or ref_file.parent / "spec.toml", "templates.constraints",
                        f"a constraint every template declares cannot be evaluated on small axis values: "
                        f"{type(e).__name__}: {e}") from None
    w = Workload(op=spec.name, axes=axes, dtype=spec.dtypes[0])
    try:
        inputs = make_inputs(spec, w, 0, "cpu")
    except Exception as e:  # noqa: BLE001 - a spec whose inputs cannot be drawn is malformed
        raise SpecError(ref_file, "inputs", f"cannot draw inputs for {w.axes}: {type(e).__name__}: {e}") from None
    try:
        truth(spec, ref_file, inputs, w)
    except SpecError as e:
        raise SpecError(e.file, e.field, e.message) from None   # at load: a plain spec error (exit 2)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the reference must run on inputs of its own domain
        raise SpecError(ref_file, "reference", f"the reference raised on tiny inputs {w.axes}: "
                        f"{type(e).__name__}: {e}") from None


def workload_misfit(w: Workload, spec: OpSpec) -> tuple[str, str] | None:
    """How a workload does not fit the op: (field, message) for an axis missing or unknown, a value outside its
    axis's bounds, or a dtype the spec does not list; None when it fits."""
    if set(w.axes) != set(spec.axes):
        missing, unknown = sorted(set(spec.axes) - set(w.axes)), sorted(set(w.axes) - set(spec.axes))
        why = "; ".join(filter(None, [missing and f"missing {', '.join(missing)}",
                                      unknown and f"unknown {', '.join(unknown)}"]))
        return "axes", f"axes {sorted(w.axes)} differ from the spec's {sorted(spec.axes)} ({why})"
    for name, value in w.axes.items():
        ax = spec.axes[name]
        if value < ax.min or (ax.max is not None and value > ax.max):
            bound = f"[{ax.min}, {ax.max}]" if ax.max is not None else f">= {ax.min}"
            return f"axes.{name}", f"value {value} is outside {bound}"
    if w.dtype not in spec.dtypes:
        return "dtype", f"{w.dtype.value} is not among the spec's dtypes {[d.value for d in spec.dtypes]}"
    return None


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
        misfit = workload_misfit(w, spec)
        if misfit is not None:
            raise SpecError(path, f"{where}.{misfit[0]}", misfit[1])
        out.append(w)
    ids = [w.id for w in out]
    if len(set(ids)) != len(ids):
        raise SpecError(path, "workload", "duplicate workloads")
    return out


def dtype_of(name: str) -> DType:
    return DType(name)
