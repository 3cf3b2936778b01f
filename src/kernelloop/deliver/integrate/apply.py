"""`kernelloop.apply(model, package)`: route a model's norms, linears, softmax and attention to a package's ops.

Module swaps: `torch.nn.LayerNorm` → layernorm; `torch.nn.RMSNorm` and RMSNorm classes of model libraries (a class
whose name ends in RMSNorm, with a `weight` and `variance_epsilon` or `eps`: transformers' LlamaRMSNorm,
Qwen2RMSNorm, ...) → rmsnorm, a Gemma one (class name containing "gemma": x / rms(x) * (1 + weight)) →
rmsnorm_offset; `torch.nn.Linear` without bias → gemm_nt; GPT-2's `Conv1D` (x @ W + b, W as [K, N])
→ gemm_bias. A module is swapped only where the package has an entry for its static dims (features, dtype, eps);
the token count is decided per call by the guards. Functional calls: `torch.nn.functional.softmax` over the last dim
and `torch.nn.functional.scaled_dot_product_attention` (no mask, no dropout, default scale; `is_causal` picks
attention_causal) are routed while the patch is applied. Under torch.compile (and torch.export), inside a
TorchDispatchMode or FakeTensorMode, and when autograd would record the call, a call goes through the package's
torch op, traced as one opaque operator; otherwise -- inference in eager mode, and a CUDA graph captured from it --
it calls the package's dispatcher directly, which skips torch's dispatcher and its Python operator boundary (tens of
microseconds of host time per call) and decides exactly as the op would. `undo()` restores the model.

Training: the torch op has a backward (the reference's gradient, recomputed on the saved inputs: deliver/package/torch_ops.py),
so a patched model trains as the unpatched one does. A norm's eps is read from the module at each call, so a value
changed after apply reaches the guard (the reference runs for an eps no entry was verified at).
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field

import torch
from torch import nn

from ...base.records import DType
from ..package.runtime import FROM_TORCH, Package

GEMMA_OFFSET = 1.0   # rmsnorm_offset's `offset` for Gemma's RMSNorm classes


@dataclass(frozen=True)
class Site:
    """One call site: a module of the model or a patched function, and what apply did with it."""

    path: str
    kind: str          # module class, or 'function'
    op: str | None     # the package op it maps onto (None: none does)
    replaced: bool
    reason: str        # why it was left alone ('' when replaced)


@dataclass
class ApplyReport:
    sites: list[Site] = field(default_factory=list)

    @property
    def replaced(self) -> list[Site]:
        return [s for s in self.sites if s.replaced]

    @property
    def left(self) -> list[Site]:
        return [s for s in self.sites if not s.replaced]

    def as_dict(self) -> dict:
        return {"replaced": len(self.replaced), "left": len(self.left),
                "sites": [s.__dict__ for s in self.sites]}


def _covers(package: Package, op: str, dtype: torch.dtype, fixed: dict[str, int], scalars: dict[str, float]) -> str:
    """'' when some entry of the op takes these static dims (any token count), else why not."""
    if op not in package:
        return f"the package has no {op}"
    kernel = package[op]
    if kernel.disabled:
        return kernel.disabled
    d = FROM_TORCH.get(dtype)
    if d is None:
        return f"dtype {dtype} is not one of {op}'s"
    for e in kernel.table.entries:
        g = e.guard
        if g.dtype is d and all(v in g.axes[a] for a, v in fixed.items()) and \
                all(math.isclose(g.scalars.get(k, v), v, rel_tol=0, abs_tol=0) for k, v in scalars.items()):
            return ""
    dims = ", ".join(f"{a}={v}" for a, v in fixed.items())
    extra = "".join(f", {k}={v:g}" for k, v in scalars.items())
    return f"no {op} entry for {d.value} {dims}{extra}"


def kernel_caller(kernel):
    """f(*inputs, *scalars): the dispatcher itself in eager inference, the kernel's torch op where a tracer, a
    dispatch mode or autograd must see one operator."""
    op, n, names = kernel.torch_op, kernel.n_inputs, kernel.scalar_names
    compiling = torch.compiler.is_compiling
    modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 1)

    def call(*args):
        if compiling() or modes() or (torch.is_grad_enabled() and any(a.requires_grad for a in args[:n])):
            return op(*args)
        out = kernel(*args[:n], **dict(zip(names, args[n:])))
        if isinstance(out, torch.Tensor):   # an operator's outputs are its own (as the torch op makes sure)
            return out.clone() if any(out is a for a in args[:n]) else out
        return tuple(o.clone() if any(o is a for a in args[:n]) else o for o in out)
    return call


def _norm_forward(op, bias: bool, offset: float | None = None):
    """A LayerNorm/RMSNorm forward calling the package op on the flattened rows with the module's own parameters
    and its eps as it is at call time (an eps changed after apply reaches the guard, which runs the reference for
    a value no entry was verified at); `offset`: rmsnorm_offset's weight offset, its second scalar."""
    extra = () if offset is None else (offset,)

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        args = (rows, self.weight, self.bias) if bias else (rows, self.weight)
        return op(*args, _norm_eps(self), *extra).view(x.shape)
    return forward


def _linear_forward(op, conv1d: bool):
    """nn.Linear without bias (gemm_nt: a [M, K] @ weight[N, K].T) or GPT-2 Conv1D (gemm_bias: a @ W[K, N] + b)."""
    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1])
        out = op(rows, self.weight, self.bias) if conv1d else op(rows, self.weight)
        return out.view(*x.shape[:-1], out.shape[-1])
    return forward


def _norm_eps(m: nn.Module) -> float | None:
    for name in ("variance_epsilon", "eps"):
        v = getattr(m, name, None)
        if isinstance(v, (int, float)):
            return float(v)
    return None


def _plan_module(path: str, m: nn.Module, package: Package):
    """(op, reason left alone, the new forward) for one module; (None, '', None) when it is no candidate at all."""
    cls = type(m).__name__
    if isinstance(m, nn.LayerNorm):
        if m.weight is None or m.bias is None or len(m.normalized_shape) != 1:
            return "layernorm", "LayerNorm without weight and bias, or over several dims", None
        why = _covers(package, "layernorm", m.weight.dtype, {"N": m.normalized_shape[0]}, {"eps": m.eps})
        return "layernorm", why, None if why else _norm_forward(kernel_caller(package["layernorm"]), True)
    if isinstance(m, getattr(nn, "RMSNorm", ())) or (cls.endswith("RMSNorm") and isinstance(
            getattr(m, "weight", None), torch.Tensor)):
        eps = _norm_eps(m)
        if eps is None or m.weight is None or m.weight.dim() != 1:
            return "rmsnorm", "RMSNorm without a 1-d weight or a known eps", None
        if "gemma" in cls.lower():   # Gemma's RMSNorm scales by (1 + weight)
            scalars = {"eps": eps, "offset": GEMMA_OFFSET}
            why = _covers(package, "rmsnorm_offset", m.weight.dtype, {"N": m.weight.shape[0]}, scalars)
            return "rmsnorm_offset", why, None if why else _norm_forward(
                kernel_caller(package["rmsnorm_offset"]), False, GEMMA_OFFSET)
        why = _covers(package, "rmsnorm", m.weight.dtype, {"N": m.weight.shape[0]}, {"eps": eps})
        return "rmsnorm", why, None if why else _norm_forward(kernel_caller(package["rmsnorm"]), False)
    if isinstance(m, nn.Linear):
        if m.bias is not None:
            return "gemm_nt", "Linear with bias: no op takes b as [N, K] plus a bias", None
        why = _covers(package, "gemm_nt", m.weight.dtype, {"N": m.out_features, "K": m.in_features}, {})
        return "gemm_nt", why, None if why else _linear_forward(kernel_caller(package["gemm_nt"]), False)
    if cls == "Conv1D" and hasattr(m, "nf") and getattr(m, "weight", None) is not None:
        k, n = m.weight.shape
        why = _covers(package, "gemm_bias", m.weight.dtype, {"N": n, "K": k}, {})
        return "gemm_bias", why, None if why else _linear_forward(kernel_caller(package["gemm_bias"]), True)
    return None, "", None


class Applied:
    """What `apply` did: `report`; `undo()` restores the model (also a context manager's exit), `redo()` patches it
    again with the same decisions."""

    def __init__(self, model: nn.Module, package: Package, report: ApplyReport, swaps, functions):
        self.model, self.package, self.report = model, package, report
        self._swaps = swaps            # (module, new forward)
        self._functions = functions    # (owner, name, original, wrapper)
        self.active = False
        self.redo()

    def redo(self) -> None:
        if self.active:
            return
        for module, forward in self._swaps:
            module.forward = types.MethodType(forward, module)
        for owner, name, _, wrapper in self._functions:
            setattr(owner, name, wrapper)
        self.active = True

    def undo(self) -> None:
        if not self.active:
            return
        for module, _ in reversed(self._swaps):
            if "forward" in module.__dict__:
                del module.forward
        for owner, name, original, _ in self._functions:
            setattr(owner, name, original)
        self.active = False

    def __enter__(self) -> "Applied":
        return self

    def __exit__(self, *exc) -> None:
        self.undo()


def _softmax_wrapper(package: Package, original):
    op = kernel_caller(package["softmax"])

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        last = dim is not None and (dim == -1 or dim == input.dim() - 1)
        if last and dtype is None and input.dim() >= 1 and input.shape[-1] > 0:
            return op(input.reshape(-1, input.shape[-1])).view(input.shape)
        return original(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    return softmax


def _sdpa_wrapper(package: Package, original):
    ops = {c: kernel_caller(package[n]) for c, n in ((False, "attention"), (True, "attention_causal")) if n in package}

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
             **kwargs):
        op = ops.get(bool(is_causal))
        ok = (op is not None and attn_mask is None and dropout_p == 0.0 and not kwargs and query.dim() == 4
              and key.dim() == 4 and query.shape[2] == key.shape[2] and query.shape[-1] == key.shape[-1]
              and (scale is None or math.isclose(scale, 1 / math.sqrt(query.shape[-1])))
              and (key.shape[1] == query.shape[1] or (enable_gqa and query.shape[1] % key.shape[1] == 0)))
        if ok:
            return op(query.contiguous(), key.contiguous(), value.contiguous())
        extra = {"enable_gqa": enable_gqa} if enable_gqa else {}
        return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, **extra, **kwargs)
    return sdpa


def apply(model: nn.Module, package: Package, *, functions: bool = True) -> Applied:
    """Patch `model` in place to call `package`'s ops; returns the handle that undoes it and reports every site."""
    package.register()
    report = ApplyReport()
    swaps = []
    for path, m in list(model.named_modules()):
        if "forward" in m.__dict__:
            report.sites.append(Site(path=path or "(model)", kind=type(m).__qualname__, op=None, replaced=False,
                                     reason="its forward is already patched (apply twice?)"))
            continue
        op, why, forward = _plan_module(path, m, package)
        if op is None:
            continue
        report.sites.append(Site(path=path or "(model)", kind=type(m).__qualname__, op=op,
                                 replaced=forward is not None, reason=why))
        if forward is not None:   # the module stays (its parameters, state_dict keys and hooks): its forward changes
            swaps.append((m, forward))
    patched = []
    if functions:
        F = torch.nn.functional
        for name, op_names, make in (("softmax", ("softmax",), _softmax_wrapper),
                                     ("scaled_dot_product_attention", ("attention", "attention_causal"), _sdpa_wrapper)):
            have = [n for n in op_names if n in package and not package[n].disabled]
            site = f"torch.nn.functional.{name}"
            if not have:
                why = (package[op_names[0]].disabled if op_names[0] in package else
                       f"the package has no {' or '.join(op_names)}")
                report.sites.append(Site(path=site, kind="function", op=op_names[0], replaced=False, reason=why))
                continue
            original = getattr(F, name)
            if getattr(original, "_kernelloop_patch", False):
                report.sites.append(Site(path=site, kind="function", op="/".join(have), replaced=False,
                                         reason="already patched (apply twice?)"))
                continue
            wrapper = make(package, original)
            wrapper._kernelloop_patch = True
            patched.append((F, name, original, wrapper))
            report.sites.append(Site(path=site, kind="function", op="/".join(have), replaced=True, reason=""))
    return Applied(model, package, report, swaps, patched)


def dtype_name(dtype: torch.dtype) -> str:
    d = FROM_TORCH.get(dtype)
    return d.value if isinstance(d, DType) else str(dtype)
