"""Profiling a finished run's trials and baselines on demand (`kernelloop profile --ncu`, a CUDA host with Nsight
Compute): the trial's archived candidate source through `profile_trial`, a baseline through `profile_baseline` (the
op folder's reference, `baselines.py` or a device copy, on inputs from the seed the run timed them with); each
`.ncu-rep` is kept under RUN/profiles/ and the reports are archived (tables `profiles`, `baseline_profiles`).
"""

from __future__ import annotations

from pathlib import Path

from ...core.archive import Archive
from ...base.records import OpSpec, Workload
from .evidence import bench_seed, build_resources
from .explain import (BUILTIN_BASELINES, first_run, recorded_baselines, run_roofs, select_trials, timing_of,
                      workloads_of)


class NcuUnavailable(RuntimeError):
    """`--ncu` was asked for on a host without Nsight Compute or without a CUDA GPU."""


def ncu_problems() -> list[str]:
    """Why Nsight Compute profiling cannot run on this host (empty when it can)."""
    from .ncu_report_adapter import find_ncu
    problems = []
    if find_ncu() is None:
        problems.append("Nsight Compute (ncu) not found: set KERNELLOOP_NCU to its path or put it on PATH")
    try:
        import torch
        cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - a broken torch is "no GPU" here
        cuda = False
    if not cuda:
        problems.append("no CUDA GPU: torch.cuda.is_available() is False (Nsight Compute profiles GPU kernels)")
    return problems


def _op_folder(run: dict, op_dir: Path | None):
    """The op folder the harness loads (inputs, reference, baselines.py), checked against the run's frozen spec."""
    from ...base.builtin import resolve_op
    from ...base.records import sha256_hex
    from ...core.spec import SpecError, load_op
    folder = op_dir if op_dir is not None else resolve_op(run["op"])
    try:
        bundle = load_op(folder)
    except SpecError as e:
        raise LookupError(f"op folder for {run['op']!r}: {e} (pass --op DIR)") from None
    frozen = OpSpec.model_validate(run["spec"])
    for field in ("inputs", "outputs", "scalars", "inputs_policy", "bytes_formula"):
        if getattr(bundle.spec, field) != getattr(frozen, field):
            raise LookupError(f"op folder {bundle.folder}: its spec's {field} differs from the run's frozen spec; "
                              f"pass --op with the op folder the run used")
    notes = []
    ref = run["manifest"].get("reference_sha256") if isinstance(run.get("manifest"), dict) else None
    if ref and sha256_hex(bundle.reference_source) != ref:
        notes.append(f"{bundle.folder / bundle.spec.reference} changed since the run: the eager and torch.compile "
                     f"baselines profiled are the current reference, not the one the run timed")
    return bundle, notes


def _seed(run: dict, workload: Workload, candidate_id: str) -> int:
    return bench_seed(run, workload, candidate_id)


def run_ncu_profiles(archive: Archive, run_dir: Path, trial: str | None = None, baselines: tuple[str, ...] = (),
                     *, op_dir: Path | None = None, timeout_s: float = 600.0, say=print) -> dict:
    """Profile the selected trials and baselines with Nsight Compute and archive the reports.

    Returns {"notes": [...], "failed": [subject, ...]}. Raises NcuUnavailable without ncu or a GPU, LookupError
    on bad input (trial, baseline name, op folder).
    """
    problems = ncu_problems()
    if problems:
        raise NcuUnavailable("; ".join(problems))
    from .report import profile_baseline, profile_trial
    run = first_run(archive)
    spec = OpSpec.model_validate(run["spec"])
    chosen = select_trials(archive.trials(run["id"]), trial)
    bundle, notes = _op_folder(run, op_dir)
    known = sorted(set(BUILTIN_BASELINES) | set(recorded_baselines(archive, run)) | set(_op_baselines(bundle)))
    unknown = [b for b in baselines if b not in known]
    if unknown:
        raise LookupError(f"unknown baseline(s) {unknown}; this run and op know {known}")
    import torch
    here = torch.cuda.get_device_name()
    if run["environment"].get("gpu") and run["environment"]["gpu"] != here:
        notes.append(f"profiled on {here}; the run was timed on {run['environment']['gpu']}: the timing fractions "
                     f"compare two devices")
    failed: list[str] = []
    op_dir_abs = bundle.folder.resolve()
    for t in chosen:
        cand = archive.get_candidate(t.candidate_id)
        w = archive.get_workload(t.workload_id)
        src = run_dir / "sources" / f"{cand.id}.py"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(cand.source)
        ceilings, copy_us, more = run_roofs(archive, run, w.id)
        timed, source = timing_of(archive, run, t)
        say(f"ncu: trial {t.index} ({t.id}) on {w.label} ...")
        report = profile_trial(archive, run_dir, t, op_dir=op_dir_abs, source_file=src.resolve(), config=cand.config,
                               workload=w, spec=spec, seed=_seed(run, w, cand.id), build=build_resources(t),
                               ceilings=ceilings, copy_us=copy_us, timeout_s=timeout_s, timed=timed,
                               timing_source=source, source_page=True)
        if report.kernel is None:
            failed.append(f"trial {t.index} ({t.id})")
    by_workload = {t.workload_id: t for t in chosen}
    for w in workloads_of(archive, chosen):
        ceilings, copy_us, _ = run_roofs(archive, run, w.id)
        measured = archive.baselines(run["id"], w.id)
        for name in baselines:
            say(f"ncu: baseline {name} on {w.label} ...")
            report = profile_baseline(archive, run_dir, run["id"], name, op_dir=op_dir_abs, workload=w, spec=spec,
                                      seed=_seed(run, w, by_workload[w.id].candidate_id),
                                      measurement=measured.get(name, (None, ""))[0], ceilings=ceilings,
                                      copy_us=copy_us, timeout_s=timeout_s)
            if report.kernel is None:
                failed.append(f"baseline {name} on {w.label}")
    return {"notes": notes, "failed": failed}


def _op_baselines(bundle) -> list[str]:
    """Names in the op's baselines.py BASELINES table (factories import their libraries lazily)."""
    path = bundle.folder / "baselines.py"
    if not path.is_file():
        return []
    import importlib.util
    mod_spec = importlib.util.spec_from_file_location("kernelloop_profile_baselines", path)
    mod = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(mod)
    except Exception:  # noqa: BLE001 - an unimportable table names nothing
        return []
    return sorted(getattr(mod, "BASELINES", {}))
