"""Elementwise steps of a signature as a Triton function on fp32 tiles: the epilogue hook of the fused templates.

    source = epilogue_source(signature.steps, leaves={"%0": "acc0", "%2": "acc1"}, extras={"p0": "bias"},
                             scalars={"3": ...})

`leaves` names the steps (or subgraph inputs) whose values the kernel already holds as tiles -- a GEMM's fp32
accumulator, an elementwise template's loaded operand; `extras` names the other tensor operands the kernel loads
for the function (a bias row broadcast over the tile, or a full tile). Every other step is translated: arithmetic
with scalars and other steps, the activations (silu, gelu exact and tanh, relu, sigmoid, tanh), exp, erf, sqrt,
rsqrt, neg, abs, reciprocal, integer powers (tanh calls the template's overflow-safe `_tanh`). Casts and views are the identity on the fp32 tile: the fused kernel
rounds once, when it stores. Anything else raises CodegenError naming the op, and the pattern is reported, not
realised. The function is written deterministically from the steps, so isomorphic patterns get the same source
(and the same candidate ids).
"""

from __future__ import annotations

from .records import Step

IDENTITY = {"aten.to.dtype", "aten._to_copy.default", "aten.to.dtype_layout", "aten.type_as.default",
            "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.alias.default",
            "aten.contiguous.default", "aten.clone.default", "aten.dropout.default", "aten.detach.default"}
UNARY = {
    "aten.neg.default": "-({x})",
    "aten.abs.default": "tl.abs({x})",
    "aten.exp.default": "tl.exp({x})",
    "aten.sqrt.default": "tl.sqrt({x})",
    "aten.rsqrt.default": "(1.0 / tl.sqrt({x}))",
    "aten.reciprocal.default": "(1.0 / {x})",
    "aten.erf.default": "tl.math.erf({x})",
    "aten.sigmoid.default": "(1.0 / (1.0 + tl.exp(-({x}))))",
    "aten.silu.default": "({x} / (1.0 + tl.exp(-({x}))))",
    "aten.silu_.default": "({x} / (1.0 + tl.exp(-({x}))))",
    "aten.relu.default": "tl.maximum({x}, 0.0)",
    "aten.relu_.default": "tl.maximum({x}, 0.0)",
    "aten.tanh.default": "_tanh({x})",
}
BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "rsub": "({b} - {a})", "mul": "({a} * {b})", "div": "({a} / {b})",
          "maximum": "tl.maximum({a}, {b})", "minimum": "tl.minimum({a}, {b})"}
class CodegenError(ValueError):
    """A step has no translation to the fused kernel's epilogue."""


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _gelu(x: str, approximate: str) -> str:
    if approximate == "tanh":
        return f"(0.5 * {x} * (1.0 + _tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x}))))"
    return f"(0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476)))"


def _step_expr(k: int, st: Step, ref) -> str:
    op = st.op
    if op in IDENTITY:
        return ref(st.operands[0])
    if op in UNARY:
        return UNARY[op].format(x=ref(st.operands[0]))
    if op in ("aten.gelu.default", "aten.gelu_.default"):
        approx = next((c.strip("'\"") for c in st.consts if c.strip("'\"") in ("none", "tanh")), "none")
        return _gelu(ref(st.operands[0]), approx)
    name, _, overload = op.removeprefix("aten.").partition(".")
    if name == "pow" and overload == "Tensor_Scalar":
        e = _float(st.consts[0]) if st.consts else None
        if e is None or e != int(e) or not 1 <= e <= 4:
            raise CodegenError(f"{op} with exponent {st.consts[:1]}: only integer powers 1..4 are translated")
        x = ref(st.operands[0])
        return "(" + " * ".join([x] * int(e)) + ")"
    if name in BINARY:
        vals = [ref(o) for o in st.operands]
        consts = list(st.consts)
        if len(vals) == 1 and consts:
            c = _float(consts.pop(0))
            if c is None:
                raise CodegenError(f"{op}: its scalar operand is not a number")
            vals.append(repr(c))
        if len(vals) != 2:
            raise CodegenError(f"{op}: expected two operands, got {len(vals)}")
        a, b = vals
        if consts and name in ("add", "sub", "rsub"):   # alpha scales the second operand
            alpha = _float(consts.pop(0))
            if alpha is None:
                raise CodegenError(f"{op}: alpha is not a number")
            b = b if alpha == 1.0 else f"({alpha!r} * {b})"
        if consts:
            raise CodegenError(f"{op}: unexpected arguments {consts}")
        return BINARY[name].format(a=a, b=b)
    raise CodegenError(f"{op}: no translation into a fused epilogue")


def epilogue_source(steps: list[Step], leaves: dict[str, str], extras: dict[str, str], result: str,
                    args: list[str], name: str = "_epilogue") -> str:
    """`@triton.jit def name(*args)` returning the value of step `result` ('%K'), computed from the tiles `leaves`
    (operand or step -> argument name) and the loaded `extras` (subgraph input -> argument name); `args` is the
    argument list the template calls it with (a superset of those names)."""
    var: dict[str, str] = dict(leaves)
    lines: list[str] = []

    def ref(operand: str) -> str:
        if operand in var:
            return var[operand]
        if operand in extras:
            return extras[operand]
        raise CodegenError(f"operand {operand} is neither a tile of the kernel nor computed before")

    last = int(result.lstrip("%"))
    for k, st in enumerate(steps[:last + 1]):
        key = f"%{k}"
        if key in var:
            continue
        if not any(o in var or o in extras for o in st.operands):
            continue   # a step outside the epilogue's reach (the GEMMs themselves are leaves)
        lines.append(f"    t{k} = {_step_expr(k, st, ref)}")
        var[key] = f"t{k}"
    if result not in var:
        raise CodegenError(f"the result {result} is not reached from the kernel's tiles")
    missing = sorted((set(leaves.values()) | set(extras.values())) - set(args))
    if missing:
        raise CodegenError(f"the template does not pass {missing}")
    return "\n".join(["@triton.jit", f"def {name}({', '.join(args)}):", *lines, f"    return {var[result]}", ""])
