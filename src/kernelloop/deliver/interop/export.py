"""kernelloop records -> FlashInfer-Trace records.

A kernelloop OpSpec is generic over its `dtypes`; a FlashInfer Definition fixes every tensor's dtype. So one op
exports as one Definition per dtype, named `<op>_<dtype>` (`rmsnorm_fp16`), and each workload, solution and trace
names the Definition of its dtype.

What maps (kernelloop -> FlashInfer):
- op name, description -> Definition.name (+ `_<dtype>`), description; `op_type` is the op name unless given.
- axes -> var axes with their description; an axis with min == max -> a const axis of that value; other
  bounds (min > 1, max) -> Definition.constraints (`D >= 64`, `D <= 128`).
- inputs, outputs (in call order) -> inputs, outputs with shapes in axis names; dtype 'op' -> the Definition's
  dtype, explicit dtypes as spelled by the format (fp16 -> float16, bf16 -> bfloat16, fp32 -> float32).
- scalars (eps, ...) -> inputs after the tensors with shape None and dtype float32; workloads give their values.
- reference.py -> Definition.reference: the file verbatim plus `run(*inputs)` calling `reference`.
- Workload -> Workload: var axes, every tensor input `random`, every scalar `scalar`; uuid = the workload id.
- Candidate (template source + config) -> Solution: one self-contained Triton file (solution_code.py), its entry
  point in destination passing style by default, value-returning on request.
- Trial -> Trace: verdict status -> evaluation status (STATUS_MAP), error metrics -> correctness, kernel-time
  median -> latency, the 'eager' ratio (the reference on op-dtype inputs) -> speedup and reference latency.

What does not map (lost on export): tolerances, bytes/FLOPs formulas, the inputs policy and each input's `init`,
held-out axes, templates' spaces and constraints (only the chosen configuration travels, in a Solution),
workload weights, the timing policy's details beyond what the log line says, confidence intervals, A/A noise,
baselines other than eager, profiles.
"""

from __future__ import annotations

import ast
from datetime import datetime, timezone

from ...base.records import Candidate, DType, OpSpec, Status, Trial
from ...base.records import Environment as KlEnvironment
from ...base.records.device import Device
from ...base.records import Workload as KlWorkload
from ...core.spec import OpBundle
from . import flashinfer_trace as fi
from .errors import InteropError
from .solution_code import check_identifier, solution_source
from ...base import pyast

FI_DTYPE = {DType.fp16: fi.DType.FLOAT16, DType.bf16: fi.DType.BFLOAT16, DType.fp32: fi.DType.FLOAT32,
            DType.int8: fi.DType.INT8, DType.int32: fi.DType.INT32, DType.int64: fi.DType.INT64,
            DType.bool_: fi.DType.BOOL}

STATUS_MAP: dict[Status, fi.EvaluationStatus] = {
    Status.PASSED: fi.EvaluationStatus.PASSED,
    Status.COMPILE_ERROR: fi.EvaluationStatus.COMPILE_ERROR,
    Status.WRONG_SHAPE: fi.EvaluationStatus.INCORRECT_SHAPE,      # kernelloop's covers shape, dtype and aliasing
    Status.WRONG_VALUES: fi.EvaluationStatus.INCORRECT_NUMERICAL,
    Status.WRONG_NONFINITE: fi.EvaluationStatus.INCORRECT_NUMERICAL,  # as flashinfer-bench files inf/nan outputs
    Status.WRONG_INCOMPLETE: fi.EvaluationStatus.INCORRECT_NUMERICAL,  # unwritten elements hold NaN poison
    Status.WRONG_INPUT_MUTATED: fi.EvaluationStatus.INCORRECT_NUMERICAL,
    Status.WRONG_NONDETERMINISTIC: fi.EvaluationStatus.INCORRECT_NUMERICAL,
    Status.RUNTIME_ERROR: fi.EvaluationStatus.RUNTIME_ERROR,
    Status.TIMEOUT: fi.EvaluationStatus.TIMEOUT,
    Status.REJECTED: fi.EvaluationStatus.RUNTIME_ERROR,  # no such status in the format; the log says REJECTED
    Status.TAMPERED: fi.EvaluationStatus.RUNTIME_ERROR,  # an edited archive row (core/archive/integrity.py); the log says so
}
"""kernelloop verdict -> FlashInfer evaluation status. Every evaluation's log starts with the kernelloop status,
so the finer kernelloop statuses (and REJECTED, which the format lacks) stay readable."""


def _dtype(d: DType | str | None, spec: OpSpec) -> DType:
    if d is None:
        return spec.dtypes[0]
    try:
        d = DType(d)
    except ValueError:
        raise InteropError("dtype", f"{d!r} is not a kernelloop dtype ({', '.join(x.value for x in DType)})") from None
    if d not in spec.dtypes:
        raise InteropError("dtype", f"{d.value} is not among {spec.name}'s dtypes {[x.value for x in spec.dtypes]}")
    return d


def definition_name(spec: OpSpec, dtype: DType | str | None = None) -> str:
    """The Definition name of `spec` at `dtype`: `<op>_<dtype>`."""
    return f"{spec.name}_{_dtype(dtype, spec).value}"


def _reference_source(source: str, spec: OpSpec) -> str:
    tree = pyast.parse(source)
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "run" for n in tree.body):
        raise InteropError("reference", "the reference file already defines `run`, the FlashInfer entry point")
    tensors = [check_identifier(t.name, f"inputs.{t.name}") for t in spec.inputs]
    scalars = [check_identifier(s, f"scalars.{s}") for s in spec.scalars]
    call = ", ".join(tensors + [f"{s}={s}" for s in scalars])
    params = tensors + [f"{s}={spec.scalars[s]!r}" for s in scalars]
    return (source.rstrip("\n") + "\n\n\n"
            "# FlashInfer-Trace entry point (added by kernelloop's export): the inputs in the Definition's order;\n"
            "# the scalars' defaults are the op's values.\n"
            f"def run({', '.join(params)}):\n"
            f"    return reference({call})\n")


def export_definition(bundle: OpBundle, dtype: DType | str | None = None, *,
                      op_type: str | None = None) -> fi.Definition:
    """The Definition of the op at one dtype (default: its first)."""
    spec = bundle.spec
    d = _dtype(dtype, spec)
    axes: dict[str, fi.AxisConst | fi.AxisVar] = {}
    constraints = []
    for name, a in spec.axes.items():
        desc = a.description or None
        if a.max is not None and a.min == a.max:
            axes[name] = fi.AxisConst(value=a.min, description=desc)
            continue
        axes[name] = fi.AxisVar(description=desc)
        if a.min > 1:
            constraints.append(f"{name} >= {a.min}")
        if a.max is not None:
            constraints.append(f"{name} <= {a.max}")
    from ...core.spec.loader import domain_constraints
    constraints += domain_constraints(spec)   # e.g. attention's 'H % HKV == 0': the op's domain, not a bound

    def tensor(t) -> fi.TensorSpec:
        if not isinstance(t.init, str):
            raise InteropError(f"inputs.{t.name}", f"drawn by a {t.init.kind} generator: a FlashInfer-Trace "
                               f"workload draws random tensors, which would lose the data's structure")
        if (expr := next((a for a in t.shape if a not in spec.axes), None)) is not None:
            raise InteropError(f"tensors.{t.name}", f"shape entry {expr!r} is an expression: the FlashInfer-Trace "
                               f"format names axes only")
        dt = spec.tensor_dtype(t, d)
        if dt not in FI_DTYPE:
            raise InteropError(f"tensors.{t.name}", f"{dt.value} has no FlashInfer-Trace dtype here")
        return fi.TensorSpec(shape=list(t.shape), dtype=FI_DTYPE[dt])
    inputs = {t.name: tensor(t) for t in spec.inputs}
    for s in spec.scalars:
        if s in inputs:
            raise InteropError(f"scalars.{s}", "has the name of an input tensor")
        inputs[s] = fi.TensorSpec(shape=None, dtype=fi.DType.FLOAT32, description="scalar argument")
    outputs = {t.name: tensor(t) for t in spec.outputs}
    try:
        return fi.Definition(name=definition_name(spec, d), op_type=op_type or spec.name, axes=axes, inputs=inputs,
                             outputs=outputs, reference=_reference_source(bundle.reference_source, spec),
                             description=spec.description or None, constraints=constraints)
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        raise InteropError("definition", str(e)) from None


def export_definitions(bundle: OpBundle, *, op_type: str | None = None) -> list[fi.Definition]:
    """One Definition per dtype of the op."""
    return [export_definition(bundle, d, op_type=op_type) for d in bundle.spec.dtypes]


def export_workload(workload: KlWorkload, spec: OpSpec) -> fi.Workload:
    """The workload's var axes; tensor inputs random, scalars by value; uuid = kernelloop's workload id."""
    const = {k for k, a in spec.axes.items() if a.max is not None and a.min == a.max}
    inputs: dict[str, fi.RandomInput | fi.ScalarInput] = {t.name: fi.RandomInput() for t in spec.inputs}
    inputs.update({k: fi.ScalarInput(value=v) for k, v in spec.scalars.items()})
    return fi.Workload(axes={k: v for k, v in workload.axes.items() if k not in const}, inputs=inputs,
                       uuid=workload.id)


def export_workloads(workloads: list[KlWorkload], spec: OpSpec) -> list[fi.Trace]:
    """Workload entries (Traces without solution and evaluation), each naming the Definition of its dtype."""
    return [fi.Trace(definition=definition_name(spec, w.dtype), workload=export_workload(w, spec)) for w in workloads]


def solution_name(candidate: Candidate, definition: str) -> str:
    """Unique and stable: the Definition, the template and the candidate's content address."""
    return f"{definition}__kl_{candidate.template}_{candidate.id.removeprefix('c-')}"


def hardware_name(env: KlEnvironment | dict | None) -> str:
    """'NVIDIA_H200' style for a GPU, 'cpu_triton_interpreter' for the interpreter."""
    if env is None:
        return "cuda"
    env = env if isinstance(env, dict) else env.model_dump()
    gpu = (env.get("gpu") or "").strip()
    if gpu:
        return "_".join(gpu.split())
    device = Device.named(env.get("device"))
    return "cpu_triton_interpreter" if device is not None and device.is_interpret else (env.get("device") or "unknown")


def export_solution(candidate: Candidate, spec: OpSpec, dtype: DType | str | None = None, *, author: str = "kernelloop",
                    target_hardware: list[str] | None = None, destination_passing_style: bool = True) -> fi.Solution:
    """The candidate as a one-file Triton solution of `spec`'s Definition at `dtype`: its template source verbatim,
    the configuration bound, and an entry point `main.py::run` (`run2`, ... where the source has a `run`) that
    allocates the op's scratch (if any) and calls `launch`. By default in destination passing style (the format's default, and how kernelloop timed it: the
    outputs come allocated, as its last arguments); with `destination_passing_style=False` it allocates and returns
    the outputs (flashinfer-bench then times the allocations too)."""
    if candidate.op != spec.name:
        raise InteropError("candidate.op", f"the candidate is for {candidate.op!r}, the spec is {spec.name!r}")
    d = _dtype(dtype, spec)
    dname = definition_name(spec, d)
    src, entry = solution_source(candidate, spec, d, destination_passing_style=destination_passing_style,
                                 definition_name=dname)
    desc = (f"kernelloop template `{candidate.template}` at {candidate.config!r}; proposer {candidate.proposer}"
            + (f"; hypothesis: {candidate.hypothesis}" if candidate.hypothesis else ""))
    return fi.Solution(
        name=solution_name(candidate, dname), definition=dname, author=author, description=desc,
        spec=fi.BuildSpec(language=fi.SupportedLanguages.TRITON, target_hardware=target_hardware or ["cuda"],
                          entry_point=f"main.py::{entry}", dependencies=["torch", "triton"],
                          destination_passing_style=destination_passing_style),
        sources=[fi.SourceFile(path="main.py", content=src)])


def _environment(env: KlEnvironment | dict) -> fi.Environment:
    e = env if isinstance(env, dict) else env.model_dump()
    libs = {k: str(e[k]) for k in ("torch", "triton", "cuda", "python", "driver") if e.get(k)}
    return fi.Environment(hardware=hardware_name(e), libs=libs)


def _timestamp(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _correctness(trial: Trial) -> fi.Correctness:
    v = trial.verdict
    extra = {"kernelloop_status": v.status.value}
    if v.case:
        extra["case"] = v.case
    if not v.metrics:  # e.g. a mutated input, or unwritten (NaN-poisoned) elements: no error figure was taken
        return fi.Correctness(max_relative_error=float("nan"), max_absolute_error=float("nan"), extra=extra)
    extra["outputs"] = {m.output: {"max_abs": m.max_abs, "max_rel": m.max_rel, "mismatched": m.mismatched,
                                   "total": m.total, "error_cap_ratio": m.error_cap_ratio} for m in v.metrics}
    return fi.Correctness(max_relative_error=max(m.max_rel for m in v.metrics),
                          max_absolute_error=max(m.max_abs for m in v.metrics), extra=extra)


def _performance(trial: Trial) -> fi.Performance:
    m = trial.measurement
    latency = m.kernel.median_us / 1000.0
    eager = next((r for r in m.ratios if r.baseline == "eager"), None)
    if eager is None:  # no reference timing: the format's defaults (0) say "not measured"
        return fi.Performance(latency_ms=latency)
    return fi.Performance(latency_ms=latency, reference_latency_ms=latency * eager.speedup,
                          speedup_factor=eager.speedup)


def _log(trial: Trial) -> str:
    v = trial.verdict
    lines = [f"kernelloop trial {trial.id} (run {trial.run_id}, index {trial.index}): {v.status.value}"
             + (f": {v.message}" if v.message else "")]
    if v.case:
        lines.append(f"case: {v.case}")
    m = trial.measurement
    if m is not None:
        eager = next((r for r in m.ratios if r.baseline == "eager"), None)
        lines.append(f"latency: median kernel time {m.kernel.median_us:.3f} us, {m.policy.confidence:.0%} CI "
                     f"[{m.kernel.ci_low_us:.3f}, {m.kernel.ci_high_us:.3f}] over {m.kernel.n} samples, timing policy "
                     f"{m.policy.name!r} ({m.policy.clock}, L2 flush {m.policy.flush_bytes} B)"
                     + (f"; vs eager reference {eager.speedup:.4f}x [{eager.ci_low:.4f}, {eager.ci_high:.4f}] "
                        f"{eager.verdict.value}" if eager else ""))
    if v.log:
        lines.append(v.log)
    return "\n".join(lines)


def export_trace(trial: Trial, workload: KlWorkload, candidate: Candidate, environment: KlEnvironment | dict,
                 spec: OpSpec) -> fi.Trace:
    """The trial as a Trace of the candidate's Solution on the workload (see STATUS_MAP).

    A PASSED trial without a measurement has no FlashInfer form (PASSED requires performance): InteropError."""
    if trial.candidate_id != candidate.id:
        raise InteropError("trial.candidate_id", f"{trial.candidate_id} is not candidate {candidate.id}")
    if trial.workload_id != workload.id:
        raise InteropError("trial.workload_id", f"{trial.workload_id} is not workload {workload.id}")
    status = STATUS_MAP[trial.verdict.status]
    if status is fi.EvaluationStatus.PASSED and trial.measurement is None:
        raise InteropError("trial.measurement", "a PASSED trial that was not timed cannot be a PASSED evaluation "
                                                "(the format requires performance)")
    dname = definition_name(spec, workload.dtype)
    has_c = status in (fi.EvaluationStatus.PASSED, fi.EvaluationStatus.INCORRECT_NUMERICAL)
    evaluation = fi.Evaluation(
        status=status, environment=_environment(environment), timestamp=_timestamp(trial.finished), log=_log(trial),
        correctness=_correctness(trial) if has_c else None,
        performance=_performance(trial) if status is fi.EvaluationStatus.PASSED else None)
    return fi.Trace(definition=dname, workload=export_workload(workload, spec),
                    solution=solution_name(candidate, dname), evaluation=evaluation)
