"""OpSpec and Workload: *what* to compute and *on what*."""

from __future__ import annotations

import ast
import math
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from .allow import DEFAULT_CODE_POLICY, CodePolicy
from .base import Record, content_hash
from .generators import BIN_HELDOUT_PATTERNS, HELDOUT_PATTERNS, BinsInit, CsrColIdxInit, CsrRowPtrInit, IndexInit, Init
from .generators import MaskInit, init_expressions
from .. import pyast


class DType(str, Enum):
    """Element types the library knows. Values are the spec-file spellings. An op's own dtypes (`OpSpec.dtypes`,
    a workload's dtype) are the floating ones; integer and boolean types are for single tensors (`TensorSpec.dtype`:
    indices, row pointers, labels, masks), compared exactly by the verifier."""

    fp16 = "fp16"
    bf16 = "bf16"
    fp32 = "fp32"
    int8 = "int8"
    uint8 = "uint8"
    int32 = "int32"
    int64 = "int64"
    bool_ = "bool"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self.value]

    @property
    def torch_name(self) -> str:
        return {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}.get(self.value, self.value)

    @property
    def is_float(self) -> bool:
        return self.value in ("fp16", "bf16", "fp32")


_ITEMSIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 1, "uint8": 1, "int32": 4, "int64": 8, "bool": 1}
TensorDType = Literal["op", "fp16", "bf16", "fp32", "int8", "uint8", "int32", "int64", "bool"]


_ALLOWED_FORMULA_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd,
    ast.Call, ast.Compare, ast.BoolOp, ast.And, ast.Or, ast.Not, ast.IfExp,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)
FORMULA_FUNCS = {"min": min, "max": max, "cdiv": lambda a, b: -(-a // b), "sqrt_": lambda x: x ** 0.5,
                  "next_pow2": lambda n: 1 << max(0, int(n - 1).bit_length())}


def check_expression(expr: str) -> ast.Expression:
    """Parse a spec expression (formula or constraint); only arithmetic, comparisons and a few functions.
    Malformed text is a ValueError (which pydantic reports as a validation error), never a SyntaxError."""
    try:
        tree = pyast.parse(expr, mode="eval")
    except (SyntaxError, RecursionError) as e:
        raise ValueError(f"not a valid expression: {expr[:200]!r} ({getattr(e, 'msg', None) or e})") from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_FORMULA_NODES):
            raise ValueError(f"{type(node).__name__} is not allowed in an expression: {expr!r}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FORMULA_FUNCS):
            raise ValueError(f"only {sorted(FORMULA_FUNCS)} may be called in {expr!r}")
    return tree


MAX_POWER_BITS = 1 << 20


def _pow(a, b):
    """`a ** b` in spec expressions, refusing results of more than MAX_POWER_BITS bits (an integer power tower
    would otherwise compute for hours)."""
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and a.bit_length() * b > MAX_POWER_BITS:
        raise ValueError(f"a power of about {a.bit_length() * b} bits is too large for a spec expression")
    return a ** b


class _BoundedPow(ast.NodeTransformer):
    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            return ast.copy_location(ast.Call(func=ast.Name(id="_pow", ctx=ast.Load()), args=[node.left, node.right],
                                              keywords=[]), node)
        return node


@lru_cache(maxsize=4096)
def _compiled(expr: str):
    """The checked expression's code and the names it reads. Pruning evaluates the same few constraint and resource
    expressions for every configuration of a space: parsing and checking each once is most of its time saved."""
    tree = check_expression(expr)
    used = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)) - set(FORMULA_FUNCS)
    bounded = ast.fix_missing_locations(_BoundedPow().visit(tree))
    return compile(bounded, "<spec expression>", "eval"), used


_GLOBALS = {"__builtins__": {}, **FORMULA_FUNCS, "_pow": _pow}


def evaluate_expression(expr: str, names: dict[str, float | int]):
    """Evaluate a checked expression with the given names bound (no builtins)."""
    code, used = _compiled(expr)
    missing = used - names.keys()
    if missing:
        raise ValueError(f"unknown name(s) {sorted(missing)} in {expr!r}")
    return eval(code, dict(_GLOBALS), dict(names))


def nonfinite_path(value, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite float inside a dumped record (None: all finite). Records are
    archived as canonical JSON, which has no NaN or Infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "(value)"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for k, v in items:
        if (p := nonfinite_path(v, f"{path}.{k}" if path else str(k))) is not None:
            return p
    return None


class Axis(Record):
    """A symbolic dimension of the op's tensors."""

    description: str = Field("", description="What the axis means.")
    min: int = Field(1, ge=0, description="Smallest legal value.")
    max: int | None = Field(None, description="Largest legal value, if bounded.")


def dim_size(entry: str, axes: dict[str, int]) -> int:
    """One entry of a tensor's shape for concrete axes: an axis name, or an expression over the axes ("M + 1")."""
    if entry in axes:
        return int(axes[entry])
    n = evaluate_expression(entry, axes)
    if n < 0 or n != int(n):
        raise ValueError(f"shape entry {entry!r} gives {n} for {axes}")
    return int(n)


class TensorSpec(Record):
    """One input or output tensor."""

    name: str = Field(description="Argument name, in call order.")
    shape: list[str] = Field(description="Axis names (or expressions over them, e.g. 'M + 1'), outermost first.")
    dtype: TensorDType = Field("op", description="'op' = the workload's dtype; integer and bool types are "
                                                 "compared exactly.")
    init: Init = Field("activation", description="How inputs are generated: 'activation', 'weight' or 'bias' for "
                                                 "float inputs, a generator record (base/records/generators.py) for "
                                                 "integer and bool ones; see reference.inputs.")

    def dims(self, axes: dict[str, int]) -> tuple[int, ...]:
        """The concrete shape for these axes."""
        return tuple(dim_size(a, axes) for a in self.shape)


class ScratchSpec(Record):
    """A workspace the harness gives the kernel: `launch(..., scratch=t)`, a flat tensor of `numel` elements.

    Kernels may not allocate (an allocation can pick up freed memory that still holds an answer), so a kernel that
    needs room for intermediate results -- split-K's fp32 partial tiles -- declares it here. The harness allocates
    it per workload and fills it with the poison pattern before every verified call and every timed sample, so
    nothing a call leaves in it survives to the next one and a kernel that reads what it did not write fails.
    """

    name: str = Field(description="What it holds, for humans and agents.")
    numel: str = Field(description="Elements, an expression over the axes (0: none for that workload).")
    dtype: Literal["fp16", "bf16", "fp32"] = Field("fp32", description="Element type.")

    @field_validator("numel")
    @classmethod
    def _numel(cls, v: str) -> str:
        check_expression(v)
        return v


class Tolerance(Record):
    """Pass if |out - ref| <= atol + rtol * |ref| elementwise.

    `atol_scale` (an expression over the axes, e.g. "sqrt_(K)" for a length-K accumulation) multiplies atol for
    each workload, so a reduction's error bound can grow with its length while zero outputs still fail.
    """

    atol: float = Field(ge=0, description="Absolute tolerance.")
    rtol: float = Field(ge=0, description="Relative tolerance.")
    atol_scale: str | None = Field(None, description="Expression over axes multiplying atol (e.g. 'sqrt_(K)').")

    @field_validator("atol_scale")
    @classmethod
    def _scale(cls, v: str | None) -> str | None:
        if v is not None:
            check_expression(v)
        return v

    def resolve(self, axes: dict[str, int]) -> "Tolerance":
        """This tolerance with atol scaled for concrete axis values."""
        if self.atol_scale is None:
            return self
        scale = float(evaluate_expression(self.atol_scale, axes))
        return Tolerance(atol=self.atol * scale, rtol=self.rtol)


Distribution = Literal["normal", "large", "mixed", "near_zero", "heavy_tail", "offset"]
ALL_DISTRIBUTIONS: tuple[str, ...] = ("normal", "large", "mixed", "near_zero", "heavy_tail")


class InputPolicy(Record):
    """How activations are drawn. Non-zero mean is deliberate (catches missing centering).

    Verification cycles through `distributions` (all within the op's valid domain): normal(mean, std);
    `large` = 64x that; `mixed` = rows scaled by 10^U(-2, 2); `near_zero` = 1e-3x; `heavy_tail` =
    Student-t with 2 degrees of freedom (clipped at 1e3 std), shifted by the mean; `offset` = normal(mean, std) plus
    a large common offset per row (+-16 to 63 std: a LayerNorm that skips its mean subtraction is far off on every
    row).

    `always`: distributions drawn in every trial's battery whatever the cycle through `distributions` reaches (one
    extra visible case each where the cycle misses one): the statistics-aware draws of the normalisation ops.
    """

    mean: float = Field(0.5, description="Mean of generated activations.")
    std: float = Field(1.0, gt=0, description="Standard deviation of generated activations.")
    distributions: list[Distribution] = Field(default_factory=lambda: list(ALL_DISTRIBUTIONS), min_length=1,
                                              description="Value distributions the verifier may draw.")
    always: list[Distribution] = Field(default_factory=list,
                                       description="Distributions every trial draws at least once per workload.")


class ParamSpace(Record):
    """One tunable parameter of a template and its candidate values."""

    name: str = Field(description="Keyword the template's launcher receives.")
    values: list[int | str | bool] = Field(min_length=1, description="Candidate values, in order.")


class Constraint(Record):
    """A semantic rule over config and axes; configurations for which `expr` is false are pruned."""

    expr: str = Field(description="Boolean expression over parameter and axis names.")
    reason: str = Field(description="Why the rule exists, reported when it prunes.")

    @field_validator("expr")
    @classmethod
    def _parse(cls, v: str) -> str:
        check_expression(v)
        return v


class ResourceModel(Record):
    """Estimates used by hardware pruning: expressions over params, axes and `elem` (bytes per element)."""

    threads: str = Field("num_warps * 32", description="Threads per program.")
    regs_per_thread: str = Field("32", description="Estimated 32-bit registers per thread.")
    shared_bytes: str = Field("0", description="Estimated shared memory per program (bytes).")


class TemplateSpec(Record):
    """A Triton template: a source file exposing `launch(*inputs, **config)` and a declared space."""

    name: str = Field(description="Template name, unique within the op.")
    file: str = Field(description="Source path relative to the op folder.")
    language: Literal["triton"] = Field("triton", description="Kernel language.")
    params: list[ParamSpace] = Field(min_length=1, description="The configuration space.")
    constraints: list[Constraint] = Field(default_factory=list, description="Semantic constraints.")
    resources: ResourceModel = Field(default_factory=ResourceModel, description="Hardware estimates.")


class OpSpec(Record):
    """What to compute: tensors in symbolic axes, reference, tolerances, roofline formulas, templates."""

    name: str = Field(description="Op name, equals its folder name.")
    description: str = Field("", description="One line for humans.")
    axes: dict[str, Axis] = Field(min_length=1, description="Symbolic axes.")
    inputs: list[TensorSpec] = Field(min_length=1, description="Input tensors in call order.")
    outputs: list[TensorSpec] = Field(min_length=1, description="Output tensors.")
    scalars: dict[str, float] = Field(default_factory=dict, description="Scalar arguments (e.g. eps).")
    dtypes: list[DType] = Field(min_length=1, description="Supported element types.")
    tolerance: dict[DType, Tolerance] = Field(description="Tolerance per dtype.")
    bytes_formula: str = Field(description="Bytes moved to/from DRAM at minimum; names: axes, elem.")
    flops_formula: str = Field(description="Floating-point operations; names: axes, elem.")
    reference: str = Field(description="Reference file relative to the op folder, defining `reference`.")
    inputs_policy: InputPolicy = Field(default_factory=InputPolicy, description="Activation distribution.")
    heldout_axes: list[str] | None = Field(
        None, description="Axes the verifier varies for held-out shapes (default: the first axis of the first input).")
    templates: list[TemplateSpec] = Field(min_length=1, description="Triton templates.")
    scratch: ScratchSpec | None = Field(
        None, description="A workspace the harness passes to `launch` as the keyword `scratch` (see ScratchSpec).")
    reduction: str | None = Field(
        None, description="Expression over the axes: the longest reduction behind one output element (e.g. 'K' "
                          "for a GEMM, 'N' for a row norm); it scales the bias and ULP bounds (core/verify/semantics.py). "
                          "Default: the largest axis of the workload.")
    code: CodePolicy | None = Field(
        None, description="What candidate code may name (base/records/allow.py); None: DEFAULT_CODE_POLICY.")

    @model_serializer(mode="wrap")
    def _drop_default_code(self, handler):
        out = handler(self)
        if isinstance(out, dict) and out.get("code", 0) is None:
            out.pop("code")   # specs without their own allow-list serialise as before it existed
        return out

    @property
    def code_policy(self) -> CodePolicy:
        """The allow-list candidate code is held to (kernelloop.core.verify.rules.allow)."""
        return self.code if self.code is not None else DEFAULT_CODE_POLICY

    @field_validator("bytes_formula", "flops_formula")
    @classmethod
    def _formula(cls, v: str) -> str:
        check_expression(v)
        return v

    @field_validator("reduction")
    @classmethod
    def _reduction(cls, v: str | None) -> str | None:
        if v is not None:
            check_expression(v)
        return v

    def reduction_length(self, axes: dict[str, int]) -> int:
        """The reduction length behind one output element for concrete axes (at least 1)."""
        if self.reduction is None:
            return max(1, *axes.values()) if axes else 1
        return max(1, int(evaluate_expression(self.reduction, axes)))

    @model_validator(mode="after")
    def _consistent(self) -> "OpSpec":
        for t in [*self.inputs, *self.outputs]:
            for ax in t.shape:
                if ax not in self.axes and not self._over_axes(ax):
                    raise ValueError(f"tensor {t.name!r} uses unknown axis {ax!r}")
        if bad := [d.value for d in self.dtypes if not d.is_float]:
            raise ValueError(f"an op's dtypes are floating types; {bad} belong on single tensors (TensorSpec.dtype)")
        self._check_inits()
        missing = [d.value for d in self.dtypes if d not in self.tolerance]
        if missing:
            raise ValueError(f"no tolerance for dtype(s) {missing}")
        if self.scratch is not None:
            unknown = {n.id for n in ast.walk(check_expression(self.scratch.numel)) if isinstance(n, ast.Name)} \
                - set(self.axes) - set(FORMULA_FUNCS)
            if unknown:
                raise ValueError(f"scratch numel {self.scratch.numel!r} uses unknown name(s) {sorted(unknown)}")
        for ax in self.heldout_axes or []:
            if ax not in self.axes:
                raise ValueError(f"heldout_axes names unknown axis {ax!r}")
        if self.heldout_axes is None and self.inputs[0].shape and self.inputs[0].shape[0] not in self.axes:
            raise ValueError(f"the first input's first dimension {self.inputs[0].shape[0]!r} is no axis: declare "
                             f"heldout_axes")
        names = [t.name for t in self.templates]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate template names {names}")
        if (bad := nonfinite_path(self.model_dump(mode="python"))) is not None:
            raise ValueError(f"{bad}: numbers in a spec must be finite (no NaN or infinity)")
        return self

    def _over_axes(self, expr: str) -> bool:
        """Whether `expr` is an expression naming only the spec's axes (a ValueError if it is no expression)."""
        names = {n.id for n in ast.walk(check_expression(expr)) if isinstance(n, ast.Name)} - set(FORMULA_FUNCS)
        if unknown := names - set(self.axes):
            raise ValueError(f"{expr!r} uses unknown name(s) {sorted(unknown)}")
        return True

    def _check_inits(self) -> None:
        """Each input's generator fits its dtype; its expressions name axes; a CSR column input names row pointers
        declared before it."""
        row_ptrs: set[str] = set()
        for t in self.inputs:
            init, dt = t.init, t.dtype
            floating = dt in ("op", "fp16", "bf16", "fp32")
            where = f"input {t.name!r}"
            if isinstance(init, str) and not floating:
                raise ValueError(f"{where}: a {dt} tensor needs a generator (index, mask, csr_*), not {init!r}")
            if isinstance(init, MaskInit) and dt != "bool":
                raise ValueError(f"{where}: a mask generator makes bool tensors, not {dt}")
            if isinstance(init, (IndexInit, CsrRowPtrInit, CsrColIdxInit, BinsInit)) and (floating or dt == "bool"):
                raise ValueError(f"{where}: a {init.kind} generator makes integer tensors, not {dt}")
            for e in init_expressions(init) if not isinstance(init, str) else ():
                self._over_axes(e)
            if isinstance(init, CsrRowPtrInit):
                row_ptrs.add(t.name)
            if isinstance(init, CsrColIdxInit) and init.row_ptr not in row_ptrs:
                raise ValueError(f"{where}: row_ptr {init.row_ptr!r} is not a csr_row_ptr input declared before it")

    @property
    def patterns(self) -> list[str]:
        """The input patterns the verifier's visible checks cycle through: a CSR matrix's sparsity patterns or a
        `bins` input's value patterns ([] when no input has either)."""
        for t in self.inputs:
            if isinstance(t.init, (CsrRowPtrInit, BinsInit)):
                return list(t.init.patterns)
        return []

    @property
    def heldout_patterns(self) -> list[str]:
        """The patterns every trial's held-out cases draw: HELDOUT_PATTERNS for a CSR input, BIN_HELDOUT_PATTERNS for
        a `bins` input ([] when no input has patterns)."""
        for t in self.inputs:
            if isinstance(t.init, CsrRowPtrInit):
                return list(HELDOUT_PATTERNS)
            if isinstance(t.init, BinsInit):
                return list(BIN_HELDOUT_PATTERNS)
        return []

    def template(self, name: str) -> TemplateSpec:
        for t in self.templates:
            if t.name == name:
                return t
        raise KeyError(f"op {self.name!r} has no template {name!r}")

    def bytes_moved(self, axes: dict[str, int], dtype: DType) -> float:
        return float(evaluate_expression(self.bytes_formula, {**axes, "elem": dtype.itemsize}))

    def flops(self, axes: dict[str, int], dtype: DType) -> float:
        return float(evaluate_expression(self.flops_formula, {**axes, "elem": dtype.itemsize}))

    def tolerance_for(self, workload: "Workload") -> Tolerance:
        """The workload's tolerance: its dtype's, with atol scaled by the workload's axes where the spec says so."""
        return self.tolerance[workload.dtype].resolve(workload.axes)

    def scratch_numel(self, axes: dict[str, int]) -> int:
        """Elements of the workspace for these axes (0 when the op declares none)."""
        if self.scratch is None:
            return 0
        n = evaluate_expression(self.scratch.numel, dict(axes))
        if n < 0 or n != int(n):
            raise ValueError(f"scratch numel {self.scratch.numel!r} gives {n} for {axes}")
        return int(n)

    def tensor_dtype(self, t: TensorSpec, dtype: DType) -> DType:
        return dtype if t.dtype == "op" else DType(t.dtype)


# One order for a workload's axes wherever it is shown (labels, tables): these names in this order (the built-in
# and fused ops' own: B H HKV S D, B S HQ HK D C, M N K), then any other name alphabetically. A workload read back
# from an archive or JSON (keys sorted) prints as the one written by a spec, capture or workload file.
AXIS_ORDER = ("B", "H", "HKV", "S", "HQ", "HK", "M", "N", "K", "D", "C")


def ordered_axes(axes: dict[str, int]) -> dict[str, int]:
    """`axes` in the one display order (`AXIS_ORDER`, then alphabetical)."""
    rank = {a: i for i, a in enumerate(AXIS_ORDER)}
    return {a: axes[a] for a in sorted(axes, key=lambda a: (rank.get(a, len(rank)), a))}


class Workload(Record):
    """Concrete axis values and dtype, with a weight in the served distribution."""

    op: str = Field(description="Op name.")
    axes: dict[str, int] = Field(description="Axis values (kept in the one display order, `ordered_axes`).")
    dtype: DType = Field(description="Element type.")
    weight: float = Field(1.0, gt=0, allow_inf_nan=False, description="Weight in the served distribution.")

    @field_validator("axes")
    @classmethod
    def _one_order(cls, v: dict[str, int]) -> dict[str, int]:
        return ordered_axes(v)

    @property
    def id(self) -> str:
        return "w-" + content_hash({"op": self.op, "axes": self.axes, "dtype": self.dtype.value})

    @property
    def label(self) -> str:
        return f"{self.op}[{'x'.join(str(v) for v in ordered_axes(self.axes).values())}]:{self.dtype.value}"


class SpecError(ValueError):
    """A malformed spec or workload file."""

    def __init__(self, file: Path | str, field: str, message: str):
        self.file, self.field, self.message = str(file), field, message
        super().__init__(f"{file}: {field}: {message}" if field else f"{file}: {message}")


class ReferenceOutputError(SpecError, RuntimeError):
    """The reference's results do not match the spec's declared outputs (count, shape, dtype). A SpecError; also a
    RuntimeError, so a run that meets it mid-way stops like any run that cannot continue (exit 3)."""
