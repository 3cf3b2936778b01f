"""FlashInfer-Trace records -> a kernelloop op folder (spec.toml, reference.py, a template, workloads.toml).

What maps (FlashInfer -> kernelloop):
- name -> the op (and folder) name; description -> description; op_type and tags -> comments in spec.toml.
- var axes -> axes; a const axis -> an axis with min = max = its value (every workload carries that value);
  constraints of the form `AXIS <op> INT` (<=, <, >=, >, ==) -> the axis' min/max; other constraints are checked
  on every imported workload (when kernelloop's expression language can read them) and kept as comments.
- tensor inputs/outputs -> inputs/outputs in the same order; the first tensor input's dtype becomes the op's
  one dtype (tensors of that dtype: 'op'; others keep theirs). float16/bfloat16/float32 only.
- scalar inputs (shape null, a float dtype) -> scalars; their value comes from the workloads (one value for all:
  kernelloop's scalars are per op) or, without workloads, from `run`'s default for that parameter.
- reference -> reference.py (import_code.py); Workloads with random/scalar inputs -> workloads.toml (weight 1).
- a destination-passing, single-file Triton Solution -> the op's one template (import_code.py).

What does not map -> InteropError naming the field: dtypes kernelloop lacks (float8, float4, ints, bool),
safetensors or random scalar inputs, scalars of int/bool dtype or with differing values across workloads, a
Definition without a Solution, and solutions that are value-returning, multi-file or not Triton.

Why a Solution is required: kernelloop's OpSpec needs at least one template, and a Definition carries no kernel.
A template that only called the reference would be a placeholder posing as a kernel (and kernelloop's static
rules reject calling the library being beaten), so import refuses instead -- unless a Solution gives real code.

Chosen defaults, written as comments in spec.toml: tolerance atol = rtol = 1e-2 (flashinfer-bench's default
evaluation tolerance); inputs drawn as kernelloop 'activation's under the 'normal' distribution only (FlashInfer
draws plain random inputs; kernelloop's harder distributions may leave an op's domain -- widen them by hand);
bytes formula = every tensor read or written once; FLOPs formula "0" (unknown: the roofline treats the op as
memory-bound until it is set).
"""

from __future__ import annotations

import ast
import re
import shutil
import tomllib
from pathlib import Path

from pydantic import ValidationError

from ...base.records import DType, OpSpec, evaluate_expression
from ...core.spec import OpBundle, SpecError, load_op, load_workloads
from . import flashinfer_trace as fi
from . import toml_out as T
from .errors import InteropError, first_error, parse, read_json
from .import_code import ADAPTER_PARAM, check_solution, reference_source, template_source
from .solution_code import check_identifier
from ...base import pyast

KL_DTYPE = {fi.DType.FLOAT16: DType.fp16, fi.DType.BFLOAT16: DType.bf16, fi.DType.FLOAT32: DType.fp32}
DEFAULT_TOLERANCE = 1e-2
_BOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*(<=|<|>=|>|==)\s*(-?\d+)\s*$"     # AXIS <= 4096
                    r"|^\s*(-?\d+)\s*(<=|<|>=|>|==)\s*([A-Za-z_]\w*)\s*$")  # 64 <= AXIS
_FLIP = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "==": "=="}
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _kl_dtype(t: fi.TensorSpec, field: str) -> DType:
    if t.dtype not in KL_DTYPE:
        raise InteropError(field, f"{t.dtype.value}: kernelloop has no such dtype (it has float16, bfloat16, float32)")
    return KL_DTYPE[t.dtype]


def _bounds(d: fi.Definition) -> tuple[dict[str, list[int | None]], list[str]]:
    """Per axis [min, max] from simple constraints, and the constraints that are not simple bounds."""
    bounds: dict[str, list[int | None]] = {}
    other = []
    for i, c in enumerate(d.constraints):
        m = _BOUND.match(c)
        if not m or (m.group(1) or m.group(6)) not in d.axes:
            other.append(c)
            continue
        if m.group(1):
            ax, op, n = m.group(1), m.group(2), int(m.group(3))
        else:
            ax, op, n = m.group(6), _FLIP[m.group(5)], int(m.group(4))
        lo, hi = {"<=": (None, n), "<": (None, n - 1), ">=": (n, None), ">": (n + 1, None), "==": (n, n)}[op]
        b = bounds.setdefault(ax, [None, None])
        if lo is not None:
            b[0] = lo if b[0] is None else max(b[0], lo)
        if hi is not None:
            b[1] = hi if b[1] is None else min(b[1], hi)
    return bounds, other


def _run_defaults(d: fi.Definition) -> dict[str, float]:
    tree = pyast.parse(d.reference)
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    args = run.args.posonlyargs + run.args.args
    out = {}
    for a, default in zip(args[len(args) - len(run.args.defaults):], run.args.defaults):
        try:
            v = ast.literal_eval(default)
        except ValueError:
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[a.arg] = float(v)
    return out


def _as_workload(w: fi.Trace | fi.Workload | dict, d: fi.Definition, field: str) -> fi.Workload:
    if not isinstance(w, (fi.Trace, fi.Workload)):
        w = parse(fi.Trace if isinstance(w, dict) and "workload" in w else fi.Workload, w)
    if isinstance(w, fi.Trace):
        if w.definition != d.name:
            raise InteropError(f"{field}.definition", f"{w.definition!r} is not the definition {d.name!r}")
        w = w.workload
    return w


def _workload_entries(d: fi.Definition, workloads: list, axes: dict, tensors: list[str], scalars: list[str],
                      other: list[str]) -> tuple[list[dict], dict[str, float], list[str]]:
    """kernelloop workload entries, the scalars' values, notes (duplicates dropped)."""
    values: dict[str, float] = {}
    entries, seen, notes = [], set(), []
    for i, raw in enumerate(workloads):
        f = f"workloads.{i}"
        try:
            w = _as_workload(raw, d, f)
        except InteropError as e:
            raise e.under(f) if not e.field.startswith(f) else e
        for n in w.inputs:
            if n not in d.inputs:
                raise InteropError(f"{f}.inputs.{n}", "is not an input of the definition")
        for n, spec in w.inputs.items():
            if isinstance(spec, fi.SafetensorsInput):
                raise InteropError(f"{f}.inputs.{n}", f"safetensors input ({spec.path}): kernelloop draws its own "
                                                      f"seeded inputs and cannot load recorded tensors")
        for n in scalars:
            s = w.inputs.get(n)
            if not isinstance(s, fi.ScalarInput):
                raise InteropError(f"{f}.inputs.{n}", "a scalar input needs a `scalar` value: kernelloop's scalars "
                                                      "are fixed per op, not drawn at random")
            if isinstance(s.value, bool):
                raise InteropError(f"{f}.inputs.{n}.value", "a bool: kernelloop's scalars are floats")
            if n in values and values[n] != float(s.value):
                raise InteropError(f"{f}.inputs.{n}.value", f"{s.value} differs from {values[n]} in an earlier "
                                                            f"workload: kernelloop's scalars are one value per op")
            values[n] = float(s.value)
        for n in tensors:
            if isinstance(w.inputs.get(n), fi.ScalarInput):
                raise InteropError(f"{f}.inputs.{n}", "a scalar value for a tensor input")
        var = set(d.var_axes)
        if set(w.axes) != var:
            raise InteropError(f"{f}.axes", f"gives {sorted(w.axes)}, the definition's var axes are {sorted(var)}")
        full = {**{k: w.axes[k] for k in d.axes if k in w.axes}, **d.const_axes}
        full = {k: full[k] for k in d.axes}
        for k, v in full.items():
            lo, hi = axes[k].get("min", 1), axes[k].get("max")
            if v < lo or (hi is not None and v > hi):
                raise InteropError(f"{f}.axes.{k}", f"{v} is outside [{lo}, {hi if hi is not None else 'inf'}]")
        for c in other:
            try:
                ok = evaluate_expression(c, full)
            except (ValueError, SyntaxError, TypeError, ZeroDivisionError, NameError):
                continue  # outside kernelloop's expression language: kept as a comment only
            if not ok:
                raise InteropError(f"{f}.axes", f"{full} violates the definition's constraint {c!r}")
        key = tuple(full.items())
        if key in seen:
            notes.append(f"{f} ({w.uuid}): same axes as an earlier workload; kernelloop's random inputs make it the "
                         f"same workload, dropped")
            continue
        seen.add(key)
        entries.append({"axes": full, "uuid": w.uuid})
    return entries, values, notes


def _checkable(expr: str, axes: dict) -> bool:
    """A Definition constraint kernelloop can state as a spec constraint: an expression over the axes it accepts."""
    import ast
    from ...base.records import check_expression
    try:
        tree = check_expression(expr)
    except (ValueError, SyntaxError):
        return False
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return bool(names) and names <= set(axes) | {"min", "max", "cdiv", "sqrt_", "next_pow2"}


def _spec_toml(d: fi.Definition, name: str, axes: dict, tensors: list[dict], outputs: list[dict], scalars: dict,
               op_dtype: DType, bytes_formula: str, other: list[str], template: dict | None) -> str:
    L = T.comment(f"Imported from FlashInfer-Trace Definition `{d.name}` by `kernelloop trace import` "
                  f"(schema of flashinfer-bench {fi.FLASHINFER_BENCH_COMMIT[:12]}).")
    L += T.comment(f"op_type: {d.op_type}") + (T.comment(f"tags: {', '.join(d.tags)}") if d.tags else [])
    for c in other:
        L += T.comment(f"constraint (checked on imported workloads, not by kernelloop afterwards): {c}")
    L += T.assignments({"name": name, "description": d.description or "", "reference": "reference.py",
                        "dtypes": [op_dtype.value]})
    L += ["# Every tensor read or written once (the Definition gives no traffic model).",
          f"bytes_formula = {T.string(bytes_formula)}",
          "# Unknown: FlashInfer Definitions carry no FLOP count. With 0 the roofline treats the op as memory-bound.",
          'flops_formula = "0"', ""]
    if scalars:
        L += ["[scalars]", *T.assignments(scalars), ""]
    for k, a in axes.items():
        L += [f"[axes.{T.key(k)}]", *T.assignments(a), ""]
    for kind, ts in (("inputs", tensors), ("outputs", outputs)):
        for t in ts:
            L += [f"[[{kind}]]", *T.assignments(t)]
        L.append("")
    L += ["# flashinfer-bench's default evaluation tolerance (the Definition carries none).",
          f"[tolerance.{op_dtype.value}]", f"atol = {DEFAULT_TOLERANCE!r}", f"rtol = {DEFAULT_TOLERANCE!r}", "",
          "# FlashInfer draws plain random inputs; kernelloop's 'large', 'mixed', 'near_zero' and 'heavy_tail'",
          "# distributions may leave the op's domain: add them once the tolerance is known to hold there.",
          "[inputs_policy]", 'distributions = ["normal"]', ""]
    if template is not None:
        L += [*T.comment(f"The solution `{template['solution']}` as submitted, behind an adapter `launch`: a space "
                         f"of one point."), "[[templates]]", *T.assignments({"name": "solution", "file": template["file"]}),
              "[[templates.params]]", *T.assignments({"name": ADAPTER_PARAM, "values": [template["solution"]]}),
              *[line for c in other if _checkable(c, axes) for line in (
                  "[[templates.constraints]]", *T.assignments({"expr": c, "reason": "the Definition's constraint"}))],
              "# The solution launches its own kernels: no resource estimate, so hardware pruning never removes it.",
              "[templates.resources]", 'threads = "32"', 'regs_per_thread = "0"', 'shared_bytes = "0"', ""]
    return "\n".join(L)


def _workloads_toml(d: fi.Definition, name: str, entries: list[dict], dtype: DType) -> str:
    L = T.comment(f"Workloads of FlashInfer-Trace Definition `{d.name}`, imported by `kernelloop trace import`.")
    L += [f"op = {T.string(name)}", ""]
    for e in entries:
        L += [*T.comment(f"FlashInfer workload uuid {e['uuid']}"), "[[workload]]",
              f"axes = {T.value(e['axes'])}", f"dtype = {T.string(dtype.value)}", "weight = 1.0", ""]
    return "\n".join(L)


def import_definition(definition: fi.Definition | dict | str | Path, ops_dir: str | Path, *,
                      workloads: list | None = None, solution: fi.Solution | dict | None = None,
                      name: str | None = None, overwrite: bool = False) -> tuple[OpBundle, list[str]]:
    """Write `ops_dir/<name>/` from a Definition (a record, its JSON text/dict, or a .json path), its workloads
    (Traces or Workloads) and a Solution for the template; return the loaded op and notes. Everything is checked
    before anything is written; InteropError names the field that does not map."""
    if isinstance(definition, Path) or (isinstance(definition, str) and not definition.lstrip().startswith("{")):
        d = read_json(fi.Definition, definition)
    elif isinstance(definition, fi.Definition):
        d = definition
    else:
        d = parse(fi.Definition, definition, "definition")
    if solution is not None and not isinstance(solution, fi.Solution):
        solution = parse(fi.Solution, solution, "solution")
    name = name or d.name
    if not _NAME.match(name) or name in (".", ".."):
        raise InteropError("name", f"{name!r} cannot be an op folder name (letters, digits, _ . -)")
    tensor_in = {k: t for k, t in d.inputs.items() if t.shape is not None}
    scalar_in = [k for k, t in d.inputs.items() if t.shape is None]
    dtypes = _checked_dtypes(d, tensor_in, scalar_in)
    op_dtype = dtypes[next(iter(tensor_in))]
    bounds, other = _bounds(d)
    axes = {k: _axis_entry(k, a, bounds.get(k, [None, None])) for k, a in d.axes.items()}

    def tensor(k: str, t: fi.TensorSpec) -> dict:
        return {"name": k, "shape": list(t.shape), **({} if dtypes[k] == op_dtype else {"dtype": dtypes[k].value})}
    tensors = [tensor(k, t) for k, t in tensor_in.items()]
    outputs = [tensor(k, t) for k, t in d.outputs.items()]
    terms = [" * ".join([*t.shape, "elem" if dtypes[k] == op_dtype else str(dtypes[k].itemsize)])
             for k, t in [*tensor_in.items(), *d.outputs.items()]]
    bytes_formula = " + ".join(f"({x})" for x in terms)

    entries, values, notes = _workload_entries(d, workloads or [], axes, list(tensor_in), scalar_in, other)
    scalars = _scalar_values(d, scalar_in, values, notes)
    if solution is None:
        raise InteropError("solution", "none given: kernelloop's OpSpec needs at least one template and a Definition "
                                       "carries no kernel; pass a destination-passing Triton Solution of it")
    check_solution(solution, d)
    tfile = "solution.py"
    template = {"solution": solution.name, "file": tfile}
    spec_text = _spec_toml(d, name, axes, tensors, outputs, scalars, op_dtype, bytes_formula, other, template)
    try:
        OpSpec.model_validate(tomllib.loads(spec_text))
    except ValidationError as e:
        raise first_error(e, "spec.toml") from None
    files = {"spec.toml": spec_text, "reference.py": reference_source(d, list(tensor_in), scalar_in),
             tfile: template_source(solution, d, list(tensor_in), scalar_in, list(d.outputs))}
    if entries:
        files["workloads.toml"] = _workloads_toml(d, name, entries, op_dtype)
    return _write_op(Path(ops_dir) / name, files, overwrite), notes


def _checked_dtypes(d: fi.Definition, tensor_in: dict, scalar_in: list[str]) -> dict:
    """kernelloop's dtype of every tensor input and output, once the inputs and outputs map: at least one tensor
    input, tensor outputs only, identifier names, float scalars."""
    if not tensor_in:
        raise InteropError("inputs", "no tensor input: kernelloop ops take at least one tensor")
    if not d.outputs:
        raise InteropError("outputs", "no output")
    for k in d.inputs:
        check_identifier(k, f"inputs.{k}")
    for k, t in d.outputs.items():
        check_identifier(k, f"outputs.{k}")
        if t.shape is None:
            raise InteropError(f"outputs.{k}.shape", "null (a scalar output): kernelloop outputs are tensors")
    dtypes = {k: _kl_dtype(t, f"inputs.{k}.dtype") for k, t in tensor_in.items()}
    dtypes.update({k: _kl_dtype(t, f"outputs.{k}.dtype") for k, t in d.outputs.items()})
    for k in scalar_in:
        if d.inputs[k].dtype not in KL_DTYPE:
            raise InteropError(f"inputs.{k}.dtype",
                               f"{d.inputs[k].dtype.value} scalar: kernelloop's scalars are floats")
    return dtypes


def _axis_entry(k: str, a, bound: list) -> dict:
    """The spec.toml entry of axis `k`: its description and the min/max its constraints (or its const) give."""
    entry = {"description": a.description} if a.description else {}
    lo, hi = bound
    if isinstance(a, fi.AxisConst):
        if (lo is not None and a.value < lo) or (hi is not None and a.value > hi):
            raise InteropError(f"axes.{k}", f"const {a.value} violates the definition's own bounds")
        lo = hi = a.value
    if lo is not None and lo != 1:
        entry["min"] = max(lo, 0)
    if hi is not None:
        entry["max"] = hi
    if hi is not None and hi < (lo if lo is not None else 1):
        raise InteropError(f"axes.{k}", f"its constraints leave no value (min {lo}, max {hi})")
    return entry


def _scalar_values(d: fi.Definition, scalar_in: list[str], values: dict, notes: list[str]) -> dict:
    """Each scalar input's fixed value: the workloads', else the run function's default (noted)."""
    defaults = _run_defaults(d)
    scalars = {}
    for k in scalar_in:
        if k in values:
            scalars[k] = values[k]
        elif k in defaults:
            scalars[k] = defaults[k]
            notes.append(f"scalar {k} = {defaults[k]} from run's default (no workload gave a value)")
        else:
            raise InteropError(f"inputs.{k}", "a scalar input needs a value: kernelloop's scalars are fixed per op; "
                                              "give workloads with a `scalar` value for it")
    return scalars


def _write_op(folder: Path, files: dict[str, str], overwrite: bool) -> OpBundle:
    """The op folder written and loaded (its workloads too); nothing stays of a folder that does not load."""
    if folder.exists():
        if not overwrite:
            raise InteropError("name", f"{folder} exists (overwrite it with --force)")
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for fname, text in files.items():
        (folder / fname).write_text(text)
    try:
        bundle = load_op(folder)
        if "workloads.toml" in files:
            load_workloads(folder / "workloads.toml", bundle.spec)
    except SpecError as e:  # the reference's dry run (its outputs on tiny inputs) is only possible once written
        shutil.rmtree(folder, ignore_errors=True)   # nothing stays of a refused import
        raise InteropError(e.field, e.message, e.file) from None
    return bundle


def import_workloads(workloads: list, definition: fi.Definition, spec: OpSpec, out: str | Path) -> Path:
    """Write the workloads of `definition` (random/scalar inputs only) as a kernelloop workload file for the op
    `spec` (an earlier import of that definition); the scalars must equal the op's."""
    axes = {k: {**({"min": a.min} if a.min != 1 else {}), **({"max": a.max} if a.max is not None else {})}
            for k, a in spec.axes.items()}
    tensors = [k for k, t in definition.inputs.items() if t.shape is not None]
    scalar_in = [k for k, t in definition.inputs.items() if t.shape is None]
    _, other = _bounds(definition)
    entries, values, _ = _workload_entries(definition, workloads, axes, tensors, scalar_in, other)
    for k, v in values.items():
        if spec.scalars.get(k) != v:
            raise InteropError(f"inputs.{k}", f"the workloads give {v}, the op {spec.name} has {spec.scalars.get(k)}")
    if not entries:
        raise InteropError("workloads", "none given")
    out = Path(out)
    out.write_text(_workloads_toml(definition, spec.name, entries, spec.dtypes[0]))
    try:
        load_workloads(out, spec)
    except SpecError as e:
        raise InteropError(e.field, e.message, e.file) from None
    return out
