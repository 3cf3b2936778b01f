"""An op folder from an OpPlan: spec.toml, reference.py (the model's subgraph), the template, workloads, baselines.

    folder = write_op(plan, nodes, inputs, root)      # root/<op>/, loadable by kernelloop.core.spec.load_op

The spec is generated from the subgraph: axes and tensors from the plan's interface, the model's dtype, scalars at
the model's values, bytes and FLOPs per family, the verifier's input distributions (GEMM families draw mean-0
operands so activations see both signs), and a tolerance from the dtype and, for GEMMs, the reduction length
(atol x sqrt(K)). The tolerance is then calibrated against the model itself: the reference run in the model's
dtype (the unfused sequence, with all its intermediate roundings) must sit within half of the tolerance of the
float64 truth on seeded draws of the first workload; where it does not, atol is raised to twice what the model
needed (the spec says so in a comment). A fused kernel is held to the accuracy of the sequence it replaces, never
to less.
"""

from __future__ import annotations

import ast
from importlib import resources
from pathlib import Path

import torch
import torch.fx as fx

from ..interop import toml_out as T
from ...base.records import DType, OpSpec, Workload
from . import emit
from . import graph as G
from .plans import OpPlan
from ...base import pyast

TOLERANCE = {   # (atol, rtol, atol_scale) per kernel family and dtype, before calibration
    "row": {DType.fp16: (1e-2, 1e-2, None), DType.bf16: (4e-2, 2e-2, None), DType.fp32: (1e-4, 1e-4, None)},
    "elementwise": {DType.fp16: (5e-3, 5e-3, None), DType.bf16: (4e-2, 2e-2, None),
                    DType.fp32: (1e-5, 1e-5, None)},
    "gemm": {DType.fp16: (1e-4, 5e-3, "sqrt_(K)"), DType.bf16: (1e-4, 2e-2, "sqrt_(K)")},
}
FAMILY = {"add_norm": "row", "rotary": "elementwise", "gate_mul": "elementwise", "act_tail": "elementwise",
          "dual_gemm": "gemm", "gemm_epilogue": "gemm"}
TEMPLATE_FILE = {"add_norm": "add_norm.py", "rotary": "rotary.py", "gate_mul": "elementwise.py",
                 "act_tail": "elementwise.py", "dual_gemm": "gemm_fused.py", "gemm_epilogue": "gemm_fused.py"}
AXIS_TEXT = {"M": "rows (tokens)", "N": "output features", "K": "reduction length", "B": "batch",
             "S": "sequence positions", "HQ": "query heads", "HK": "key heads", "D": "head dimension",
             "C": "batch of cos/sin (1: shared)"}
GEMM_CONSTRAINTS = [
    ("BLOCK_M == 16 or BLOCK_M <= next_pow2(M)", "a tile taller than M's next power of two only masks rows off"),
    ("BLOCK_N == 32 or BLOCK_N <= next_pow2(N)", "a tile wider than N's next power of two only masks columns off"),
    ("BLOCK_K == 32 or BLOCK_K <= next_pow2(K)", "a k-step longer than K's next power of two only masks zeros in"),
    ("num_stages <= cdiv(K, BLOCK_K) + 1", "a pipeline deeper than the k-loop duplicates a shallower one"),
    ("num_warps == 4 or BLOCK_M * BLOCK_N >= 64 * 128", "eight warps need at least a 64x128 accumulator"),
    ("DUAL == 0 or BLOCK_N <= 128", "two accumulator tiles wider than 128 columns spill"),
    ("PERSISTENT == 0 or interpreter or cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) > sm_count",
     "with no more tiles than SMs a persistent grid is the one-tile-per-program grid"),
    ("TMA == 0 or (cc_major >= 9 and not interpreter)", "tensor descriptors (TMA) need sm_90+, not the interpreter"),
    ("TMA == 0 or ((K * elem) % 16 == 0 and (N * elem) % 16 == 0)", "TMA needs 16-byte aligned row strides"),
]


class OpGenError(ValueError):
    """The op folder cannot be written (the reference does not emit, or the model fails its own tolerance)."""


def _template_text(name: str) -> str:
    return (resources.files("kernelloop.deliver.fuse") / "templates" / name).read_text(encoding="utf-8")


def _gemm_helpers() -> str:
    """`_tile_of` and `_mma` of the built-in GEMM template (ops/gemm/kernel.py), as source."""
    from ...base.builtin import ops_dir
    src = (ops_dir() / "gemm" / "kernel.py").read_text(encoding="utf-8")
    tree = pyast.parse(src)
    lines = src.splitlines()
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("_tile_of", "_mma"):
            start = min(d.lineno for d in node.decorator_list) if node.decorator_list else node.lineno
            out.append("\n".join(lines[start - 1:node.end_lineno]))
    if len(out) != 2:
        raise OpGenError("the built-in GEMM template no longer defines _tile_of and _mma")
    return "\n\n\n".join(out) + "\n"


def template_source(plan: OpPlan) -> str:
    """The template file's text, self-contained: the shared helpers (templates/common.py) and the plan's generated
    epilogue in place."""
    text = _template_text(TEMPLATE_FILE[plan.kind])
    common = _template_text("common.py")
    helpers = common[common.index("@triton.jit"):]
    text = text.replace("# {COMMON}\n", "\n" + helpers.rstrip() + "\n\n", 1)
    if "# {GEMM_HELPERS}" in text:
        text = text.replace("# {GEMM_HELPERS}\n", "\n" + _gemm_helpers().rstrip() + "\n\n", 1)
    if "# {EPILOGUE}" in text:
        if not plan.epilogue:
            raise OpGenError(f"{plan.kind}: the template needs a generated epilogue")
        text = text.replace("# {EPILOGUE}\n", "\n" + plan.epilogue.rstrip() + "\n\n")
    return text


def _space(plan: OpPlan) -> tuple[list[tuple[str, list]], list[tuple[str, str]], dict[str, str]]:
    """(params, constraints, resources) of the plan's template; the pinned parameters as single values."""
    pinned = [(k, [v]) for k, v in plan.pinned.items()]
    if plan.kind == "add_norm":
        return ([("BLOCK_N", [2 ** i for i in range(5, 16)]), ("ROWS", [1, 2, 4, 8]), ("num_warps", [1, 2, 4, 8, 16]),
                 *pinned],
                [("BLOCK_N == max(32, next_pow2(N))", "the row is one register block of N's next power of two"),
                 ("BLOCK_N >= 32 * num_warps or num_warps == 1", "fewer elements than threads leaves warps idle"),
                 ("M >= ROWS", "more rows per program than rows leaves programs empty")],
                {"regs_per_thread": "24 + 6 * BLOCK_N / (num_warps * 32)", "shared_bytes": "8 * num_warps"})
    if plan.kind in ("gate_mul", "act_tail"):
        return ([("BLOCK", [256, 512, 1024, 2048, 4096, 8192]), ("num_warps", [1, 2, 4, 8, 16]), *pinned],
                [("BLOCK >= 32 * num_warps", "fewer elements than threads leaves warps idle"),
                 ("BLOCK == 256 or BLOCK <= next_pow2(M * N)", "a block larger than the tensor only masks lanes")],
                {"regs_per_thread": "24 + 4 * BLOCK / (num_warps * 32)"})
    if plan.kind == "rotary":
        return ([("POS", [1, 2, 4, 8]), ("BLOCK_H", [1, 2, 4, 8, 16, 32]), ("num_warps", [1, 2, 4, 8])],
                [("BLOCK_H == 1 or BLOCK_H <= next_pow2(max(HQ, HK))", "more heads per block than heads masks rows"),
                 ("BLOCK_H * next_pow2(D) >= 32 * num_warps or num_warps == 1", "fewer elements than threads"),
                 ("POS == 1 or B * S >= 2 * POS", "more positions per program than positions"),
                 ("C == 1 or C == B", "cos and sin are shared by the batch or given per batch row"),
                 ("D % 2 == 0", "rotate_half splits the head dimension in two")],
                {"regs_per_thread": "32 + 6 * BLOCK_H * next_pow2(D) / (num_warps * 32)"})
    return ([("BLOCK_M", [16, 32, 64, 128]), ("BLOCK_N", [32, 64, 128, 256]), ("BLOCK_K", [32, 64]),
             ("GROUP_M", [8]), ("num_warps", [4, 8]), ("num_stages", [2, 3, 4]), ("PERSISTENT", [0, 1]),
             ("TMA", [0, 1]), *pinned],
            GEMM_CONSTRAINTS,
            {"regs_per_thread": "26 + (1 + DUAL) * 1.3 * BLOCK_M * BLOCK_N / (num_warps * 32) + (1 - TMA) * 0.75 * "
                                "(BLOCK_M * BLOCK_K + (1 + DUAL) * BLOCK_K * BLOCK_N) / (num_warps * 32)",
             "shared_bytes": "num_stages * (BLOCK_M * BLOCK_K + (1 + DUAL) * BLOCK_K * BLOCK_N) * elem "
                             "+ TMA * BLOCK_M * BLOCK_N * elem + 64"})


def _formulas(plan: OpPlan) -> tuple[str, str]:
    """(bytes_formula, flops_formula): each input read once, each output written once; FLOPs of the math."""
    def size(axes: list[str]) -> str:
        return " * ".join(axes)
    moved = " + ".join(size(p.axes) for p in [*plan.inputs, *plan.outputs])
    bytes_formula = f"({moved}) * elem"
    flops = {"add_norm": "8 * M * N", "gate_mul": "6 * M * N", "act_tail": f"{len(plan.steps)} * M * N",
             "rotary": "3 * B * S * (HQ + HK) * D",
             "dual_gemm": "4 * M * N * K + 6 * M * N", "gemm_epilogue": f"2 * M * N * K + {len(plan.steps)} * M * N"}
    return bytes_formula, flops[plan.kind]


def _policy(plan: OpPlan) -> dict:
    if plan.kind == "add_norm":
        return {}
    return {"mean": 0.0, "std": 1.0, "distributions": ["normal", "near_zero"]}


def _heldout_fixed(plan: OpPlan) -> tuple[list[str], list[str]]:
    """(the axes the verifier varies for held-out shapes, the axes it never varies)."""
    if plan.kind == "rotary":
        return ["S"], ["B", "HQ", "HK", "D", "C"]
    return ["M"], [a for a in plan.axes if a != "M"]


def heldout_axes(plan: OpPlan) -> list[str]:
    return _heldout_fixed(plan)[0]


def op_spec(plan: OpPlan, name: str, tolerance: tuple[float, float, str | None] | None = None) -> OpSpec:
    params, constraints, res = _space(plan)
    atol, rtol, scale = tolerance or TOLERANCE[FAMILY[plan.kind]][plan.dtype]
    bytes_formula, flops_formula = _formulas(plan)
    heldout, _ = _heldout_fixed(plan)
    return OpSpec.model_validate({
        "name": name, "description": f"fused {plan.kind} of a {plan.family} pattern, from the model's graph",
        "reference": "reference.py", "dtypes": [plan.dtype.value], "scalars": dict(plan.scalars),
        "axes": {a: {"description": AXIS_TEXT.get(a, a), "min": 1} for a in plan.axes},
        "inputs": [{"name": p.name, "shape": p.axes, "init": p.init} for p in plan.inputs],
        "outputs": [{"name": p.name, "shape": p.axes} for p in plan.outputs],
        "tolerance": {plan.dtype.value: {"atol": atol, "rtol": rtol, **({"atol_scale": scale} if scale else {})}},
        "bytes_formula": bytes_formula, "flops_formula": flops_formula, "heldout_axes": heldout,
        "inputs_policy": _policy(plan),
        "templates": [{"name": plan.kind, "file": TEMPLATE_FILE[plan.kind],
                       "params": [{"name": k, "values": v} for k, v in params],
                       "constraints": [{"expr": e, "reason": r} for e, r in constraints], "resources": res}]})


def spec_toml(spec: OpSpec, fixed_axes: list[str], notes: list[str]) -> str:
    d = spec.model_dump(mode="json", exclude_none=True)
    L = [*(line for n in notes for line in T.comment(n))]
    L += T.assignments({k: d[k] for k in ("name", "description", "reference", "dtypes", "bytes_formula",
                                          "flops_formula", "heldout_axes") if k in d})
    L += [f"fixed_axes = {T.value(fixed_axes)}", ""]
    if d.get("scalars"):
        L += ["[scalars]", *T.assignments(d["scalars"]), ""]
    L += ["[inputs_policy]", *T.assignments(d["inputs_policy"]), ""]
    for k, a in d["axes"].items():
        L += [f"[axes.{T.key(k)}]", *T.assignments(a), ""]
    for kind in ("inputs", "outputs"):
        for t in d[kind]:
            L += [f"[[{kind}]]", *T.assignments(t)]
        L.append("")
    for dt, tol in d["tolerance"].items():
        L += [f"[tolerance.{dt}]", *T.assignments(tol), ""]
    for t in d["templates"]:
        L += ["[[templates]]", *T.assignments({k: t[k] for k in ("name", "file", "language")})]
        for p in t["params"]:
            L += ["[[templates.params]]", *T.assignments(p)]
        for c in t["constraints"]:
            L += ["[[templates.constraints]]", *T.assignments(c)]
        L += ["[templates.resources]", *T.assignments(t["resources"]), ""]
    return "\n".join(L) + "\n"


def workloads_toml(op: str, plan: OpPlan) -> str:
    counts: dict[tuple, int] = {}
    for w in plan.workloads:
        key = tuple(w[a] for a in plan.axes)
        counts[key] = counts.get(key, 0) + 1
    L = [f"op = {T.string(op)}", ""]
    for key, n in counts.items():
        L += ["[[workload]]", f"axes = {T.value(dict(zip(plan.axes, key)))}", f"dtype = {T.string(plan.dtype.value)}",
              f"weight = {float(n)}", ""]
    return "\n".join(L)


BASELINES_GATE = '''"""Third-party baselines: the GEMMs stay torch's, the elementwise tail as Liger-Kernel fuses it."""


def _liger():
    from liger_kernel.ops.swiglu import LigerSiLUMulFunction

    def fn(x0, x1):
        return LigerSiLUMulFunction.apply(x0, x1)
    return fn


BASELINES = {"liger": _liger}
'''


def const_arg(node: fx.Node, index: int) -> int | str:
    """The argument position (or keyword) of the node's `index`-th non-tensor argument, counted as the
    signature counts constants (positional then keyword, tensors and tensor lists skipped)."""
    k = 0
    for key, a in [*enumerate(node.args), *node.kwargs.items()]:
        if isinstance(a, fx.Node) or (isinstance(a, (list, tuple)) and a and all(isinstance(x, fx.Node) for x in a)):
            continue
        if k == index:
            return key
        k += 1
    raise OpGenError(f"{node.name} has no constant {index}")


def reference_for(plan: OpPlan, steps: list[fx.Node], operands: dict[str, fx.Node], model_dtype: torch.dtype) -> str:
    """The reference source of the plan's steps, from one occurrence's nodes (`operands`: 'in0'/'p2'/'%3' -> node)."""
    nodes = [steps[k] for k in plan.steps]
    scalars = {}
    for name, (k, ci) in plan.scalar_args.items():
        scalars[(steps[k].name, const_arg(steps[k], ci))] = name
    ins = [emit.Port(p.name, operands[p.operand], tuple((v.target, tuple(v.args)) for v in p.views))
           for p in plan.inputs]
    outs = [emit.Port(p.name, operands[p.operand], tuple((v.target, tuple(v.args)) for v in p.views))
            for p in plan.outputs]
    doc = (f"The model's own subgraph ({plan.family}, {len(nodes)} ATen calls), written from its exported graph by "
           f"kernelloop.deliver.fuse: the reference of the fused op.")
    try:
        return emit.reference_source(nodes, ins, outs, scalars=scalars, scalar_names=list(plan.scalars),
                                     model_dtype=model_dtype, flatten_rows=plan.flatten_rows, doc=doc)
    except emit.EmitError as e:
        raise OpGenError(f"the reference cannot be written: {e}") from None


def calibrate(spec: OpSpec, reference_file: Path, plan: OpPlan, seeds: int = 2) -> tuple[float, float | None]:
    """(the model's own worst error / the tolerance, the atol that holds it at half: every element's error at most
    half of atol x scale + rtol x |truth|) on seeded draws of the first workload, its held-out axis cut to at most
    16; the second is None when the tolerance already holds it at half."""
    from ...core.reference.inputs import make_inputs
    from ...core.reference.truth import load_reference
    ref = load_reference(str(reference_file))
    axes = dict(plan.workloads[0])
    for a in spec.heldout_axes or []:
        axes[a] = min(axes[a], 16)
    w = Workload(op=spec.name, axes=axes, dtype=plan.dtype)
    tol = spec.tolerance_for(w)
    scale = tol.atol / spec.tolerance[plan.dtype].atol if spec.tolerance[plan.dtype].atol else 1.0
    worst, need = 0.0, 0.0
    with torch.no_grad():
        for dist in spec.inputs_policy.distributions:
            for seed in range(seeds):
                inputs = make_inputs(spec, w, seed, "cpu", dist)
                truth = ref(*[t.double() for t in inputs], **spec.scalars)
                model = ref(*inputs, **spec.scalars)
                truth = truth if isinstance(truth, tuple) else (truth,)
                model = model if isinstance(model, tuple) else (model,)
                for t, m in zip(truth, model):
                    err = (m.double() - t).abs()
                    allowed = tol.atol + tol.rtol * t.abs()
                    if not torch.isfinite(err).all():
                        raise OpGenError(f"the model's own sequence is not finite on {dist} draws")
                    worst = max(worst, float((err / allowed).max()))
                    need = max(need, float(((2 * err - tol.rtol * t.abs()) / scale).max()))
    if worst <= 0.5:
        return worst, None
    return worst, max(spec.tolerance[plan.dtype].atol, float(f"{need * 1.05:.2g}"))


def write_op(plan: OpPlan, name: str, steps: list[fx.Node], operands: dict[str, fx.Node], root: Path,
             model_dtype: torch.dtype) -> tuple[Path, list[str]]:
    """Write root/<name>/ for the plan; (the folder, notes about how its tolerance was set)."""
    folder = Path(root) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.py").write_text(reference_for(plan, steps, operands, model_dtype))
    (folder / TEMPLATE_FILE[plan.kind]).write_text(template_source(plan))
    (folder / "workloads.toml").write_text(workloads_toml(name, plan))
    ops = [G.target(steps[k]) for k in plan.steps if not G.is_view(steps[k])]
    if plan.kind == "gate_mul" and ops == ["aten.silu.default", "aten.mul.Tensor"]:
        (folder / "baselines.py").write_text(BASELINES_GATE)
    _, fixed = _heldout_fixed(plan)
    spec = op_spec(plan, name)
    notes = [f"Generated by kernelloop.deliver.fuse from a {plan.family} pattern ({plan.kind}); signature {plan.signature}."]
    worst, atol = calibrate(spec, folder / "reference.py", plan)
    if atol is not None:
        base = TOLERANCE[FAMILY[plan.kind]][plan.dtype]
        notes.append(f"Tolerance calibrated: the model's own {plan.dtype.value} sequence reached {worst:.2f}x the "
                     f"rule's tolerance (atol {base[0]:g}); atol raised to {atol:g}, where the model's error is at "
                     f"most half the tolerance.")
        spec = op_spec(plan, name, (atol, base[1], base[2]))
    else:
        notes.append(f"The model's own {plan.dtype.value} sequence reached {worst:.2f}x the tolerance (calibration).")
    (folder / "spec.toml").write_text(spec_toml(spec, fixed, notes))
    return folder, notes

