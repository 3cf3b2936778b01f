"""A FlashInfer-Trace dataset on disk: the layout, reading one, and exporting a kernelloop run archive into one.

    definitions/<op_type>/<definition>.json
    workloads/<op_type>/<definition>.jsonl                   workload entries (Traces without solution)
    solutions/<author>/<op_type>/<definition>/<solution>.json
    traces/<author>/<op_type>/<definition>.jsonl

(flashinfer-bench's TraceSet.from_path reads every *.json / *.jsonl under those four folders; its validator
checks these path components against the records' fields.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...base.records import OpSpec, Status, sha256_hex
from ...base.records import Workload as KlWorkload
from ...core.spec import OpBundle, SpecError, load_op
from . import flashinfer_trace as fi
from .errors import InteropError, read_json, read_jsonl
from .export import (definition_name, export_definition, export_solution, export_trace, export_workloads,
                     hardware_name)


def definition_path(root: Path, d: fi.Definition) -> Path:
    return root / "definitions" / d.op_type / f"{d.name}.json"


def workloads_path(root: Path, d: fi.Definition) -> Path:
    return root / "workloads" / d.op_type / f"{d.name}.jsonl"


def solution_path(root: Path, d: fi.Definition, s: fi.Solution) -> Path:
    return root / "solutions" / s.author / d.op_type / d.name / f"{s.name}.json"


def traces_path(root: Path, d: fi.Definition, author: str) -> Path:
    return root / "traces" / author / d.op_type / f"{d.name}.jsonl"


@dataclass
class Dataset:
    """What a dataset folder holds, by definition name."""

    root: Path
    definitions: dict[str, fi.Definition] = field(default_factory=dict)
    workloads: dict[str, list[fi.Trace]] = field(default_factory=dict)
    solutions: dict[str, list[fi.Solution]] = field(default_factory=dict)
    traces: dict[str, list[fi.Trace]] = field(default_factory=dict)


def load_dataset(root: str | Path) -> Dataset:
    """Every record under `root`'s four folders; InteropError naming the file (and line) of a bad one."""
    root = Path(root)
    ds = Dataset(root)
    for p in sorted((root / "definitions").rglob("*.json")):
        d = read_json(fi.Definition, p)
        if d.name in ds.definitions:
            raise InteropError("name", f"duplicate definition {d.name!r}", str(p))
        ds.definitions[d.name] = d
    for p in sorted((root / "solutions").rglob("*.json")):
        s = read_json(fi.Solution, p)
        ds.solutions.setdefault(s.definition, []).append(s)
    for folder, into, workload_only in (("workloads", ds.workloads, True), ("traces", ds.traces, False)):
        for p in sorted((root / folder).rglob("*.jsonl")):
            for i, t in enumerate(read_jsonl(fi.Trace, p)):
                if t.is_workload_trace != workload_only:
                    raise InteropError("solution", "a workload entry has no solution or evaluation" if workload_only
                                       else "a trace needs a solution and an evaluation", f"{p}:{i + 1}")
                into.setdefault(t.definition, []).append(t)
    return ds


def _dump(model: fi._Model) -> str:
    return model.model_dump_json(indent=2) + "\n"


def _op_bundle(run: dict, op_dir: Path | None) -> OpBundle:
    """The run's frozen spec with the reference source the run verified against (checked by its hash)."""
    from ...base.builtin import resolve_op
    folder = op_dir if op_dir is not None else resolve_op(run["op"])
    try:
        bundle = load_op(folder)
    except SpecError as e:
        raise InteropError("op", f"the op folder of {run['op']!r}: {e} (pass --op DIR)") from None
    frozen = OpSpec.model_validate(run["spec"])
    want = (run.get("manifest") or {}).get("reference_sha256")
    if want and sha256_hex(bundle.reference_source) != want:
        raise InteropError("reference", f"{bundle.folder / bundle.spec.reference} changed since run {run['id']}: "
                                        f"the Definition must carry the reference its trials were verified against")
    return OpBundle(spec=frozen, folder=bundle.folder, reference_source=bundle.reference_source,
                    template_sources=dict(bundle.template_sources), spec_files=bundle.spec_files)


@dataclass
class ExportReport:
    """What `export_run` wrote."""

    files: list[Path] = field(default_factory=list)
    definitions: int = 0
    workloads: int = 0
    solutions: int = 0
    traces: int = 0
    skipped: list[str] = field(default_factory=list)


def export_run(archive, out: str | Path, *, op_dir: Path | None = None, op_type: str | None = None,
               author: str = "kernelloop", destination_passing_style: bool = True) -> ExportReport:
    """Write every run of an open `Archive` as a dataset under `out`: the Definitions of the dtypes its workloads
    use, the workloads, one Solution per (candidate, Definition) tried and one Trace per trial. Files are
    rewritten, not appended to, so exporting twice gives the same dataset."""
    out = Path(out)
    report = ExportReport()
    texts: dict[Path, str] = {}
    lines: dict[Path, dict[str, str]] = {}  # jsonl path -> key -> line (keeps order, drops repeats)
    for run in archive.runs():
        bundle = _op_bundle(run, op_dir)
        spec = bundle.spec
        env = run["environment"]
        wls = [KlWorkload.model_validate(w) for w in run["options"].get("workloads", [])]
        stored = {w.id: w for w in wls}
        trials = archive.trials(run["id"])
        for t in trials:
            if t.workload_id not in stored:
                w = archive.get_workload(t.workload_id)
                if w is not None:
                    stored[w.id] = w
        defs = {}
        for d in dict.fromkeys(w.dtype for w in stored.values()):
            defs[definition_name(spec, d)] = export_definition(bundle, d, op_type=op_type)
        for d in defs.values():
            texts[definition_path(out, d)] = _dump(d)
        for wt in export_workloads(list(stored.values()), spec):
            lines.setdefault(workloads_path(out, defs[wt.definition]), {})[wt.workload.uuid] = wt.model_dump_json()
        for t in trials:
            c = archive.get_candidate(t.candidate_id)
            w = stored.get(t.workload_id)
            if c is None or w is None:
                report.skipped.append(f"trial {t.id}: its {'candidate' if c is None else 'workload'} is not archived")
                continue
            d = defs[definition_name(spec, w.dtype)]
            if t.verdict.status is Status.PASSED and t.measurement is None:
                report.skipped.append(f"trial {t.id}: PASSED but not timed (a PASSED evaluation needs performance)")
                continue
            sol = export_solution(c, spec, w.dtype, author=author, target_hardware=[hardware_name(env)],
                                  destination_passing_style=destination_passing_style)
            texts[solution_path(out, d, sol)] = _dump(sol)
            tr = export_trace(t, w, c, env, spec)
            lines.setdefault(traces_path(out, d, author), {})[f"{run['id']}/{t.id}"] = tr.model_dump_json()
    for p, text in sorted(texts.items()):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        report.files.append(p)
    for p, entries in sorted(lines.items()):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(line + "\n" for line in entries.values()))
        report.files.append(p)
    report.definitions = sum(1 for p in texts if p.parts[len(out.parts)] == "definitions")
    report.solutions = sum(1 for p in texts if p.parts[len(out.parts)] == "solutions")
    report.workloads = sum(len(v) for p, v in lines.items() if p.parts[len(out.parts)] == "workloads")
    report.traces = sum(len(v) for p, v in lines.items() if p.parts[len(out.parts)] == "traces")
    return report
