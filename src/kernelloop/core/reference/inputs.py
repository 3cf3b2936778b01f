"""Seeded inputs and poisoned outputs.

Inputs are drawn in float32 from a generator seeded on the device they live on (the Philox generator on
CUDA, the CPU generator otherwise), then cast, so the parent and a worker that use the same seed and
device hold bit-identical tensors. Activations have a non-zero mean (spec's
InputPolicy) so a kernel that forgets to centre or to subtract the max is caught.

On the CPU the transcendental steps of a distribution (log, sqrt and pow) run in NumPy, in float64, on one
thread; never in torch. torch's CPU log, exp, sqrt, sin, ... call MKL's vector math library (VML) on chunks of
2048+ elements in parallel, and the first such call in a process now and then returns values off by up to 1e-4
relative in one thread's chunk (a float32 `torch.log` of 32,768 elements: the elements of one thread's half
differed from every later call of the same op in the same process, in about 1 of 20 fresh processes;
benchmarks/verify_stress.py `--first-call` counts them). A worker whose first VML call drew a case's inputs then held
other inputs than the controller's regeneration: an honest kernel judged WRONG_INPUT_MUTATED, or WRONG_VALUES on a
timed call. Everything else here is the generator (serial), +, -, x, / and casts: correctly rounded, so the parent
and a worker that use the same seed hold bit-identical tensors whatever their thread counts.

Integer and boolean inputs come from the generator their spec declares (base/records/generators.py): index tensors
and masks from the same torch generator, CSR structures from NumPy's (core/reference/sparse.py) for the case's
sparsity pattern, histogram values from NumPy's (core/reference/bins.py) for the case's value pattern. Their output buffers are poisoned with a fixed value (no integer bit pattern is unused), so an
element still holding it is unwritten only where the truth differs (core/verify/compare.py); a bool's byte is
poisoned with 0x5A, which no store of true (1) or false (0) leaves.
"""

from __future__ import annotations

import numpy as np
import torch

from ...base.records import BinsInit, CsrColIdxInit, CsrRowPtrInit, DType, IndexInit, MaskInit, OpSpec, TensorSpec
from ...base.records import Workload
from ...base.records import evaluate_expression

TORCH_DTYPES = {DType.fp16: torch.float16, DType.bf16: torch.bfloat16, DType.fp32: torch.float32,
                DType.int8: torch.int8, DType.uint8: torch.uint8, DType.int32: torch.int32, DType.int64: torch.int64,
                DType.bool_: torch.bool}

# Output poison: a NaN with a payload no arithmetic produces (hardware NaNs are canonical), so an element
# still holding exactly this bit pattern after the call was never written.
POISON_BITS = {torch.float16: (0x7E5A, torch.int16), torch.bfloat16: (0x7FDA, torch.int16),
               torch.float32: (0x7FC0DEAD, torch.int32), torch.bool: (0x5A, torch.uint8)}
# Integer outputs: a fixed value (every bit pattern is a value an honest kernel may store), judged unwritten only
# where the truth is another value.
POISON_VALUES = {torch.int8: -91, torch.uint8: 0xA5, torch.int32: 0x7FC0DEAD, torch.int64: 0x7FC0DEAD7FC0DEAD}


def tensor_shape(t: TensorSpec, workload: Workload) -> tuple[int, ...]:
    return t.dims(workload.axes)


def _cpu_math(fn, x: torch.Tensor) -> torch.Tensor:
    """`fn` (a NumPy ufunc) of a CPU tensor in float64, on one thread, outside torch's MKL-backed kernels."""
    return torch.from_numpy(np.ascontiguousarray(fn(x.double().numpy())))


def _pow10(x: torch.Tensor) -> torch.Tensor:
    if x.device.type != "cpu":
        return torch.pow(10.0, x)
    return _cpu_math(lambda a: np.power(10.0, a), x)


def _inv_sqrt_exp(u: torch.Tensor) -> torch.Tensor:
    """sqrt(-log(u)): an Exp(1) draw's square root (chi-squared with 2 degrees of freedom over 2)."""
    if u.device.type != "cpu":
        return torch.sqrt(-torch.log(u))
    return _cpu_math(lambda a: np.sqrt(-np.log(a)), u)


def _wide(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`x` in the precision the other factor came in (float64 from the CPU steps, else the draw's own)."""
    return x.double() if like.dtype == torch.float64 else x


def _activation(base: torch.Tensor, g: torch.Generator, distribution: str, mean: float, std: float) -> torch.Tensor:
    if distribution == "normal":
        return base * std + mean
    if distribution == "large":
        return (base * std + mean) * 64.0
    if distribution == "near_zero":
        return (base * std + mean) * 1e-3
    if distribution == "mixed":
        rows = base.shape[0] if base.dim() > 1 else 1
        exps = torch.rand((rows,) + (1,) * (base.dim() - 1), generator=g, device=base.device) * 4.0 - 2.0
        scale = _pow10(exps)
        return ((_wide(base, scale) * std + mean) * scale).to(base.dtype)
    if distribution == "heavy_tail":
        u = torch.rand(base.shape, generator=g, device=base.device).clamp_min(1e-12)
        den = _inv_sqrt_exp(u)
        t = _wide(base, den) / den  # Student-t, 2 degrees of freedom
        return ((t * std).clamp(-1e3 * std, 1e3 * std) + mean).to(base.dtype)
    if distribution == "offset":
        return _row_offset(base, g, mean, std)
    raise ValueError(f"unknown distribution {distribution!r}")


OFFSET_DECADES = (1.2, 1.8)   # a row's common offset is +-10^U(1.2, 1.8) (16 to 63) standard deviations


def _row_offset(base: torch.Tensor, g: torch.Generator, mean: float, std: float) -> torch.Tensor:
    """normal(mean, std) plus one large common offset per row (every index of the leading axes; the last axis is the
    row), of random sign and 16 to 63 standard deviations: the row's mean is the offset, so a LayerNorm that skips
    its mean subtraction (in the centred values or in the variance: 1 + offset^2 standard deviations squared) is far
    off on every row. (Larger offsets make an honest float32 LayerNorm's cancellation error exceed the ULP bound;
    a softmax's skipped max subtraction is exposed by `large`, whose rows reach exp's float32 overflow.)"""
    rows = tuple(base.shape[:-1]) + (1,) if base.dim() > 1 else (1,)
    exps = torch.rand(rows, generator=g, device=base.device) * (OFFSET_DECADES[1] - OFFSET_DECADES[0]) \
        + OFFSET_DECADES[0]
    sign = torch.where(torch.rand(rows, generator=g, device=base.device) < 0.5, -1.0, 1.0)
    shift = _pow10(exps) * std
    return ((_wide(base, shift) * std + mean) + sign.to(shift.dtype) * shift).to(base.dtype)


def _expr(e: str, axes: dict[str, int]) -> int:
    return int(evaluate_expression(e, axes))


def _generated(t: TensorSpec, k: int, shape: tuple[int, ...], workload: Workload, g: torch.Generator, seed: int,
               device: str, pattern: str, structures: dict[str, torch.Tensor]) -> torch.Tensor:
    """An integer or bool input from its declared generator (the CSR columns drawn with their row pointers)."""
    init, axes = t.init, workload.axes
    dtype = TORCH_DTYPES[DType(t.dtype)]
    if isinstance(init, IndexInit):
        lo, hi = _expr(init.low, axes), _expr(init.high, axes)
        if hi <= lo and 0 not in shape:
            raise ValueError(f"input {t.name}: empty index range [{lo}, {hi}) for {axes}")
        return torch.randint(lo, max(hi, lo + 1), shape, generator=g, device=device, dtype=torch.int64).to(dtype)
    if isinstance(init, MaskInit):
        return torch.rand(shape, generator=g, device=device) < init.p
    if isinstance(init, CsrRowPtrInit):
        from .sparse import csr_structure
        row_ptr, col = csr_structure(pattern, _expr(init.rows, axes), _expr(init.cols, axes), _expr(init.nnz, axes),
                                     (seed * 1_000_003 + k) % 2 ** 63)
        structures[t.name] = torch.from_numpy(col)
        return torch.from_numpy(row_ptr).to(device=device, dtype=dtype).reshape(shape)
    if isinstance(init, CsrColIdxInit):
        return structures[init.row_ptr].to(device=device, dtype=dtype).reshape(shape)
    if isinstance(init, BinsInit):
        from .bins import bin_values
        n = int(np.prod(shape, dtype=np.int64))
        values = bin_values(pattern, n, _expr(init.bins, axes), (seed * 1_000_003 + k) % 2 ** 63)
        return torch.from_numpy(values).to(device=device, dtype=dtype).reshape(shape)
    raise ValueError(f"input {t.name}: a {t.dtype} tensor has no generator")


def make_inputs(spec: OpSpec, workload: Workload, seed: int, device: str = "cpu",
                distribution: str = "normal", pattern: str | None = None) -> list[torch.Tensor]:
    """The op's inputs for one seed, value distribution and input pattern (None: the spec's first), in call order,
    in their spec dtypes."""
    g = torch.Generator(device=device).manual_seed(seed)
    pol = spec.inputs_policy
    pattern = pattern or (spec.patterns or ["uniform"])[0]
    structures: dict[str, torch.Tensor] = {}
    out = []
    for k, t in enumerate(spec.inputs):
        shape = tensor_shape(t, workload)
        if not isinstance(t.init, str):
            out.append(_generated(t, k, shape, workload, g, seed, device, pattern, structures))
            continue
        base = torch.randn(shape, generator=g, dtype=torch.float32, device=device)
        if t.init == "activation":
            v = _activation(base, g, distribution, pol.mean, pol.std)
        elif t.init == "weight":
            v = 1.0 + 0.1 * base
        else:  # bias
            v = 0.2 + 0.1 * base
        out.append(v.to(TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)]))
    return out


def poison_(t: torch.Tensor) -> torch.Tensor:
    if t.dtype in POISON_VALUES:
        return t.fill_(POISON_VALUES[t.dtype])
    bits, itype = POISON_BITS[t.dtype]
    t.view(itype).fill_(bits if bits < 2 ** (8 * t.element_size() - 1) else bits - 2 ** (8 * t.element_size()))
    return t


def is_poison(t: torch.Tensor) -> torch.Tensor:
    """Boolean mask of elements that still hold the poison bit pattern (for an integer output: the poison value,
    which an honest kernel stores where the truth is that value)."""
    if t.dtype in POISON_VALUES:
        return t == POISON_VALUES[t.dtype]
    bits, itype = POISON_BITS[t.dtype]
    signed = bits if bits < 2 ** (8 * t.element_size() - 1) else bits - 2 ** (8 * t.element_size())
    return t.contiguous().view(itype) == signed


def alloc_outputs(spec: OpSpec, workload: Workload, device: str) -> list[torch.Tensor]:
    """Fresh, poisoned output buffers."""
    return [poison_(torch.empty(tensor_shape(t, workload), dtype=TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)],
                                device=device)) for t in spec.outputs]


def alloc_scratch(spec: OpSpec, workload: Workload, device: str) -> dict[str, torch.Tensor]:
    """The keyword arguments that give `launch` the op's workspace: {"scratch": a fresh, poisoned flat tensor}, or
    {} when the op declares none (so templates of ops without one are called exactly as before)."""
    if spec.scratch is None:
        return {}
    t = torch.empty(spec.scratch_numel(workload.axes), dtype=TORCH_DTYPES[DType(spec.scratch.dtype)], device=device)
    return {"scratch": poison_(t)}


def alloc_guarded_outputs(spec: OpSpec, workload: Workload, device: str
                          ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(outputs, backings): fresh, poisoned output buffers, each inside a sentinel-filled backing with guard zones
    before and after it (core/reference/guards.py)."""
    from .guards import guarded_empty
    pairs = [guarded_empty(tensor_shape(t, workload), TORCH_DTYPES[spec.tensor_dtype(t, workload.dtype)], device)
             for t in spec.outputs]
    return [poison_(o) for o, _ in pairs], [b for _, b in pairs]


def alloc_guarded_scratch(spec: OpSpec, workload: Workload, device: str
                          ) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """alloc_scratch's keyword arguments with the workspace inside a guarded backing, and that backing (None when
    the op declares no workspace)."""
    if spec.scratch is None:
        return {}, None
    from .guards import guarded_empty
    t, backing = guarded_empty((spec.scratch_numel(workload.axes),), TORCH_DTYPES[DType(spec.scratch.dtype)], device)
    return {"scratch": poison_(t)}, backing


PERTURBED = 4   # elements changed per activation input in a near-duplicate of earlier contents


def perturb_(spec: OpSpec, inputs: list[torch.Tensor], seed: int) -> list[torch.Tensor]:
    """A near-duplicate, in place: PERTURBED seeded positions of every activation input moved by 4 standard
    deviations (far outside any tolerance in the outputs that depend on them), the rest unchanged. A cache keyed on
    a sample of the contents sees the earlier contents and returns the earlier answer. Positions come from a CPU
    generator, so the controller and the worker change the same elements on any device."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    shift = 4.0 * spec.inputs_policy.std
    for t, x in zip(spec.inputs, inputs):
        if t.init != "activation" or x.numel() == 0:
            continue
        idx = torch.randint(0, x.numel(), (min(PERTURBED, x.numel()),), generator=g).to(x.device)
        flat = x.view(-1)
        flat[idx] = (flat[idx].float() + shift).to(x.dtype)
    return inputs
