"""Which kernelloop op computes a module call or an ATen call, with its axes and dtype, or why none does.

Module classes (the call's first tensor argument is x):
- torch.nn.Linear (forward not overridden), no bias -> gemm_nt: a = x as [M, K], b = weight [N, K];
  K = in_features, N = out_features, M = x.numel() // K. With a bias: unmapped (no op has b as [N, K] plus bias).
- transformers' GPT-2 Conv1D (class name Conv1D with `nf`; x @ weight + bias, weight [K, N]) -> gemm_bias:
  a = x as [M, K], b = weight, bias [N]; K = weight.shape[0], N = nf.
- torch.nn.LayerNorm with weight and bias and eps equal to the spec's eps -> layernorm: N = prod(normalized_shape),
  M = x.numel() // N.
- torch.nn.RMSNorm, and any class whose name ends in "RMSNorm" with `weight` and `variance_epsilon` or `eps`
  (LlamaRMSNorm, Qwen2RMSNorm, ...) -> rmsnorm, same M/N and eps rule. The name-matched classes are also checked
  numerically on the captured call (their output against x * rsqrt(mean(x^2) + eps) * (offset + weight) in fp32):
  offset 0 is rmsnorm, offset 1 (Gemma's (1 + weight)) rmsnorm_offset; any other formula is unmapped with the
  difference as its reason.
ATen overloads (outside recognised modules):
- aten._softmax.default / aten.softmax.int over the last dim -> softmax: N = x.shape[-1], M = x.numel() // N.
  aten._safe_softmax (zeros for fully masked rows) is recognised but unmapped.
- aten._scaled_dot_product_{flash,efficient,cudnn}_attention*, aten._scaled_dot_product_flash_attention_for_cpu,
  aten._scaled_dot_product_fused_attention_overrideable, aten.scaled_dot_product_attention -> attention_causal
  (is_causal) or attention: q [B, H, S, D], k and v [B, HKV, S, D], no mask, no dropout, scale 1/sqrt(D).
Every mapping also needs x contiguous (attention: the head dim of q, k, v contiguous), the dtype among the op
spec's dtypes and each axis within the spec's [min, max].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ...base.records.spec import DType, OpSpec
from ...core.spec import SpecError, load_op

TORCH_TO_DTYPE = {torch.float16: DType.fp16, torch.bfloat16: DType.bf16, torch.float32: DType.fp32}

SOFTMAX = ("aten._softmax.default", "aten.softmax.int")
SAFE_SOFTMAX = "aten._safe_softmax.default"
ATTENTION_PREFIXES = ("aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
                      "aten._scaled_dot_product_cudnn_attention", "aten._scaled_dot_product_fused_attention",
                      "aten.scaled_dot_product_attention")

RMS_OFFSETS = (0.0, 1.0)   # the weight offsets a name-matched RMSNorm is checked for: rmsnorm, rmsnorm_offset
# Tolerances of the numeric check of name-matched RMSNorm classes (two roundings of the op dtype, as Llama's).
_CHECK_TOL = {torch.float16: 2e-2, torch.bfloat16: 8e-2, torch.float32: 1e-4, torch.float64: 1e-8}


@dataclass(frozen=True)
class Mapping:
    """The outcome of mapping one call: op/axes/dtype when mapped, else a reason (axes when they were derived)."""

    target: str | None
    op: str | None
    axes: dict[str, int] | None
    dtype: DType | None
    reason: str | None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple:
        return (self.target, self.op, tuple(sorted((self.axes or {}).items())), self.dtype, self.reason,
                tuple(sorted((k, repr(v)) for k, v in self.params.items())))


class OpSpecs:
    """The op specs under an ops folder, loaded on first use."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._cache: dict[str, OpSpec | None] = {}

    def get(self, op: str) -> OpSpec | None:
        if op not in self._cache:
            try:
                self._cache[op] = load_op(self.root / op).spec
            except SpecError:
                self._cache[op] = None
        return self._cache[op]


def default_ops_root() -> Path:
    """./ops when the working directory has one, else the built-in ops (`kernelloop.base.builtin`)."""
    from ...base.builtin import ops_dir
    here = Path("ops")
    return here if here.is_dir() else ops_dir()


def bind(func, args, kwargs, *, defaults: bool = True) -> dict[str, Any]:
    """An ATen call's arguments by schema name (with the schema's defaults filled in when `defaults`)."""
    out: dict[str, Any] = {}
    for i, a in enumerate(func._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            out[a.name] = args[i]
        elif a.name in kwargs:
            out[a.name] = kwargs[a.name]
        elif defaults:
            out[a.name] = a.default_value if a.has_default_value() else None
    return out


def _finish(specs: OpSpecs, target: str, axes: dict[str, int] | None, dtype: torch.dtype | None,
            problems: list[str], params: dict[str, Any]) -> Mapping:
    """Check what is left in order -- the structural problems found so far, the op folder, the dtype, the axis
    ranges -- and say mapped or why not."""
    spec = specs.get(target)
    if problems:
        return Mapping(target, None, axes, None, problems[0], params)
    if spec is None:
        return Mapping(target, None, axes, None, f"no op folder {target} under {specs.root}", params)
    dt = TORCH_TO_DTYPE.get(dtype)
    if dt is None or dt not in spec.dtypes:
        name = str(dtype).removeprefix("torch.")
        return Mapping(target, None, axes, None, f"dtype {name} not supported by {target} "
                       f"({', '.join(d.value for d in spec.dtypes)})", params)
    assert axes is not None
    for name, ax in spec.axes.items():
        v = axes[name]
        if v < ax.min or (ax.max is not None and v > ax.max):
            bound = f"[{ax.min}, {ax.max}]" if ax.max is not None else f">= {ax.min}"
            return Mapping(target, None, axes, None, f"{name} = {v} is outside {target}'s {bound}", params)
    return Mapping(target, target, axes, dt, None, params)


def _first_tensor(args, kwargs) -> torch.Tensor | None:
    for v in [*args, *kwargs.values()]:
        if isinstance(v, torch.Tensor):
            return v
    return None


# -- modules ---------------------------------------------------------------------------------------------------

def _is_rmsnorm(module: torch.nn.Module) -> bool:
    rms = getattr(torch.nn, "RMSNorm", None)
    if rms is not None and isinstance(module, rms):
        return True
    return type(module).__name__.endswith("RMSNorm") and isinstance(getattr(module, "weight", None), torch.Tensor) \
        and (hasattr(module, "variance_epsilon") or hasattr(module, "eps"))


def module_family(module: torch.nn.Module) -> str | None:
    """'linear', 'conv1d', 'layernorm', 'rmsnorm' for the recognised module classes, else None."""
    if isinstance(module, torch.nn.Linear):
        return "linear"
    if isinstance(module, torch.nn.LayerNorm):
        return "layernorm"
    if _is_rmsnorm(module):
        return "rmsnorm"
    if type(module).__name__ == "Conv1D" and hasattr(module, "nf") and \
            isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dim() == 2:
        return "conv1d"
    return None


def _overridden(module: torch.nn.Module, base: type) -> str | None:
    if type(module).forward is not base.forward:
        return f"{type(module).__qualname__} overrides {base.__name__}.forward"
    return None


def _rows(x: torch.Tensor, n: int) -> int:
    return x.numel() // n if n else 0


def _gemm(module, x, *, target: str, k: int, n: int, weight_problem: str | None, bias_problem: str | None,
          specs: OpSpecs, params: dict) -> Mapping:
    problems = [p for p in (weight_problem, bias_problem) if p]
    if x is None:
        return Mapping(target, None, None, None, "no tensor input", params)
    if x.dim() == 0 or x.shape[-1] != k:
        return Mapping(target, None, None, None, f"input's last dim {list(x.shape)[-1:]} is not K = {k}", params)
    if not x.is_contiguous():
        problems.append("non-contiguous input")
    if not module.weight.is_contiguous():
        problems.append("non-contiguous weight")
    if module.weight.dtype != x.dtype:
        problems.append(f"weight dtype {str(module.weight.dtype)[6:]} differs from input dtype {str(x.dtype)[6:]}")
    return _finish(specs, target, {"M": _rows(x, k), "N": n, "K": k}, x.dtype, problems, params)


def _norm_axes(x: torch.Tensor | None, shape: tuple[int, ...]) -> tuple[dict[str, int] | None, str | None]:
    n = math.prod(shape)
    if x is None:
        return None, "no tensor input"
    if tuple(x.shape[x.dim() - len(shape):]) != tuple(shape):
        return None, f"input {list(x.shape)} does not end in the normalized shape {list(shape)}"
    return {"M": _rows(x, n), "N": n}, None


def _eps_problem(eps: float | None, spec: OpSpec | None, target: str) -> str | None:
    want = spec.scalars.get("eps") if spec is not None else None
    if want is None or eps is None:
        return None
    if not math.isclose(float(eps), want, rel_tol=1e-6, abs_tol=0.0):
        return f"eps {float(eps):g} differs from the {target} spec's eps {want:g}"
    return None


def _rms_check(x: torch.Tensor, weight: torch.Tensor, eps: float, output) -> tuple[float | None, str | None]:
    """(offset, None) when the module's output is x * rsqrt(mean(x^2) + eps) * (offset + weight) (fp32 math) within
    tolerance for offset 0 (rmsnorm) or 1 (Gemma's (1 + weight): rmsnorm_offset); (None, why) otherwise."""
    if not isinstance(output, torch.Tensor) or output.shape != x.shape or not x.dtype.is_floating_point:
        return None, "output is not one tensor of the input's shape"
    xf = x.double()
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    tol = _CHECK_TOL.get(x.dtype, 8e-2)
    diffs = []
    for offset in RMS_OFFSETS:
        ref = normed * (offset + weight.double())
        diff = (output.double() - ref).abs()
        if bool((diff <= tol + tol * ref.abs()).all()):
            return offset, None
        diffs.append(diff.max().item())
    return None, (f"output differs from x * rsqrt(mean(x^2) + eps) * weight (max |diff| {diffs[0]:.3g}) and from "
                  f"its (1 + weight) variant (max |diff| {diffs[1]:.3g}): another normalization")


def map_module(family: str, module: torch.nn.Module, args, kwargs, output, specs: OpSpecs) -> Mapping:
    """The mapping of one call of a recognised module (see the module docstring)."""
    x = _first_tensor(args, kwargs)
    if family == "linear":
        has_bias = module.bias is not None
        params = {"in_features": module.in_features, "out_features": module.out_features, "bias": has_bias}
        return _gemm(module, x, target="gemm_nt", k=module.in_features, n=module.out_features,
                     weight_problem=_overridden(module, torch.nn.Linear),
                     bias_problem="Linear with bias: no op with b as [N, K] plus bias" if has_bias else None,
                     specs=specs, params=params)
    if family == "conv1d":
        k, n = module.weight.shape[0], int(module.nf)
        bias = getattr(module, "bias", None)
        params = {"nf": n, "nx": k, "bias": bias is not None}
        bias_problem = None
        if bias is None:
            bias_problem = "Conv1D without bias: gemm_bias needs one"
        elif x is not None and bias.dtype != x.dtype:
            bias_problem = "bias dtype differs from input dtype"
        shape_problem = None if module.weight.shape[1] == n else f"weight {list(module.weight.shape)} is not [K, nf]"
        return _gemm(module, x, target="gemm_bias", k=k, n=n, weight_problem=shape_problem,
                     bias_problem=bias_problem, specs=specs, params=params)
    if family == "layernorm":
        target, spec = "layernorm", specs.get("layernorm")
        params = {"eps": module.eps, "normalized_shape": list(module.normalized_shape)}
        axes, problem = _norm_axes(x, tuple(module.normalized_shape))
        problems = [p for p in (problem, _overridden(module, torch.nn.LayerNorm)) if p]
        if module.weight is None:
            problems.append("no weight (elementwise_affine=False): layernorm needs weight and bias")
        elif module.bias is None:
            problems.append("no bias (bias=False): layernorm needs weight and bias")
        problems += [p for p in (_eps_problem(module.eps, spec, target),) if p]
        if x is not None and not x.is_contiguous():
            problems.append("non-contiguous input")
        return _finish(specs, target, axes, x.dtype if x is not None else None, problems, params)
    if family == "rmsnorm":
        return _map_rmsnorm(module, x, output, specs)
    raise ValueError(f"unknown module family {family!r}")


def _map_rmsnorm(module, x, output, specs: OpSpecs) -> Mapping:
    target, spec = "rmsnorm", specs.get("rmsnorm")
    rms = getattr(torch.nn, "RMSNorm", None)
    is_torch = rms is not None and isinstance(module, rms)
    weight = getattr(module, "weight", None)
    if is_torch:
        shape = tuple(module.normalized_shape)
        eps = module.eps
        if eps is None and x is not None:
            eps = torch.finfo(x.dtype).eps if x.dtype.is_floating_point else None
    else:
        shape = (weight.shape[-1],) if isinstance(weight, torch.Tensor) and weight.dim() >= 1 else ()
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
    params = {"eps": eps, "normalized_shape": list(shape)}
    if not shape:
        return Mapping(target, None, None, None, "no weight of the normalized size", params)
    axes, problem = _norm_axes(x, shape)
    problems = [p for p in (problem,) if p]
    if is_torch:
        problems += [p for p in (_overridden(module, rms),) if p]
    if weight is None:
        problems.append("no weight (elementwise_affine=False): rmsnorm needs one")
    if not isinstance(eps, (int, float)):
        problems.append(f"eps {eps!r} is not a number")
    else:
        problems += [p for p in (_eps_problem(eps, spec, target),) if p]
    if x is not None and not x.is_contiguous():
        problems.append("non-contiguous input")
    if not problems and not is_torch:
        offset, problem = _rms_check(x, weight, float(eps), output)
        problems += [problem] if problem else []
        if offset:
            target = "rmsnorm_offset"
            params["offset"] = offset
            problems += [p for p in (_eps_problem(eps, specs.get(target), target),) if p]
    return _finish(specs, target, axes, x.dtype if x is not None else None, problems, params)


# -- ATen calls ------------------------------------------------------------------------------------------------

def aten_target(overload: str) -> str | None:
    """'softmax' or 'attention' for the recognised ATen overloads, else None."""
    if overload in SOFTMAX or overload == SAFE_SOFTMAX:
        return "softmax"
    if overload.startswith(ATTENTION_PREFIXES) and "backward" not in overload:
        return "attention"
    return None


def map_aten(func, args, kwargs, specs: OpSpecs) -> Mapping:
    """The mapping of one recognised ATen call (see the module docstring)."""
    overload = str(func)
    a = bind(func, args, kwargs)
    if aten_target(overload) == "softmax":
        return _map_softmax(overload, a, specs)
    return _map_attention(overload, a, specs)


def _map_softmax(overload: str, a: dict, specs: OpSpecs) -> Mapping:
    x, dim = a.get("self"), a.get("dim")
    params = {"dim": dim}
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return Mapping("softmax", None, None, None, "no tensor input of rank >= 1", params)
    n = x.shape[-1]
    axes = {"M": _rows(x, n), "N": n}
    problems = []
    if overload == SAFE_SOFTMAX:
        problems.append("_safe_softmax gives 0 on fully masked rows where softmax gives NaN")
    if dim % x.dim() != x.dim() - 1:
        problems.append(f"softmax over dim {dim}, not the last")
    if a.get("half_to_float"):
        problems.append("half_to_float: an fp32 output from a 16-bit input")
    if a.get("dtype") is not None and a["dtype"] != x.dtype:
        problems.append(f"output dtype {a['dtype']} differs from the input's")
    if not x.is_contiguous():
        problems.append("non-contiguous input")
    return _finish(specs, "softmax", axes, x.dtype, problems, params)


def _map_attention(overload: str, a: dict, specs: OpSpecs) -> Mapping:
    q, k, v = a.get("query"), a.get("key"), a.get("value")
    causal = bool(a.get("is_causal"))
    target = "attention_causal" if causal else "attention"
    scale, dropout = a.get("scale"), a.get("dropout_p") or 0.0
    mask = a.get("attn_mask", a.get("attn_bias"))
    params = {"is_causal": causal, "scale": scale, "dropout_p": dropout}
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)):
        return Mapping(target, None, None, None, "q, k, v are not all 4-D [B, H, S, D]", params)
    B, H, S, D = q.shape
    HKV, S_kv = k.shape[1], k.shape[2]
    axes = {"B": B, "H": H, "HKV": HKV, "S": S, "D": D}
    params["gqa"] = HKV != H
    problems = []
    if k.shape[0] != B or k.shape[3] != D or tuple(v.shape) != tuple(k.shape):
        problems.append(f"k {list(k.shape)} / v {list(v.shape)} do not fit q {list(q.shape)} as [B, HKV, S, D]")
    elif S != S_kv:
        problems.append(f"S_q = {S} differs from S_kv = {S_kv} (decode or cross attention)")
    elif H % HKV:
        problems.append(f"H = {H} is not a multiple of HKV = {HKV}")
    if isinstance(mask, torch.Tensor):
        problems.append(f"an explicit mask / bias {list(mask.shape)}: the attention ops take none")
    if dropout:
        problems.append(f"dropout_p = {dropout}")
    if scale is not None and not math.isclose(float(scale), 1 / math.sqrt(D), rel_tol=1e-6):
        problems.append(f"scale {float(scale):g} differs from 1/sqrt(D) = {1 / math.sqrt(D):g}")
    if any(t.stride(-1) != 1 for t in (q, k, v)):
        problems.append("the head dim of q, k or v is not contiguous")
    if len({q.dtype, k.dtype, v.dtype}) > 1:
        problems.append("q, k, v differ in dtype")
    return _finish(specs, target, axes, q.dtype, problems, params)
