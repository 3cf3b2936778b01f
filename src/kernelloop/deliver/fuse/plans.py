"""From a discovered candidate to the ops that realise it: which kernel family, which interface, which axes.

    plans, refusals = plan_candidate(candidate, model_dtype)

Each kernel family reads the candidate's signature and says how one op replaces (part of) the subgraph:

- `add_norm` (residual_add_norm): a [M, N] + b [M, N], then RMSNorm or LayerNorm with its weight (and bias) over
  N; returns the normed rows, and the sum too when the model uses it later. The norm's eps is the op's scalar; a
  constant the model adds to the RMSNorm's weight (Gemma's `x * (1 + weight)`) is pinned as OFFSET.
- `dual_gemm` (gemm_gate): x [M, K] read once against two weights [N, K]; act(x W0^T) * (x W1^T) in the epilogue.
- `gate_mul` (gemm_gate, the same occurrence's elementwise tail): act(g) * u on [M, N], the GEMMs left to the
  library. It overlaps `dual_gemm`; composition keeps the one that gains more.
- `gemm_epilogue` (gemm_epilogue): linear / addmm / mm with its bias, then the elementwise chain as the GEMM's
  epilogue (GPT-2's tanh GELU).
- `act_tail` (gemm_epilogue, the same occurrence's chain): the elementwise chain alone on the GEMM's [M, N] result,
  the GEMM left to the library; it overlaps `gemm_epilogue` as `gate_mul` overlaps `dual_gemm`.
- `rotary` (rotary): q [B, S, HQ, D] and k [B, S, HK, D] (the projections' layout, before the transpose the model
  makes) with cos and sin [C, S, D]; results in the same layout.

A family that does not fit a candidate says why (a `Refusal`); nothing is realised for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ...base.records import DType, Record
from ...base.records.spec import evaluate_expression
from . import codegen
from .records import Candidate, Family, Signature

Kind = Literal["add_norm", "dual_gemm", "gate_mul", "gemm_epilogue", "act_tail", "rotary"]
GEMMS = ("aten.linear.default", "aten.addmm.default", "aten.mm.default")
GEMM_ARGS = ["acc0", "acc1", "e0", "e1"]   # what the fused GEMM template passes its epilogue
TORCH_TO_DTYPE = {"bfloat16": DType.bf16, "float16": DType.fp16, "float32": DType.fp32}


class ViewOp(Record):
    """One view between the op's tensor and the model's value (an ATen view and its integer arguments)."""

    target: str = Field(description="e.g. 'aten.transpose.int'.")
    args: list[int] = Field(default_factory=list, description="Its arguments after the tensor.")


class PortPlan(Record):
    """One input or output of the op and the value of the subgraph it carries."""

    name: str = Field(description="Argument name in the op's spec, reference and launch.")
    axes: list[str] = Field(description="The op's axes of the tensor.")
    operand: str = Field(description="What it carries: a subgraph input ('in0', 'p2') or a step's value ('%3').")
    views: list[ViewOp] = Field(default_factory=list, description="Input: views from the op's tensor to the "
                                "subgraph's value; output: from the subgraph's value to the op's result.")
    init: Literal["activation", "weight", "bias"] = Field("activation", description="How the verifier draws it.")


class OpPlan(Record):
    """How one op replaces the steps `steps` of a candidate's signature."""

    kind: Kind
    family: Family
    signature: str = Field(description="The candidate's signature key.")
    steps: list[int] = Field(description="Indices of the signature's steps the op computes.")
    inputs: list[PortPlan]
    outputs: list[PortPlan]
    axes: dict[str, str] = Field(description="Op axis -> expression over the signature's symbols.")
    scalars: dict[str, float] = Field(default_factory=dict, description="Scalar arguments at the model's values.")
    scalar_args: dict[str, list[int]] = Field(default_factory=dict, description="Scalar name -> [step, const "
                                              "index]: the constant of the signature it stands for.")
    pinned: dict[str, int | float | str] = Field(default_factory=dict, description="Template parameters the pattern fixes.")
    flatten_rows: bool = Field(True, description="Views inside the subgraph only regroup leading dimensions.")
    dtype: DType
    workloads: list[dict[str, int]] = Field(description="Axis values per occurrence, in the candidate's order.")
    epilogue: str = Field("", description="The generated Triton epilogue (GEMM and elementwise families).")


class Refusal(Record):
    family: str
    kind: str
    reason: str


class Unsupported(ValueError):
    pass


def _prod(dims: list[str]) -> str:
    syms = [d for d in dims if d != "1"]
    return "*".join(syms) if syms else "1"


def _input_shape(sig: Signature, operand: str) -> list[str]:
    return sig.inputs[int(operand[2:] if operand.startswith("in") else operand[1:])] if not operand.startswith("%") \
        else sig.steps[int(operand[1:])].shape


def _workloads(c: Candidate, axes: dict[str, str]) -> list[dict[str, int]]:
    out = []
    for occ in c.occurrences:
        env = {**occ.bindings}
        out.append({a: int(evaluate_expression(e, env)) for a, e in axes.items()})
    return out


def model_dtype(sig: Signature) -> DType:
    d = next((s.dtype for s in sig.steps if s.dtype in TORCH_TO_DTYPE and s.dtype != "float32"), None)
    d = d or next((s.dtype for s in sig.steps if s.dtype in TORCH_TO_DTYPE), None)
    if d is None:
        raise Unsupported("no floating dtype among the steps")
    return TORCH_TO_DTYPE[d]


def _plan(c: Candidate, kind: Kind, **fields) -> OpPlan:
    return OpPlan(kind=kind, family=c.signature.family, signature=c.signature.key, dtype=model_dtype(c.signature),
                  workloads=_workloads(c, fields["axes"]), **fields)


# -- residual add + norm -----------------------------------------------------------------------------------------
def _eps_const(sig: Signature) -> tuple[int, int, float]:
    """(step, const index, value) of the norm's eps."""
    for k, st in enumerate(sig.steps):
        if st.op in ("aten.layer_norm.default", "aten.rms_norm.default"):
            pos = 1   # consts: [normalized_shape, eps, ...]
            if len(st.consts) > pos:
                try:
                    return k, pos, float(st.consts[pos])
                except ValueError:
                    pass
            raise Unsupported(f"{st.op} without a numeric eps")
    for k, st in enumerate(sig.steps):
        feeds_rsqrt = any(s.op == "aten.rsqrt.default" and s.operands == [f"%{k}"] for s in sig.steps)
        if st.op in ("aten.add.Tensor", "aten.add.Scalar") and feeds_rsqrt and len(st.operands) == 1 and st.consts:
            return k, 0, float(st.consts[0])
    raise Unsupported("no eps found: an add of a constant feeding rsqrt")


CASTS = ("aten.to.dtype", "aten._to_copy.default", "aten.type_as.default")


def _weight_offset(st: list, weight: str) -> float:
    """The constant a decomposed RMSNorm adds to its weight before the multiply (Gemma's `x * (1 + weight)`: 1.0),
    the weight's casts looked through; 0.0 when the weight multiplies as it is."""
    derived, offset = {weight}, 0.0
    for k, s in enumerate(st):
        if s.op in CASTS[:2] and s.operands[:1] and s.operands[0] in derived:
            derived.add(f"%{k}")
        elif s.op in ("aten.add.Tensor", "aten.add.Scalar") and len(s.operands) == 1 and s.operands[0] in derived:
            if len(s.consts) != 1 or offset:
                raise Unsupported("the norm's weight goes through more than one added constant")
            try:
                offset = float(s.consts[0])
            except ValueError:
                raise Unsupported(f"the norm's weight is added a non-numeric {s.consts[0]!r}") from None
            derived.add(f"%{k}")
    return offset


def add_norm(c: Candidate) -> list[OpPlan]:
    sig = c.signature
    st = sig.steps
    first = st[0]
    if first.op != "aten.add.Tensor" or len(first.operands) != 2 or first.consts:
        raise Unsupported("the subgraph does not start with the add of two tensors")
    a, b = first.operands
    shape = first.shape
    if not (a.startswith("in") and b.startswith("in")) or _input_shape(sig, a) != shape \
            or _input_shape(sig, b) != shape:
        raise Unsupported("the residual add broadcasts (the op adds two [M, N] tensors)")
    n = shape[-1]
    ops = [s.op for s in st]
    bias, offset = None, 0.0
    if "aten.layer_norm.default" in ops:
        ln = st[ops.index("aten.layer_norm.default")]
        if len(ln.operands) != 3 or not all(o.startswith("p") for o in ln.operands[1:]):
            raise Unsupported("layer_norm without a weight and a bias parameter")
        norm, weight, bias, round_normed = "layer", ln.operands[1], ln.operands[2], 0
    elif "aten.rms_norm.default" in ops:
        rn = st[ops.index("aten.rms_norm.default")]
        if len(rn.operands) != 2 or not rn.operands[1].startswith("p"):
            raise Unsupported("rms_norm without a weight parameter")
        norm, weight, round_normed = "rms", rn.operands[1], 0
    elif "aten.rsqrt.default" in ops and "aten.mean.dim" in ops and "aten.sub.Tensor" not in ops:
        params = [o for s in st for o in s.operands if o.startswith("p")]
        if len(set(params)) != 1:
            raise Unsupported("an RMS norm needs exactly one weight parameter")
        norm, weight = "rms", params[0]
        wmul = next(k for k, s in enumerate(st) if weight in s.operands)
        rs = ops.index("aten.rsqrt.default")
        round_normed = int(any(s.op in CASTS and s.dtype != "float32" for s in st[rs:wmul]))
        offset = _weight_offset(st, weight)
    else:
        raise Unsupported("the norm is neither LayerNorm nor RMSNorm")
    for p in (weight, bias):
        if p is not None and _input_shape(sig, p) != [n]:
            raise Unsupported(f"{p} is not a [N] parameter")
    used = {a, b, weight, bias} - {None}
    extra = [o for o in {o for s in st for o in s.operands if not o.startswith("%")} if o not in used]
    if extra:
        raise Unsupported(f"inputs besides the add's two and the norm's parameters: {sorted(extra)}")
    last = f"%{len(st) - 1}"
    outs = []
    for o in sig.outputs:
        if o == "%0":
            outs.append(PortPlan(name="s", axes=["M", "N"], operand=o))
        elif o == last:
            outs.append(PortPlan(name="y", axes=["M", "N"], operand=o))
        else:
            raise Unsupported(f"an intermediate of the norm ({o}) leaves the subgraph")
    k, pos, eps = _eps_const(sig)
    ins = [PortPlan(name="a", axes=["M", "N"], operand=a), PortPlan(name="b", axes=["M", "N"], operand=b),
           PortPlan(name="weight", axes=["N"], operand=weight, init="weight")]
    if bias is not None:
        ins.append(PortPlan(name="bias", axes=["N"], operand=bias, init="bias"))
    return [_plan(c, "add_norm", steps=list(range(len(st))), inputs=ins, outputs=outs,
                  axes={"M": _prod(shape[:-1]), "N": n}, scalars={"eps": eps}, scalar_args={"eps": [k, pos]},
                  pinned={"NORM": norm, "HAS_BIAS": int(bias is not None), "STORE_SUM": int("%0" in sig.outputs),
                          "ROUND_NORMED": round_normed, **({"OFFSET": offset} if offset else {})})]


# -- GEMM families -------------------------------------------------------------------------------------------------
def _gemm_operands(sig: Signature, k: int) -> tuple[str, str, str | None, int]:
    """(x, weight, bias or None, TRANS_B) of GEMM step k."""
    st = sig.steps[k]
    if st.op == "aten.linear.default":
        if st.consts:
            raise Unsupported("linear with non-tensor arguments")
        x, w, *rest = st.operands
        return x, w, (rest[0] if rest else None), 1
    if st.op == "aten.addmm.default":
        if st.consts:
            raise Unsupported("addmm with beta or alpha")
        bias, x, w = st.operands
        return x, w, bias, 0
    if st.op == "aten.mm.default":
        x, w = st.operands
        return x, w, None, 0
    raise Unsupported(f"{st.op} is not a GEMM the templates take (linear, addmm, mm)")


def _gemm_axes(sig: Signature, x: str, w: str, trans_b: int) -> dict[str, str]:
    xs, ws = _input_shape(sig, x), _input_shape(sig, w)
    if len(ws) != 2:
        raise Unsupported("the weight is not a matrix")
    n, k = (ws[0], ws[1]) if trans_b else (ws[1], ws[0])
    if xs[-1] != k:
        raise Unsupported("the GEMM's reduction sizes differ")
    return {"M": _prod(xs[:-1]), "N": n, "K": k}


def gemm_gate(c: Candidate) -> list[OpPlan]:
    sig = c.signature
    gk = [k for k, s in enumerate(sig.steps) if s.op in GEMMS]
    if len(gk) != 2 or len(sig.outputs) != 1:
        raise Unsupported("not two GEMMs with one result")
    (x0, w0, b0, t0), (x1, w1, b1, t1) = (_gemm_operands(sig, k) for k in gk)
    if x0 != x1 or b0 is not None or b1 is not None or not (t0 and t1):
        raise Unsupported("the two GEMMs do not read one x against two bias-free [N, K] weights")
    axes = _gemm_axes(sig, x0, w0, 1)
    if _gemm_axes(sig, x1, w1, 1) != axes:
        raise Unsupported("the two weights differ in shape")
    if model_dtype(sig) is DType.fp32:
        raise Unsupported("fp32 GEMMs are left to the library (the templates accumulate 16-bit operands)")
    result = sig.outputs[0]
    dual_epi = codegen.epilogue_source(sig.steps, {f"%{gk[0]}": "acc0", f"%{gk[1]}": "acc1"}, {}, result,
                                       GEMM_ARGS)
    tail_epi = codegen.epilogue_source(sig.steps, {f"%{gk[0]}": "x0", f"%{gk[1]}": "x1"}, {}, result,
                                       ["x0", "x1"])
    rest = [k for k in range(len(sig.steps)) if k not in gk]
    out = PortPlan(name="out", axes=["M", "N"], operand=result)
    return [
        _plan(c, "dual_gemm", steps=list(range(len(sig.steps))), axes=axes, outputs=[out], epilogue=dual_epi,
              pinned={"DUAL": 1, "TRANS_B": 1, "HAS_BIAS": 0},
              inputs=[PortPlan(name="x", axes=["M", "K"], operand=x0),
                      PortPlan(name="w0", axes=["N", "K"], operand=w0),
                      PortPlan(name="w1", axes=["N", "K"], operand=w1)]),
        _plan(c, "gate_mul", steps=rest, axes={"M": axes["M"], "N": axes["N"]}, outputs=[out], epilogue=tail_epi,
              pinned={"N_IN": 2},
              inputs=[PortPlan(name="x0", axes=["M", "N"], operand=f"%{gk[0]}"),
                      PortPlan(name="x1", axes=["M", "N"], operand=f"%{gk[1]}")]),
    ]


def gemm_epilogue(c: Candidate) -> list[OpPlan]:
    sig = c.signature
    if sig.steps[0].op not in GEMMS or len(sig.outputs) != 1 or any(s.op in GEMMS for s in sig.steps[1:]):
        raise Unsupported("not one GEMM followed by elementwise steps with one result")
    if model_dtype(sig) is DType.fp32:
        raise Unsupported("fp32 GEMMs are left to the library (the templates accumulate 16-bit operands)")
    x, w, bias, trans_b = _gemm_operands(sig, 0)
    axes = _gemm_axes(sig, x, w, trans_b)
    ins = [PortPlan(name="a", axes=["M", "K"], operand=x),
           PortPlan(name="b", axes=["N", "K"] if trans_b else ["K", "N"], operand=w)]
    if bias is not None:
        if _input_shape(sig, bias) != [axes["N"]]:
            raise Unsupported("the bias is not a [N] vector")
        ins.append(PortPlan(name="bias", axes=["N"], operand=bias, init="bias"))
    extras, out_shape = {}, sig.steps[-1].shape
    for s in sig.steps[1:]:
        for o in s.operands:
            if o.startswith("%") or o in extras:
                continue
            shp = _input_shape(sig, o)
            if shp == [axes["N"]]:
                ins.append(PortPlan(name=f"e{len(extras)}", axes=["N"], operand=o))
            elif shp == out_shape:
                ins.append(PortPlan(name=f"e{len(extras)}", axes=["M", "N"], operand=o))
            else:
                raise Unsupported(f"epilogue operand {o} is neither [N] nor the output's shape")
            extras[o] = f"e{len(extras)}"
    if len(extras) > 2:
        raise Unsupported(f"{len(extras)} tensors besides the GEMM's enter the epilogue (the template loads two)")
    epi = codegen.epilogue_source(sig.steps, {"%0": "acc0"}, extras, sig.outputs[0], GEMM_ARGS)
    out = PortPlan(name="out", axes=["M", "N"], operand=sig.outputs[0])
    plans = [_plan(c, "gemm_epilogue", steps=list(range(len(sig.steps))), axes=axes, inputs=ins, epilogue=epi,
                   outputs=[out], pinned={"DUAL": 0, "TRANS_B": trans_b, "HAS_BIAS": int(bias is not None),
                                          **{f"EK{i}": (1 if p.axes == ["N"] else 2)
                                             for i, p in enumerate(ins[2 + (bias is not None):])}})]
    if not extras:   # the chain alone, on the GEMM's result (the library's GEMM kept)
        tail = codegen.epilogue_source(sig.steps, {"%0": "x0"}, {}, sig.outputs[0], ["x0", "x1"])
        plans.append(_plan(c, "act_tail", steps=list(range(1, len(sig.steps))), axes={"M": axes["M"], "N": axes["N"]},
                           inputs=[PortPlan(name="x0", axes=["M", "N"], operand="%0")], outputs=[out],
                           epilogue=tail, pinned={"N_IN": 1}))
    return plans


# -- rotary ----------------------------------------------------------------------------------------------------------
def rotary(c: Candidate) -> list[OpPlan]:
    """x*cos + rotate_half(x)*sin for q and k (the matcher's structure), q and k in the projections' layout."""
    sig = c.signature
    adds = [k for k, s in enumerate(sig.steps) if s.op == "aten.add.Tensor"]
    if len(adds) != 2 or len(sig.outputs) != 2 or sig.outputs != [f"%{k}" for k in adds]:
        raise Unsupported("not two rotated tensors (q and k)")
    chains = []
    for k in adds:
        m1, m2 = (sig.steps[int(o[1:])] for o in sig.steps[k].operands)
        if sig.steps[int(sig.steps[k].operands[0][1:])].op != "aten.mul.Tensor":
            raise Unsupported("unexpected rotary structure")
        x, cos = m1.operands
        sin = next(o for o in m2.operands if not o.startswith("%"))
        chains.append((x, cos, sin))
    (q, cos, sin), (kk, cos2, sin2) = chains
    if (cos, sin) != (cos2, sin2) or q == kk:
        raise Unsupported("q and k do not share cos and sin")
    qs, ks, cs = _input_shape(sig, q), _input_shape(sig, kk), _input_shape(sig, cos)
    if len(qs) != 4 or len(ks) != 4 or len(cs) != 4 or cs[1] != "1" or _input_shape(sig, sin) != cs \
            or cs[2:] != qs[2:] or ks[0] != qs[0] or ks[2:] != qs[2:] or cs[0] not in ("1", qs[0]):
        raise Unsupported("q, k [B, H, S, D] and cos, sin [1 or B, 1, S, D] expected")
    t12 = [ViewOp(target="aten.transpose.int", args=[1, 2])]
    unsq = [ViewOp(target="aten.unsqueeze.default", args=[1])]
    axes = {"B": qs[0], "S": qs[2], "HQ": qs[1], "HK": ks[1], "D": qs[3], "C": cs[0]}
    return [_plan(c, "rotary", steps=list(range(len(sig.steps))), axes=axes, flatten_rows=False,
                  inputs=[PortPlan(name="q", axes=["B", "S", "HQ", "D"], operand=q, views=t12),
                          PortPlan(name="k", axes=["B", "S", "HK", "D"], operand=kk, views=t12),
                          PortPlan(name="cos", axes=["C", "S", "D"], operand=cos, views=unsq),
                          PortPlan(name="sin", axes=["C", "S", "D"], operand=sin, views=unsq)],
                  outputs=[PortPlan(name="qo", axes=["B", "S", "HQ", "D"], operand=sig.outputs[0], views=t12),
                           PortPlan(name="ko", axes=["B", "S", "HK", "D"], operand=sig.outputs[1], views=t12)])]


BUILDERS = {"residual_add_norm": add_norm, "gemm_gate": gemm_gate, "gemm_epilogue": gemm_epilogue,
            "rotary": rotary}


def check_families(families: list[str] | None) -> None:
    """ValueError naming the choices when a family is not one this module realises (BUILDERS)."""
    for f in families or ():
        if f not in BUILDERS:
            raise ValueError(f"family {f!r}: the realisable families are {', '.join(BUILDERS)}")


def plan_candidate(c: Candidate) -> tuple[list[OpPlan], list[Refusal]]:
    """The ops realising candidate `c`, or why none does."""
    builder = BUILDERS.get(c.family)
    if builder is None:
        return [], [Refusal(family=c.family, kind="", reason=f"no kernel family realises {c.family} yet")]
    try:
        return builder(c), []
    except (Unsupported, codegen.CodegenError) as e:
        return [], [Refusal(family=c.family, kind=builder.__name__, reason=str(e))]
