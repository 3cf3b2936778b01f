"""Seeded inputs and poisoned outputs.

Inputs are drawn in float32 from a generator seeded on the device they live on (the Philox generator on
CUDA, the CPU generator otherwise), then cast, so the parent and a worker that use the same seed and
device hold bit-identical tensors. Activations have a non-zero mean (spec's
InputPolicy) so a kernel that forgets to centre or to subtract the max is caught.
"""

from __future__ import annotations

import torch

from ..records import DType, OpSpec, TensorSpec, Workload

TORCH_DTYPES = {DType.fp16: torch.float16, DType.bf16: torch.bfloat16, DType.fp32: torch.float32}

# Output poison: a NaN with a payload no arithmetic produces (hardware NaNs are canonical), so an element
# still holding exactly this bit pattern after the call was never written.
POISON_BITS = {torch.float16: (0x7E5A, torch.int16), torch.bfloat16: (0x7FDA, torch.int16),
               torch.float32: (0x7FC0DEAD, torch.int32)}


def tensor_shape(t: TensorSpec, workload: Workload) -> tuple[int, ...]:
    return tuple(workload.axes[a] for a in t.shape)


def make_inputs(spec: OpSpec, workload: Workload, seed: int, device: str = "cpu") -> list[torch.Tensor]:
    """The op's inputs for one seed, in call order, in their spec dtypes."""
    g = torch.Generator(device=device).manual_seed(seed)
    pol = spec.inputs_policy
    out = []
    for t in spec.inputs:
        shape = tensor_shape(t, workload)
        base = torch.randn(shape, generator=g, dtype=torch.float32, device=device)
        if t.init == "activation":
            v = base * pol.std + pol.mean
        elif t.init == "weight":
            v = 1.0 + 0.1 * base
        else:  # bias
            v = 0.2 + 0.1 * base
        out.append(v.to(TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)]))
    return out


def poison_(t: torch.Tensor) -> torch.Tensor:
    bits, itype = POISON_BITS[t.dtype]
    t.view(itype).fill_(bits if bits < 2 ** (8 * t.element_size() - 1) else bits - 2 ** (8 * t.element_size()))
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask of elements that still hold the poison bit pattern."""
    bits, itype = POISON_BITS[t.dtype]
    signed = bits if bits < 2 ** (8 * t.element_size() - 1) else bits - 2 ** (8 * t.element_size())
    return t.contiguous().view(itype) == signed


def alloc_outputs(spec: OpSpec, workload: Workload, device: str) -> list[torch.Tensor]:
    """Fresh, poisoned output buffers."""
    return [poison_(torch.empty(tensor_shape(t, workload), dtype=TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)],
                                device=device)) for t in spec.outputs]
