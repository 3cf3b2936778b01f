"""What a proposer may know about an op: the launch interface, tensor shapes and dtypes, and the rules.

It is derived from the spec and the workloads only. The verifier's inputs, seeds, value distributions and
held-out shapes are not part of it (the run secret decides those, after the code is submitted).
"""

from __future__ import annotations

from ...base.records import OpSpec, Workload

RULES = [
    "`launch` receives the input tensors, then the preallocated output tensors, positionally and in the order "
    "given; the op's scalars and the configuration come as keyword arguments. It writes every element of the "
    "outputs in place and returns nothing.",
    "All arithmetic happens inside @triton.jit kernels. Host code may use torch only for metadata (shape, "
    "stride, numel, dtype, device, data_ptr) and allocation-free views, and triton only to launch (cdiv, "
    "next_power_of_2).",
    "Forbidden: calling the op's library implementation (torch.nn.functional.*, torch.compile, Liger-Kernel, "
    "...), torch compute or allocation on the host, new streams, threads or processes, file or environment "
    "access, caching results across calls, lowering the precision of the computation, try/except fallbacks.",
    "Inputs must not be modified; repeated calls on the same inputs must give bit-identical outputs.",
    "Correctness is checked on fresh inputs of several value distributions and on shapes you are not shown: "
    "other sizes of every axis (smaller, odd, not a power of two, and larger than the workloads' sizes), within "
    "each axis's [min, max] and the op's constraints: do not hard-code shapes.",
    "Only kernels that pass verification are timed; a wrong, crashing or rule-breaking kernel scores nothing.",
]


def launch_signature(spec: OpSpec) -> str:
    """e.g. 'launch(x, weight, bias, y, *, eps, **config)'."""
    tensors = ", ".join(t.name for t in [*spec.inputs, *spec.outputs])
    scalars = "".join(f", {s}" for s in spec.scalars)
    scratch = ", scratch" if spec.scratch is not None else ""
    return f"launch({tensors}, *{scratch}{scalars}, **config)"


def op_interface(spec: OpSpec, workloads: list[Workload]) -> dict:
    """The op's interface as a JSON-able dict: signature, tensors, scalars, dtypes, tolerances, shapes, rules."""

    def tensor(t, kind):
        return {"name": t.name, "kind": kind, "shape": list(t.shape),
                "dtype": "the workload's dtype" if t.dtype == "op" else t.dtype}

    return {
        "op": spec.name,
        "description": spec.description,
        "launch": launch_signature(spec),
        "tensors": [tensor(t, "input") for t in spec.inputs] + [tensor(t, "output") for t in spec.outputs],
        "scalars": dict(spec.scalars),
        "scratch": None if spec.scratch is None else {
            "name": spec.scratch.name, "numel": spec.scratch.numel, "dtype": spec.scratch.dtype,
            "note": "a flat workspace passed as the keyword `scratch`, poisoned before every call: write before "
                    "you read; nothing survives from one call to the next"},
        "axes": {k: {"description": a.description, "min": a.min, "max": a.max} for k, a in spec.axes.items()},
        "dtypes": [d.value for d in spec.dtypes],
        "tolerance": {d.value: {"atol": t.atol, "rtol": t.rtol} for d, t in spec.tolerance.items()},
        "bytes_moved": spec.bytes_formula,
        "flops": spec.flops_formula,
        "workloads": [workload_shapes(spec, w) for w in workloads],
        "rules": list(RULES),
        # the allow-list every submission is held to (base/records/allow.py; rule `not-allowed`): what it may import,
        # call and read, so a proposer knows the boundary before it writes code
        "code": spec.code_policy.model_dump(mode="json"),
    }


def workload_shapes(spec: OpSpec, w: Workload) -> dict:
    """A workload's id, label, axes and the concrete shape and dtype of every tensor."""
    shapes = {t.name: {"shape": list(t.dims(w.axes)), "dtype": spec.tensor_dtype(t, w.dtype).value}
              for t in [*spec.inputs, *spec.outputs]}
    return {"id": w.id, "label": w.label, "axes": dict(w.axes), "dtype": w.dtype.value, "weight": w.weight,
            "tensors": shapes, "bytes_moved": spec.bytes_moved(w.axes, w.dtype)}


def template_params(spec: OpSpec) -> dict:
    """Each starting template's parameters, values and constraints (what its `launch` expects)."""
    return {t.name: {"file": t.file, "params": {p.name: list(p.values) for p in t.params},
                     "constraints": [f"{c.expr}  ({c.reason})" for c in t.constraints]} for t in spec.templates}


__all__ = ["RULES", "launch_signature", "op_interface", "template_params", "workload_shapes"]
