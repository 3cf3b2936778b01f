"""The frozen manifest of a run: hashes of everything a verdict or a number depends on.

Written at run start, re-checked before every evaluation; every trial carries its hash, and results are
only compared within one manifest.
"""

from __future__ import annotations

from pathlib import Path

from ..base.records import Environment, TimingPolicy, content_hash, sha256_hex
from .spec import OpBundle

_PKG = Path(__file__).parent   # src/kernelloop/core: the paths below are relative to it
_STATIC_RULES = sorted(p.relative_to(_PKG).as_posix() for p in (_PKG / "verify" / "rules").glob("*.py"))
# The trusted code paths a verdict or a measurement depends on.
VERIFIER_FILES = ["verify/compare.py", "reference/inputs.py", "reference/truth.py", "execute/evaluate.py",
                  "execute/worker.py", "execute/pool.py", "bench/timer.py", "bench/stats.py", "bench/policy.py",
                  *_STATIC_RULES,
                  "execute/battery.py", "sandbox/keys.py", "execute/timing.py",
                  "execute/procutil.py", "verify/explain.py", "execute/child.py", "sandbox/policy.py",
                  "execute/aten.py", "reference/sparse.py"]


class ManifestChanged(RuntimeError):
    """The reference, verifier or policy changed under a running (or resumed) run."""


def verifier_hash() -> str:
    return sha256_hex("".join(sha256_hex((_PKG / f).read_bytes()) for f in VERIFIER_FILES))


def build_manifest(bundle: OpBundle, policy: TimingPolicy, confirm_policy: TimingPolicy, env: Environment,
                   checks: int, static_rules: bool = True) -> dict:
    return {
        "op": bundle.spec.name,
        "spec_sha256": bundle.spec_hash,   # the spec.toml's bytes; with `extends`, every file of the chain
        "reference_sha256": bundle.reference_hash,
        "template_sha256": {k: sha256_hex(v) for k, v in sorted(bundle.template_sources.items())},
        "verifier_sha256": verifier_hash(),
        "tolerances": {k.value: v.model_dump() for k, v in bundle.spec.tolerance.items()},
        "inputs_policy": bundle.spec.inputs_policy.model_dump(),
        "seed_policy": f"sha256(run secret|workload id|candidate id|k), k < {checks}; fresh per trial",
        "static_rules": static_rules,
        "timing_policy": policy.model_dump(mode="json"),
        "confirm_policy": confirm_policy.model_dump(mode="json"),
        "environment": env.model_dump(mode="json", exclude={"host"}),
    }


def manifest_hash(manifest: dict) -> str:
    return "m-" + content_hash(manifest)


def check_unchanged(bundle: OpBundle, manifest: dict) -> None:
    """Raise ManifestChanged if the reference or verifier on disk differ from the frozen manifest."""
    ref_now = sha256_hex((bundle.folder / bundle.spec.reference).read_text())
    if ref_now != manifest["reference_sha256"]:
        raise ManifestChanged(f"the reference {bundle.spec.reference} changed since the run started")
    if verifier_hash() != manifest["verifier_sha256"]:
        raise ManifestChanged("kernelloop's verifier/timer code changed since the run started")
