"""Packaged ops as torch operators: `torch.ops.<namespace>.<op>(*inputs, *scalars)`.

Each op is defined with `torch.library` from its spec (tensors in call order, then its scalars as floats; one
Tensor or a tuple of Tensors back), implemented for CPU and CUDA by the package's dispatcher and given a fake
implementation (outputs' shapes and dtypes from the spec), so it runs in eager mode, is traced as one opaque call by
`torch.compile(fullgraph=True)` and can be captured in a CUDA graph. Outputs are always fresh tensors: inputs are
never mutated or returned.

Each op also has a backward (`torch.library.register_autograd`): the forward runs the package (kernel or reference,
as the guards decide) and saves its inputs; the backward recomputes the op's reference on them with autograd and
returns its gradients, so a patched model trains as the unpatched one does. `Kernel.backwards` counts these calls.
"""

from __future__ import annotations

import torch

from ...base.records import DType
from .dtypes import FROM_TORCH, TORCH_DTYPES


def schema(kernel) -> str:
    spec = kernel.spec
    args = [f"Tensor {t.name}" for t in spec.inputs] + [f"float {n}" for n in spec.scalars]
    outs = "Tensor" if len(spec.outputs) == 1 else "(" + ", ".join("Tensor" for _ in spec.outputs) + ")"
    return f"{spec.name}({', '.join(args)}) -> {outs}"


def _fake(kernel):
    spec = kernel.spec

    def fake(*args):
        inputs = args[:kernel.n_inputs]
        dtype = FROM_TORCH.get(inputs[kernel.op_input].dtype, DType.fp32)
        axes = dict(zip(kernel.table.axes, (inputs[i].shape[d] for i, d in kernel.axis_at)))
        outs = [inputs[0].new_empty(t.dims(axes), dtype=TORCH_DTYPES[spec.tensor_dtype(t, dtype)])
                for t in spec.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return fake


# namespace -> op -> the Kernel its torch op calls now. A namespace is a package's digest: loading the same package
# again (another Package object) re-points its ops instead of defining them twice, which torch refuses.
_ACTIVE: dict[str, dict] = {}
_LIBRARIES: dict[str, torch.library.Library] = {}


def _impl(namespace: str, name: str, names: list[str], n: int):
    active = _ACTIVE[namespace]

    def impl(*args):
        out = active[name](*args[:n], **dict(zip(names, args[n:])))
        # the reference may hand back an input itself (an identity op): an operator's outputs must be its own
        if isinstance(out, torch.Tensor):
            return out.clone() if any(out is x for x in args[:n]) else out
        return tuple(o.clone() if any(o is x for x in args[:n]) else o for o in out)
    return impl


def _setup_context(n: int, names: list[str]):
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:n])
        ctx.scalars = dict(zip(names, inputs[n:]))
    return setup_context


def _backward(namespace: str, name: str, n_scalars: int):
    """The reference's gradient: recompute the reference on the saved inputs with autograd, differentiate it."""
    active = _ACTIVE[namespace]

    def backward(ctx, *grads):
        kernel = active[name]
        kernel.backwards += 1
        saved = ctx.saved_tensors
        wanted = [i for i, x in enumerate(saved) if ctx.needs_input_grad[i] and x.is_floating_point()]
        with torch.enable_grad():
            inputs = [x.detach().requires_grad_(i in wanted) for i, x in enumerate(saved)]
            outs = kernel.reference(*inputs, **ctx.scalars)
        outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        got = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in wanted], [g for _, g in pairs],
                                  allow_unused=True) if pairs and wanted else [None] * len(wanted)
        by_index = dict(zip(wanted, got))
        return (*(by_index.get(i) for i in range(len(saved))), *([None] * n_scalars))
    return backward


def register_package(package) -> torch.library.Library:
    """Define and implement every op of the package under its namespace (once per process; a reload re-points
    them); sets `kernel.torch_op`."""
    ns = package.namespace
    if ns in _LIBRARIES:
        _ACTIVE[ns].update(package.kernels)
    else:
        lib = torch.library.Library(ns, "DEF")
        _ACTIVE[ns] = dict(package.kernels)
        for name, kernel in package.kernels.items():
            lib.define(schema(kernel))
            impl = _impl(ns, name, kernel.scalar_names, kernel.n_inputs)
            lib.impl(name, impl, "CPU")
            lib.impl(name, impl, "CUDA")
            torch.library.register_fake(f"{ns}::{name}", _fake(kernel), lib=lib)
            torch.library.register_autograd(f"{ns}::{name}", _backward(ns, name, len(kernel.scalar_names)),
                                            setup_context=_setup_context(kernel.n_inputs, kernel.scalar_names),
                                            lib=lib)
        _LIBRARIES[ns] = lib
    for name, kernel in package.kernels.items():
        kernel.torch_op = getattr(getattr(torch.ops, ns), name)
    return _LIBRARIES[ns]
