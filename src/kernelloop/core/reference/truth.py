"""The reference answer, computed in higher precision in the trusted process.

Integer and boolean inputs reach the reference as they are (no float64 upcast): indices stay indices. Every result
of the reference is checked against the spec's declared outputs -- as many tensors as outputs, each of the output's
shape; a float output floating point in at least float32, an integer or bool output integer or bool (computed
exactly, compared exactly: core/verify/compare.py) -- at every verification (and on tiny inputs when the op
loads, core/spec/loader.py): a mismatch is a SpecError naming the reference file and the output, never a verdict on a
candidate (an output the reference does not return would otherwise go unchecked).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

import torch

from ...base.records import OpSpec, Workload

_BITS = {torch.float64: 64, torch.float32: 32}


@lru_cache(maxsize=16)
def load_reference(path: str):
    """Import `reference` from a trusted reference file."""
    name = "kernelloop_ref_" + str(abs(hash(path)))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.reference


def _axes_of(spec: OpSpec, inputs: list[torch.Tensor]) -> dict[str, int]:
    axes: dict[str, int] = {}
    for t, x in zip(spec.inputs, inputs):
        for name, n in zip(t.shape, x.shape):
            if name in spec.axes:
                axes.setdefault(name, int(n))
    return axes


def check_reference_outputs(spec: OpSpec, reference_file: Path | str, outputs: list, axes: dict[str, int]) -> None:
    """Raise SpecError (file: the reference, field: the output) unless `outputs` match the spec's outputs."""
    from ...base.records.spec import ReferenceOutputError as SpecError
    declared = spec.outputs
    names = ", ".join(t.name for t in declared)
    if len(outputs) != len(declared):
        k = min(len(outputs), len(declared))
        which = declared[k].name if len(outputs) < len(declared) else f"extra result {k}"
        raise SpecError(reference_file, f"outputs.{k} ({which})",
                        f"the reference returned {len(outputs)} result(s), the spec declares {len(declared)} "
                        f"output(s) ({names})")
    for i, (t, out) in enumerate(zip(declared, outputs)):
        field = f"outputs.{i} ({t.name})"
        if not isinstance(out, torch.Tensor):
            raise SpecError(reference_file, field, f"the reference returned a {type(out).__name__}, not a tensor")
        try:
            want = t.dims(axes)
        except ValueError:   # an expression over an axis no input carries: any size
            want = tuple(axes.get(a, -1) for a in t.shape)
        if len(want) != out.dim() or any(w not in (-1, g) for w, g in zip(want, out.shape)):
            raise SpecError(reference_file, field, f"the reference returned shape {tuple(out.shape)}, the spec "
                            f"declares [{', '.join(t.shape)}] = {want}")
        exact = not spec.tensor_dtype(t, spec.dtypes[0]).is_float
        if exact and (out.is_floating_point() or out.is_complex()):
            raise SpecError(reference_file, field, f"the reference returned {out.dtype} for a "
                            f"{spec.tensor_dtype(t, spec.dtypes[0]).value} output: integer and bool outputs are "
                            f"computed exactly, as integer or bool tensors")
        if not exact and out.dtype not in _BITS:
            raise SpecError(reference_file, field, f"the reference returned {out.dtype}: the truth must be "
                            f"float32 or float64 (it is computed from float64 inputs)")


def truth(spec: OpSpec, reference_file: Path, inputs: list[torch.Tensor],
          workload: Workload | None = None) -> list[torch.Tensor]:
    """Reference outputs in float64 (on the CPU, float32 for tensors of over 2^24 elements, to bound time),
    checked against the spec's outputs."""
    ref = load_reference(str(reference_file))
    big = inputs[0].device.type == "cpu" and max(t.numel() for t in inputs) > 2 ** 24
    hi = torch.float32 if big else torch.float64
    out = ref(*[t.to(hi) if t.is_floating_point() else t for t in inputs], **spec.scalars)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    axes = dict(workload.axes) if workload is not None else _axes_of(spec, inputs)
    check_reference_outputs(spec, reference_file, outs, axes)
    return outs
