"""`kernelloop export RUN [RUN ...] --out DIR`: a self-contained, versioned package from runs' PASSED winners.

Layout of a package:

    kernelloop-package.json      PackageManifest: ops, runs, environment, sha256 of every other file
    ops/<op>/spec.json           the op's spec (tensors, axes, scalars, tolerances)
    ops/<op>/reference.py        the reference, the fallback of every input no entry takes
    ops/<op>/dispatch.json       DispatchTable: disjoint guards → (template, configuration)
    ops/<op>/kernels/*.py        the kernel sources the entries launch
    audit/<op>.json              AuditTrail: the trials behind each entry, the export's own verifications,
                                 compute-sanitizer's outcome for each winner's kernel

The op folder the run was made from must still be the one on disk (its spec, reference and templates' sha256 equal
the run's manifest): a package is built from exactly what was verified.

Each winner's kernel runs under compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on a small shape of
its workload before it is packaged (tune/select/sanitize.py): findings leave it out, the tool's report in the audit;
without the tool or CUDA, or for a run made in Triton's interpreter, the audit records that it did not run and why.
A winner the run's own sanitizer rejected before confirmation is replaced by the run's next fastest candidate.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...base.version import __version__
from ...core.archive import Archive
from ...base.records import Candidate, OpSpec, sha256_hex
from ...tune.select.pareto import best_per_workload
from ...tune.select.sanitize import (SANITIZE_EVENT, Sanitizer, accept_for, default_sanitizer, off, rejected,
                               sanitize_candidate, without_rejected)
from ...core.spec import SpecError, load_op
from .build import (ExportError, ShapeVerifier, TableBuild, Winner, arch_of, build_table, parse_extend,
                    unused_extends)
from .runtime import manifest_digest
from .signing import load_signing_key, sign
from .records import (MANIFEST_FILE, AuditTrail, ExportCheck, MeasuredOn, PackagedOp, PackageManifest,
                      SanitizerAudit, TrialRecord)


@dataclass
class ExportOptions:
    out: Path
    name: str = "kernelloop-package"
    version: str = "0.1.0"
    ops_root: Path | None = None         # where the runs' op folders are (None: ./ops/<op>, else the built-in op)
    extend: list[str] = field(default_factory=list)   # 'AXIS=LO:HI' (every op with that axis) or 'OP.AXIS=LO:HI'
    ranges: bool = True                  # False: exact guards at the measured shapes only
    interior: int = 3                    # seeded interior points verified per range
    seed: int = 0
    keep_slower: bool = False            # on a GPU, package winners measured slower than eager too
    against: list[str] = field(default_factory=list)   # on a GPU, also leave out winners slower than these baselines
    sanitize: bool = True                # compute-sanitizer over each winner's kernel (findings leave it out)
    ptx: bool = False                    # attach each entry's proved, faster PTX-level edit (kernelloop.tune.ptx)
    allow_unauthenticated: bool = False  # export a run whose rows carry no MACs (legacy) or whose key is not here
    sign: bool = True                    # sign the manifest with the user's signing key (deliver/package/signing.py)


@dataclass
class ExportResult:
    path: Path
    manifest: PackageManifest
    builds: dict[str, TableBuild]


def _open_run(run_dir: Path) -> tuple[Archive, dict]:
    path = run_dir / "archive.sqlite" if run_dir.is_dir() else run_dir
    if not path.is_file():
        raise ExportError(f"{run_dir}: no archive.sqlite (is it a run folder?)")
    archive = Archive(path, readonly=True)
    runs = archive.runs()
    if not runs:
        archive.close()
        raise ExportError(f"{path}: the archive holds no run")
    return archive, runs[0]


def _integrity(archive: Archive, run: dict, allow_unauthenticated: bool) -> str:
    """The run's archive commitment (core/archive/integrity.py); an edited run is refused, an unauthenticated or
    unverifiable one unless the caller takes it."""
    got = archive.integrity(run["id"])
    if got.state == "tampered":
        raise ExportError(f"run {run['id']}: its archive was edited after the controller recorded it: "
                          f"{', '.join(got.tampered[:8])} fail their MAC; refusing to export from it")
    if got.state == "authenticated":
        return got.commitment
    if not allow_unauthenticated:
        raise ExportError(f"run {run['id']}: {got.line().removeprefix('integrity: ')}; refusing to export what "
                          f"cannot be authenticated (pass --allow-unauthenticated to export it anyway; the "
                          f"package then says so)")
    return f"{got.state}:{sha256_hex(''.join(t.to_json() for t in archive.trials(run['id'])))}"


def _op_bundle(run: dict, ops_root: Path | None, used_templates: set[str]):
    from ...base.builtin import op_folder
    op = run["op"]
    folder = op_folder(op, ops_root)
    try:
        bundle = load_op(folder)
    except SpecError as e:
        raise ExportError(f"run {run['id']} is of op {op!r}, whose folder does not load: {e}"
                          + ("" if ops_root is not None else " (pass --ops with the folder that holds the op's folder)")
                          ) from None
    man = run["manifest"]
    changed = []
    if bundle.spec_hash != man["spec_sha256"]:
        changed.append(" + ".join(bundle.spec_file_names()))
    if bundle.reference_hash != man["reference_sha256"]:
        changed.append(bundle.spec.reference)
    for t in sorted(used_templates):
        if sha256_hex(bundle.template_sources.get(t, "")) != man["template_sha256"].get(t):
            changed.append(f"template {t}")
    if changed:
        raise ExportError(f"{folder} changed since run {run['id']} ({', '.join(changed)}): a package is built only "
                          f"from what the run verified")
    return bundle


def _winners(archive: Archive, run: dict) -> list[Winner]:
    """Each workload's fastest PASSED trial whose candidate the run's compute-sanitizer did not reject."""
    finals = archive.finals(run["id"])
    out = []
    usable = without_rejected(archive.trials(run["id"]), rejected(archive, run["id"]))
    for wid, trial in best_per_workload(usable).items():
        m = trial.measurement
        if wid in finals and finals[wid][0] == trial.candidate_id:
            m = finals[wid][1]
        out.append(Winner(workload=archive.get_workload(wid), candidate=archive.get_candidate(trial.candidate_id),
                          trial=trial, kernel_us=m.kernel.median_us, ci_us=(m.kernel.ci_low_us, m.kernel.ci_high_us),
                          versus=tuple((r.baseline, r.verdict.value) for r in m.ratios)))
    return out


def _baseline_names(bundle) -> set[str]:
    from ...core.execute.baselines import BUILTIN_BASELINES
    from ...tune.loop import op_baseline_names
    return {*BUILTIN_BASELINES, *op_baseline_names(bundle)}


def kernel_file(candidate: Candidate) -> str:
    return f"kernels/{candidate.template}-{candidate.source_hash[:12]}.py"


def _run_rejections(archive: Archive, run: dict) -> list[SanitizerAudit]:
    """The run's own compute-sanitizer findings (before confirmation): those winners were replaced."""
    fields = set(SanitizerAudit.model_fields)
    return [SanitizerAudit(**{k: v for k, v in e["payload"].items() if k in fields and k != "stage"},
                           stage="confirm")
            for e in archive.events(run["id"], SANITIZE_EVENT) if e["payload"].get("status") == "findings"]


class _Screen:
    """compute-sanitizer over each winner kept so far (`build_table(screen=...)`), once per candidate on a small
    shape of its smallest workload; the outcomes go to the audit."""

    def __init__(self, bundle, winners: list[Winner], device: str, sanitizer: Sanitizer | None, enabled: bool):
        self.bundle, self.device, self.enabled = bundle, device, enabled
        self.sanitizer = sanitizer or default_sanitizer(device)
        self.smallest: dict[str, Winner] = {}
        for w in winners:
            cur = self.smallest.get(w.candidate.id)
            if cur is None or _size(w) < _size(cur):
                self.smallest[w.candidate.id] = w
        self.results: dict[str, SanitizerAudit] = {}

    def __call__(self, w: Winner) -> str:
        cid = w.candidate.id
        if cid not in self.results:
            at = self.smallest.get(cid, w)
            if not self.enabled:
                result = off(w.candidate)
            else:
                result = sanitize_candidate(self.sanitizer, self.bundle, w.candidate, at.workload,
                                            accept_for(self.bundle, w.candidate, at.workload, self.device))
            self.results[cid] = SanitizerAudit(**result.model_dump(), stage="export", label=at.workload.label,
                                               candidate_label=w.candidate.label)
        r = self.results[cid]
        return f"rejected by {r.verdict}" if r.status == "findings" else ""


def _size(w: Winner) -> int:
    n = 1
    for v in w.workload.axes.values():
        n *= v
    return n


def _audit(archive: Archive, run: dict, build: TableBuild, commitment: str,
           sanitizer: list[SanitizerAudit] | None = None) -> AuditTrail:
    finals = archive.finals(run["id"])
    trials = archive.trials(run["id"])
    entries = {}
    for e in build.table.entries:
        rows = []
        for t in trials:
            if t.candidate_id != e.candidate_id:
                continue
            w = archive.get_workload(t.workload_id)
            confirmed, baselines = None, {}
            if t.workload_id in finals and finals[t.workload_id][0] == t.candidate_id:
                confirmed = finals[t.workload_id][1].kernel.median_us
                baselines = {n: (m.kernel.median_us if m is not None else None)
                             for n, (m, _) in archive.baselines(run["id"], t.workload_id).items()}
            rows.append(TrialRecord(trial_id=t.id, workload=dict(w.axes), dtype=w.dtype.value,
                                    status=t.verdict.status.value,
                                    kernel_us=t.measurement.kernel.median_us if t.measurement else None,
                                    confirmed_us=confirmed, baselines=baselines))
        entries[e.id] = rows
    checks = [ExportCheck(entry_range=n.entry_range, axes=n.axes, status=n.status, message=n.message, case=n.case)
              for n in build.notes]
    return AuditTrail(op=run["op"], run_id=run["id"], entries=entries, export_checks=checks,
                      secret_commitment=commitment, left_out=list(build.left_out),
                      sanitizer=list(sanitizer or []))


def _write(path: Path, text: str, files: dict[str, str], root: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    files[path.relative_to(root).as_posix()] = sha256_hex(path.read_bytes())


def export_package(runs: list[Path], options: ExportOptions, device: str | None = None,
                   on_note=lambda text: None, sanitizer: Sanitizer | None = None) -> ExportResult:
    """Build and write the package; nothing is left at `options.out` unless the whole export succeeded.
    `sanitizer` runs compute-sanitizer over a winner's kernel (kernelloop.core.verify.sanitizer.sanitize's signature;
    default: `select.sanitize.default_sanitizer` for the device)."""
    out = Path(options.out)
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"{out} exists and is not empty: choose a new --out")
    if not runs:
        raise ExportError("give at least one run folder")
    opened = [_open_run(Path(r)) for r in runs]
    try:
        commitments = _checked_runs(opened, options)
    except ExportError:
        for a, _ in opened:
            a.close()
        raise
    stage = Path(tempfile.mkdtemp(prefix="kernelloop-export-"))
    files: dict[str, str] = {}
    packaged, builds = [], {}
    try:
        for archive, run in opened:
            op, build = _package_op(archive, run, options, device, stage, files, on_note, sanitizer,
                                    commitments[run["id"]])
            packaged.append(op)
            builds[op.op] = build
        shutil.rmtree(stage / ".verify", ignore_errors=True)
        manifest = _write_manifest(stage, options, packaged, files, on_note)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        shutil.move(str(stage), str(out))
        return ExportResult(path=out, manifest=manifest, builds=builds)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        for a, _ in opened:
            a.close()


def _checked_runs(opened: list, options: ExportOptions) -> dict[str, str]:
    """Each run's archive commitment, once the runs are of distinct ops, their archives intact and every --extend
    applies to one of their ops."""
    ops = [run["op"] for _, run in opened]
    if len(set(ops)) != len(ops):
        raise ExportError(f"two runs of the same op ({', '.join(sorted({o for o in ops if ops.count(o) > 1}))}): "
                          f"export one run per op")
    commitments = {run["id"]: _integrity(archive, run, options.allow_unauthenticated) for archive, run in opened}
    specs = [_op_bundle(run, options.ops_root, set()).spec for _, run in opened]
    for spec in specs:
        parse_extend(options.extend, spec)
    unused = unused_extends(options.extend, specs)
    if unused:
        raise ExportError(f"--extend {', '.join(unused)}: applies to none of the ops ({', '.join(ops)})")
    return commitments


def _package_op(archive: Archive, run: dict, options: ExportOptions, device: str | None, stage: Path,
                files: dict[str, str], on_note, sanitizer: Sanitizer | None, commitment: str) -> tuple[PackagedOp, TableBuild]:
    """One run's op into the stage: its dispatch table built from the run's winners, its spec, reference, kernels
    and audit record written; the op's manifest entry and the table build."""
    winners = _winners(archive, run)
    if not winners:
        why = " its compute-sanitizer did not reject" if rejected(archive, run["id"]) else ""
        raise ExportError(f"run {run['id']} ({run['op']}) has no PASSED, measured trial{why}: nothing to "
                          f"package")
    bundle = _op_bundle(run, options.ops_root, {w.candidate.template for w in winners})
    spec: OpSpec = bundle.spec
    env = run["environment"]
    run_device = env.get("device", "interpret")
    screen = _Screen(bundle, winners, device or run_device, sanitizer, options.sanitize)
    replaced = _run_rejections(archive, run)
    build, verify_commitment = _build_op(bundle, winners, env, options, device or run_device, stage, screen, on_note)
    root = stage / "ops" / spec.name
    # not sort_keys: the order of the spec's axes is the order of the dispatch key
    _write(root / "spec.json", json.dumps(spec.model_dump(mode="json"), indent=1), files, stage)
    _write(root / "reference.py", bundle.reference_source, files, stage)
    for w in winners:
        if any(e.candidate_id == w.candidate.id for e in build.table.entries):
            _write(root / kernel_file(w.candidate), w.candidate.source, files, stage)
    if options.ptx:
        from .ptx_overlays import attach
        build.table = attach(archive, run, build.table, root, lambda p, t: _write(p, t, files, stage), on_note)
    _write(root / "dispatch.json", build.table.model_dump_json(indent=1), files, stage)
    served = {w.workload.label for w in winners}
    for r in replaced:
        then = ("its next fastest candidate is the winner" if r.label in served else
                "no other candidate passed; the reference serves it")
        build.left_out.append(f"{r.label}: {r.candidate_label or r.candidate_id} rejected by {r.verdict} "
                              f"before the run's confirmation; {then}")
    checks = [*replaced, *screen.results.values()]
    for r in screen.results.values():
        if r.status != "clean":
            on_note(f"{spec.name}: compute-sanitizer {r.status.replace('_', ' ')} for {r.label} "
                    f"{r.candidate_label}: {r.verdict or r.reason}")
    _write(stage / "audit" / f"{spec.name}.json", _audit(archive, run, build, verify_commitment, checks)
           .model_dump_json(indent=1), files, stage)
    return PackagedOp(
        op=spec.name, run_id=run["id"], manifest_hash=run["manifest_hash"], entries=len(build.table.entries),
        archive_commitment=commitment,
        measured_on=MeasuredOn(device=run_device, arch=arch_of(env), gpu=env.get("gpu", ""),
                               driver=env.get("driver", ""), torch=env.get("torch", ""),
                               triton=env.get("triton", ""))), build


def _build_op(bundle, winners: list, env: dict, options: ExportOptions, device: str, stage: Path, screen,
              on_note) -> tuple[TableBuild, str]:
    """The op's dispatch table (`build_table`), its guards verified over ranges when asked; the table build and the
    commitment to the range verifier's secret ("" without ranges)."""
    spec = bundle.spec
    verifier = ShapeVerifier(bundle, device, stage / ".verify") if options.ranges else None
    try:
        on_note(f"{spec.name}: {len(winners)} winner(s); verifying ranges" if options.ranges else
                f"{spec.name}: {len(winners)} winner(s); exact guards")
        build = build_table(spec, winners, arch_of(env), kernel_file, verifier,
                            extend=parse_extend(options.extend, spec), ranges=options.ranges,
                            interior=options.interior, seed=options.seed, keep_slower=options.keep_slower,
                            against=tuple(b for b in options.against if b in _baseline_names(bundle)),
                            screen=screen)
    finally:
        if verifier is not None:
            verifier.close()
    return build, sha256_hex(verifier.secret) if verifier is not None else ""


def _write_manifest(stage: Path, options: ExportOptions, packaged: list[PackagedOp], files: dict[str, str],
                    on_note) -> PackageManifest:
    """The package manifest over every staged file, with its digest and, with --sign, an Ed25519 signature over the
    digest with the user's key (deliver/package/signing.py)."""
    manifest = PackageManifest(name=options.name, version=options.version, created=time.time(),
                               kernelloop=__version__, ops=packaged, files=dict(sorted(files.items())))
    digest = manifest_digest(manifest)
    signed = {}
    if options.sign:
        key, key_path, created = load_signing_key()
        if created:
            on_note(f"generated a signing key at {key_path} (its public key: {key_path.with_suffix('.pub')}); "
                    f"packages are signed with it")
        signed = {"signature": sign(digest, key).model_dump(mode="json")}
    (stage / MANIFEST_FILE).write_text(json.dumps({**manifest.model_dump(mode="json"), "digest": digest,
                                                   **signed}, indent=1))
    return manifest
