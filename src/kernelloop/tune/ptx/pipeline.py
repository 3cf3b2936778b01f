"""`kernelloop ptx RUN|KERNEL`: from a run's winners (or one candidate) to proved PTX-level edits.

recover (the winner rebuilt for sm_90, its PTX and cubin kept) -> round trip (Triton's ptxas reproduces the cubin;
a kernel that does not is never edited) -> hot windows (a profile's source page: `--profile FILE`, else the run's
`profiles/<trial>.source.csv` where `kernelloop profile --ncu` kept one; without either, or when the page is of
other SASS, the static estimate from the SASS; each kernel's notes say which) -> propose (the rules, then the LLM)
-> static checks (the ABI, declarations and resources; ptxas's errors verbatim; whether ptxas made other SASS at
all) -> prove (the differential proof beside the original, the verifier, timing: `prove.py`) -> archive
(the run's archive: each edit with its parent and diff, each proof).
"""

from __future__ import annotations

import base64
import functools
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from ...base.records import Candidate, Record, Workload
from ...base.records.device import DeviceKind
from .checks import check_edit
from .patch import edited_ptx, unified
from .prove import ProofReport
from .records import HotWindow, PtxCandidate, RecoveredKernel, RoundTrip, Violation


class PtxError(ValueError):
    """Bad input for the PTX pipeline (the message says what)."""


@dataclass
class Target:
    """A source-level kernel to work below: its candidate and workload, and the run it came from (if any)."""

    candidate: Candidate
    workload: Workload
    run_dir: Path | None = None
    run_id: str = ""
    trial_id: str = ""

    @property
    def label(self) -> str:
        return f"{self.candidate.op} {self.candidate.label} on {self.workload.label}"


class EditCheck(Record):
    """A proposed edit after the static checks: refused (with the rules it breaks), or accepted for the proof."""

    candidate: PtxCandidate
    violations: list[Violation] = Field(default_factory=list)
    sass_changed: bool | None = Field(None, description="ptxas made other SASS than the original's")
    diff: str = ""

    @property
    def accepted(self) -> bool:
        return not self.violations


class KernelWork(Record):
    """One kernel of a target: its recovery, round trip, windows, and the edits proposed and checked."""

    name: str
    recoverable: bool
    reason: str = ""
    round_trip: RoundTrip | None = None
    windows: list[HotWindow] = Field(default_factory=list)
    edits: list[EditCheck] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="Where the windows' weights came from; the LLM's "
                                                               "windows that gave no edit, and why")


class TargetReport(Record):
    op: str
    template: str
    config: dict
    workload: str
    parent_candidate_id: str
    run_id: str = ""
    kernels: list[KernelWork] = Field(default_factory=list)
    proofs: list[ProofReport] = Field(default_factory=list, description="The proof of each edit proved")
    error: str = ""


def open_archive(run_dir: Path):
    from ...core.archive import Archive
    path = run_dir / "archive.sqlite"
    if not path.is_file():
        raise PtxError(f"{run_dir}: no archive.sqlite (is it a run folder?)")
    return Archive(path)


def targets(path: Path, workload: Workload | None = None) -> list[Target]:
    """A run folder's winners (each workload's best PASSED trial) or one candidate JSON (`workload`, else the op's
    first workload)."""
    path = Path(path)
    if path.is_dir():
        from ..select.pareto import best_per_workload
        archive = open_archive(path)
        try:
            runs = archive.runs()
            if not runs:
                raise PtxError(f"{path}: the archive holds no run")
            run = runs[0]
            out = []
            for wid, trial in sorted(best_per_workload(archive.trials(run["id"])).items()):
                out.append(Target(candidate=archive.get_candidate(trial.candidate_id),
                                  workload=archive.get_workload(wid), run_dir=path, run_id=run["id"],
                                  trial_id=trial.id))
            if not out:
                raise PtxError(f"{path}: the run has no PASSED, measured trial")
            return out
        finally:
            archive.close()
    if path.suffix != ".json":
        raise PtxError(f"{path}: give a run folder or a candidate JSON (a .ptx, .cubin or cache entry has no "
                       f"source-level kernel to launch: `kernelloop ptx recover` reads those)")
    try:
        cand = Candidate.from_json(path.read_text())
    except ValueError as e:
        raise PtxError(f"{path}: not a candidate JSON: {str(e)[:300]}") from None
    if workload is None:
        from ...base.builtin import resolve_op
        from ...core.spec import load_op
        from ...core.spec.loader import load_workloads
        bundle = load_op(resolve_op(cand.op))
        workload = load_workloads(bundle.folder / "workloads.toml", bundle.spec)[0]
    return [Target(candidate=cand, workload=workload.model_copy(update={"op": cand.op}))]


def recover_target(target: Target) -> list[RecoveredKernel]:
    """The target's kernels built for sm_90 (each distinct candidate and workload built once per process)."""
    kernels, why = _built(target.candidate.to_json(), target.workload.to_json())
    if why:
        raise PtxError(f"{target.label}: {why}")
    return kernels


@functools.lru_cache(maxsize=32)
def _built(candidate_json: str, workload_json: str) -> tuple[list[RecoveredKernel], str]:
    from .recover import from_candidate
    return from_candidate(Candidate.from_json(candidate_json), Workload.from_json(workload_json))


def check_edits(kernel: RecoveredKernel, edits: list[PtxCandidate]) -> list[EditCheck]:
    """The static checks of each edit (assembled with Triton's ptxas), and whether its SASS differs."""
    from .roundtrip import sass
    from .tools import assemble
    original_sass = sass(base64.b64decode(kernel.cubin_b64)) if kernel.cubin_b64 else None
    out = []
    for c in edits:
        text = edited_ptx(c, kernel.ptx)
        violations = check_edit(kernel.ptx, text, metadata=kernel.metadata)
        changed = None
        if not violations and original_sass is not None:
            asm = assemble(text, 90, kernel.metadata)
            changed = sass(asm.cubin) != original_sass if asm.ok else None
        out.append(EditCheck(candidate=c, violations=violations, sass_changed=changed,
                             diff=unified(kernel.ptx, text, f"{kernel.name}.ptx")))
    return out


@dataclass
class Options:
    rules: list[str] | None = None
    top_windows: int = 6
    llm: object | None = None          # an LlmPtxProposer (tune/propose/llm/ptx.py) or None
    prove: bool = False
    executor: str = "gpu"              # gpu | stand-in
    checks: int = 8
    time_it: bool = True
    seed: int = 0
    only_changed_sass: bool = True     # prove only edits whose SASS differs from the original's
    max_proofs: int | None = None
    profile: list | None = None        # a source page (profile.source_page.SourceKernel list) for every target
    profile_from: str = ""             # where it came from (the notes say)
    profile_metric: str | None = None  # its column (default: warp-state samples, else instructions executed)
    notes: list[str] = field(default_factory=list)


def _profile_of(target: Target, opts: Options) -> tuple[list | None, str, list[str]]:
    """The source page the target's windows are weighed with: the one given, else the one `kernelloop profile
    --ncu` kept for the target's trial in its run (RUN/profiles/<trial>.source.csv), else none."""
    if opts.profile is not None:
        return opts.profile, opts.profile_from, []
    if target.run_dir is None or not target.trial_id:
        return None, "", ["no source page given (--profile): windows from the static estimate"]
    from ..profile.ncu_csv import NcuParseError
    from ..profile.report import source_page_path
    from ..profile.source_page import read_source_csv
    path = source_page_path(target.run_dir, target.trial_id)
    if not path.is_file():
        return None, "", [f"no source page given or kept ({path.relative_to(target.run_dir)}): windows from the "
                          f"static estimate"]
    try:
        return read_source_csv(path), str(path), []
    except (NcuParseError, OSError) as e:
        return None, "", [f"{path}: {e}; windows from the static estimate"]


def work(target: Target, opts: Options) -> tuple[TargetReport, list[tuple[RecoveredKernel, EditCheck]]]:
    """Recover, round-trip, window, propose and check one target (no GPU needed)."""
    from .roundtrip import round_trip
    from .rules import propose
    from .windows import ProfileMismatch, hot_windows, profile_samples
    c = target.candidate
    rep = dict(op=c.op, template=c.template, config=c.config, workload=target.workload.label,
               parent_candidate_id=c.id, run_id=target.run_id)
    try:
        kernels = recover_target(target)
    except PtxError as e:
        return TargetReport(**rep, error=str(e)), []
    page, page_from, page_notes = _profile_of(target, opts)
    works, accepted = [], []
    for k in kernels:
        if not k.recoverable:
            works.append(KernelWork(name=k.name, recoverable=False, reason=k.reason))
            continue
        rt = round_trip(k)
        if not rt.ok:
            works.append(KernelWork(name=k.name, recoverable=True, round_trip=rt,
                                    reason="the round trip differs: not edited"))
            continue
        notes, profile = list(page_notes), None
        if page is not None:
            try:
                profile = profile_samples(k, page, opts.profile_metric)
                notes += [f"windows weighed by {profile.metric} from {page_from} ({profile.results} profiled "
                          f"result(s))", *profile.notes]
            except ProfileMismatch as e:
                notes.append(f"{page_from}: {e}; windows from the static estimate")
        windows = hot_windows(k, profile)
        edits = propose(k, parent=c.id, op=c.op, rules=opts.rules, windows=windows)
        if opts.llm is not None:
            before = len(opts.llm.errors)
            edits += opts.llm.propose(k, windows, parent=c.id, op=c.op, profile=profile)
            notes += [f"{opts.llm.name}: no edit for {e}" for e in opts.llm.errors[before:]]
        edits = [e.model_copy(update={"parent_trial_id": target.trial_id}) for e in edits]
        checked = check_edits(k, edits)
        works.append(KernelWork(name=k.name, recoverable=True, round_trip=rt, windows=windows[:opts.top_windows],
                                edits=checked, notes=notes))
        accepted += [(k, e) for e in checked if e.accepted and (e.sass_changed is not False or
                                                                not opts.only_changed_sass)]
    return TargetReport(**rep, kernels=works), accepted


def prove_target(target: Target, accepted: list[tuple[RecoveredKernel, EditCheck]], opts: Options,
                 executor_factory=None) -> list:
    """The proof of each accepted edit (`opts.executor`: gpu, in a process per edit, or the CPU stand-in), each
    edit and proof archived in the target's run."""
    from ...base.builtin import resolve_op
    from ...core.spec import load_op
    from .prove import proof_cases, prove
    bundle = load_op(resolve_op(target.candidate.op))
    secret = secrets.token_hex(16)
    device = (DeviceKind.CUDA if opts.executor == "gpu" else DeviceKind.INTERPRET).value
    reports = []
    for kernel, check in accepted[:opts.max_proofs]:
        cand = check.candidate
        cases = proof_cases(bundle, target.candidate, target.workload, cand.id, secret, opts.checks, device=device)
        if opts.executor == "gpu":
            from .gpu import prove_isolated
            report = prove_isolated(cand, kernel.ptx, op_dir=bundle.folder, template_source=target.candidate.source,
                                    config=target.candidate.config, cases=cases, metadata=kernel.metadata,
                                    original_cubin=base64.b64decode(kernel.cubin_b64) if kernel.cubin_b64 else None,
                                    time_it=opts.time_it, seed=opts.seed)
        else:
            executor = (executor_factory or _stand_in)(bundle, target, cand)
            report = prove(cand, kernel.ptx, bundle.spec, bundle.folder / bundle.spec.reference, executor, cases,
                           metadata=kernel.metadata, time_it=opts.time_it, seed=opts.seed,
                           sass_changed=lambda _e, s=check.sass_changed: s)
        reports.append(report)
        if target.run_dir is not None:
            from .archive import put_candidate, put_proof
            archive = open_archive(target.run_dir)
            try:
                put_candidate(archive, cand, kernel.ptx)
                put_proof(archive, target.run_id, target.workload.id, report)
            finally:
                archive.close()
    return reports


def _stand_in(bundle, target: Target, cand: PtxCandidate):
    from .prove import StandInExecutor
    return StandInExecutor(bundle.spec, target.candidate.source, target.candidate.config)
