"""Freezing a run: the manifest (hashed; every trial carries its hash), the run key, the archived options; on resume
the same manifest, the options read back whole and the same warm start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...core.archive import Archive
from ...core.bench.policy import policies_for
from ...core.device import environment
from ...core.sandbox import keys
from ...core.execute.executor import resolve_devices
from ...core.manifest import build_manifest, manifest_hash
from ...base.records import TimingPolicy, Workload, content_hash
from ..replay.prior import prior_files, read_prior
from ..search import takes_prior
from ..search.history import TransferPrior
from ...core.spec import OpBundle
from .options import RunOptions


@dataclass
class Frozen:
    """A run as the controller holds it while it runs: its archive, id, manifest and hash, the secret the battery's
    seeds derive from, the options it goes on with and its timing policies."""

    archive: Archive
    run_id: str
    manifest: dict
    mhash: str
    secret: str
    options: RunOptions
    policy: TimingPolicy
    confirm_policy: TimingPolicy


def freeze(archive: Archive, bundle: OpBundle, workloads: list[Workload], options: RunOptions, run_dir: Path,
           resume: bool) -> Frozen:
    """Create the run (or, with `resume`, find it and check its manifest) and settle the options it runs with."""
    env = environment(resolve_devices(options.device, options.devices)[0])   # the model the run's devices share
    policy, confirm_policy = policies_for(options.device)
    manifest = build_manifest(bundle, policy, confirm_policy, env, options.checks, options.static_rules)
    mhash = manifest_hash(manifest)
    existing = archive.runs()
    if existing:
        if not resume:
            raise FileExistsError(f"{run_dir} already holds run {existing[0]['id']}; use --resume "
                                  f"to continue it or choose another --out")
        run = existing[0]
        if run["manifest_hash"] != mhash:
            diff = [k for k in manifest if manifest[k] != run["manifest"].get(k)]
            raise RuntimeError(f"cannot resume: the manifest changed ({', '.join(diff)}); "
                               f"results are only comparable within one manifest")
        stored = archive.get_run(run["id"])["options"]
        check_resumed_workloads(workloads, stored.get("workloads"))
        options = resumed_options(options, RunOptions.from_archived(stored))
        secret = keys.resume_secret(run, run_dir)
        archive.attach_secret(run["id"], secret)   # a MAC'd run's new rows carry MACs (core/archive/integrity.py)
        return Frozen(archive, run["id"], manifest, mhash, secret, options, policy, confirm_policy)
    # The run key derives every seed and held-out case; the archive keeps only a salt and a commitment to it,
    # the key stays with the user's controller ($KERNELLOOP_KEY or a key file outside the run folder).
    run_id, key_record, secret = keys.start_run(run_dir, lambda salt: "r-" + content_hash({"m": mhash, "salt": salt}))
    # Every row of the run carries an HMAC under a key derived from the run key (core/archive/integrity.py).
    archive.create_run(run_id, bundle.spec, manifest, mhash, env, options.archived(key_record, workloads),
                       secret=secret)
    for w in workloads:
        archive.put_workload(w)
    return Frozen(archive, run_id, manifest, mhash, secret, options, policy, confirm_policy)


def archived_workloads(stored: list[dict] | None) -> list[Workload] | None:
    """The workloads a run archived with its options (None: an archive from before they were kept)."""
    return [Workload.model_validate(w) for w in stored] if stored else None


def check_resumed_workloads(given: list[Workload], stored: list[dict] | None) -> None:
    """A resumed run goes on with its own workloads: others are refused (their trials would be archived under a run
    whose summary, report and export list only the workloads it began with)."""
    before = archived_workloads(stored)
    if before is None or {w.id for w in given} == {w.id for w in before}:
        return
    raise RuntimeError(f"cannot resume with other workloads: the run has {', '.join(w.label for w in before)}; this "
                       f"invocation gives {', '.join(w.label for w in given)} (resume without --workloads to go on "
                       f"with the run's, or start a new run with another --out)")


def resumed_options(given: RunOptions, stored: RunOptions) -> RunOptions:
    """The archived options, read back whole, with this invocation's over them; a warm start other than the archived
    one is refused (the same files given from elsewhere are the same warm start)."""
    now, then = prior_files(given.prior), prior_files(stored.prior)
    if given.prior is not None and sorted(h for _, h in now) != sorted(h for _, h in then):
        names = " + ".join(p for p, _ in now)
        if then and sorted(p for p, _ in now) == sorted(p for p, _ in then):
            raise RuntimeError(f"cannot resume with --prior {names}: a file changed since the run "
                               f"began (its sha256 is not the archived one)")
        raise RuntimeError(f"cannot resume with --prior {names}: the run was "
                           + (f"warm-started from {' + '.join(p for p, _ in then)}" if then else "not warm-started"))
    return given.resumed(stored)


def read_warm_start(options: RunOptions, op: str) -> TransferPrior | None:
    """The search's warm start, read again from its recordings: refused if a file changed since it was chosen."""
    given = options.prior
    if given is None:
        return None
    files = prior_files(given)
    names = " + ".join(p for p, _ in files)
    if not takes_prior(options.strategy):
        raise RuntimeError(f"the run was warm-started from {names}, which --strategy "
                           f"{options.strategy} does not take")
    try:
        rec = read_prior([p for p, _ in files], op)
    except ValueError as e:
        raise RuntimeError(f"prior {names}: {e} (the paths are as the run was given them: from elsewhere, "
                           f"pass --prior with those files' paths; their sha256 are checked)") from e
    for (path, want), (_, got) in zip(files, rec.files):
        if got != want:
            raise RuntimeError(f"prior {path} changed since the run began (sha256 {want[:12]}... "
                               f"now {got[:12]}...)")
    return rec.prior
