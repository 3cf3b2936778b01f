"""Third gallery, records: an adversary who read our source edits the workspace's archive or a package.

(a) a WRONG_VALUES trial rewritten as a faster PASSED through sqlite3: `agent status`, `show`, `report` mark it
    TAMPERED (never PASSED, never best) and `export` refuses;
(b) every MAC and the marker stripped: the run reads as unauthenticated (legacy), never authenticated, and `export`
    refuses without --allow-unauthenticated;
(c) a package's kernel, guard or reference changed with every sha256 and the digest recomputed by our own function:
    `load_package` refuses before any of its code runs (the tampered kernel would write a marker file at import);
(d) a package signed by a foreign key: refused unless that key is trusted.
Recorded archives (no marker) still open, as unauthenticated.
"""

import json
import os
import shutil
import sqlite3
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")   # the package's kernels are imported (interpreter-verified)

import pytest  # noqa: E402
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from kernelloop.deliver.agent import Submission, init_workspace, submit, workspace_status
from kernelloop.core.archive import Archive
from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.deliver.package import PackageError, load_package
from kernelloop.deliver.package.build import ExportError
from kernelloop.deliver.package.export import ExportOptions, export_package
from kernelloop.deliver.package.runtime import manifest_digest
from kernelloop.deliver.package.records import PackageManifest
from kernelloop.deliver.package.signing import sign
from kernelloop.deliver.report.html import write_report

OP = ops_dir() / "layernorm"
TEMPLATE = (OP / "kernel.py").read_text()
ZEROS = TEMPLATE.replace("y = xc * rstd * w + b", "y = xc * 0.0")
CONFIG = {"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}
FAST = dict(timeouts=Timeouts(check=60.0, bench=60.0))
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _workspace(base: Path, *, wrong: bool):
    wl = base / "wl.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = init_workspace(OP, base / "ws", workloads_file=wl, checks=1, device="interpret")
    submit(ws.root, Submission(source=TEMPLATE, config=CONFIG, agent="test"), **FAST)
    if wrong:
        ans = submit(ws.root, Submission(source=ZEROS, config=CONFIG, agent="test"), **FAST)
        assert ans["verdict"] == "WRONG_VALUES"
    return ws


def _forge(db: Path) -> str:
    """The adversary's edit: the WRONG_VALUES trial becomes a PASSED one ten times faster than the honest kernel."""
    con = sqlite3.connect(db)
    good = json.loads(con.execute("SELECT json FROM trials WHERE status = 'PASSED'").fetchone()[0])
    idx, cid, text = con.execute("SELECT idx, candidate_id, json FROM trials WHERE status = 'WRONG_VALUES'").fetchone()
    forged = json.loads(text)
    forged["verdict"] = good["verdict"]
    forged["measurement"] = good["measurement"]
    forged["measurement"]["kernel"]["median_us"] = good["measurement"]["kernel"]["median_us"] / 10
    fast = forged["measurement"]["kernel"]["median_us"]
    con.execute("UPDATE trials SET status = 'PASSED', kernel_median_us = ?, json = ? WHERE idx = ?",
                (fast, json.dumps(forged), idx))
    con.commit()
    con.close()
    return cid


@pytest.fixture(scope="module")
def forged(tmp_path_factory):
    ws = _workspace(tmp_path_factory.mktemp("records-a"), wrong=True)
    run = ws.run_dir()
    assert workspace_status(ws.root).as_json()["integrity"]["state"] == "authenticated"
    return ws, run, _forge(run / "archive.sqlite")


def test_a_forged_pass_is_tampered_in_status_show_and_report(forged, tmp_path):
    ws, run, cid = forged
    st = workspace_status(ws.root).as_json()
    assert st["integrity"]["state"] == "tampered" and st["integrity"]["tampered"] == ["trial 1"]
    assert st["counts"] == {"PASSED": 1, "TAMPERED": 1}
    (w,) = st["workloads"]
    assert w["best"]["candidate"] != cid and w["passed"] == 1
    assert st["recent"][0]["status"] == "TAMPERED"
    res = CliRunner().invoke(app, ["show", str(run), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["integrity"]["state"] == "tampered" and summary["counts"]["TAMPERED"] == 1
    assert summary["workloads"][0]["best"]["candidate"] != cid
    res = CliRunner().invoke(app, ["show", str(run)])
    assert "TAMPERED" in res.output
    html = write_report(run / "archive.sqlite", tmp_path / "r.html").read_text()
    assert "TAMPERED" in html and "integrity-tampered" in html


def test_a_export_refuses_an_edited_archive(forged, tmp_path):
    _, run, _ = forged
    with pytest.raises(ExportError, match="edited after the controller recorded it: trial 1"):
        export_package([run], ExportOptions(out=tmp_path / "pkg", ops_root=ops_dir(), ranges=False, sanitize=False,
                                            allow_unauthenticated=True))
    res = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "pkg2"), "--ops", str(ops_dir()),
                                   "--exact", "--no-sanitize"])
    assert res.exit_code != 0 and "fail their MAC" in res.output


def test_b_stripped_macs_read_as_unauthenticated_and_export_needs_the_opt_in(forged, tmp_path):
    _, run, cid = forged
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    con = sqlite3.connect(copy / "archive.sqlite")
    con.execute("DELETE FROM row_macs")
    con.execute("DELETE FROM integrity")
    con.commit()
    con.close()
    with Archive(copy / "archive.sqlite", readonly=True) as a:
        got = a.integrity(a.runs()[0]["id"])
    assert got.state == "unauthenticated" and not got.authenticated
    summary = json.loads(CliRunner().invoke(app, ["show", str(copy), "--json"]).output)
    assert summary["integrity"]["state"] == "unauthenticated"
    assert "unauthenticated (legacy)" in CliRunner().invoke(app, ["show", str(copy)]).output
    with pytest.raises(ExportError, match="unauthenticated .*--allow-unauthenticated"):
        export_package([copy], ExportOptions(out=tmp_path / "pkg", ops_root=ops_dir(), ranges=False, sanitize=False))


def test_recorded_archives_open_as_unauthenticated():
    # the two recorded before archives carried MACs (the interpreter fixture beside them was made after)
    kept = sorted((FIXTURES / "archives").glob("h200-*.sqlite.xz"))
    assert len(kept) == 2
    for f in kept:
        with Archive(f, readonly=True) as a:
            run = a.runs()[0]["id"]
            assert a.integrity(run).state == "unauthenticated"
            assert a.trials(run)


# ---------------------------------------------------------------------------------------------- packages


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    base = tmp_path_factory.mktemp("records-pkg")
    ws = _workspace(base, wrong=False)
    out = base / "pkg"
    export_package([ws.run_dir()], ExportOptions(out=out, ops_root=ops_dir(), ranges=False, sanitize=False))
    return out


def _manifest(pkg: Path) -> dict:
    return json.loads((pkg / "kernelloop-package.json").read_text())


def _rehash(pkg: Path, data: dict) -> None:
    """The adversary's own recomputation: every file's sha256, then the digest with our function."""
    import hashlib
    for rel in data["files"]:
        data["files"][rel] = hashlib.sha256((pkg / rel).read_bytes()).hexdigest()
    body = {k: v for k, v in data.items() if k not in ("digest", "signature")}
    data["digest"] = manifest_digest(PackageManifest.model_validate(body))
    (pkg / "kernelloop-package.json").write_text(json.dumps(data, indent=1))


def _copy(package: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "pkg"
    shutil.copytree(package, dst)
    return dst


def test_the_exported_package_is_signed_bound_and_loads(package):
    data = _manifest(package)
    assert data["signature"]["algorithm"] == "ed25519"
    assert data["ops"][0]["archive_commitment"].startswith("hmac-sha256-v1:")
    pkg = load_package(package)
    assert pkg.trust.trusted and pkg.trust.signed


@pytest.mark.parametrize("part", ["kernel", "guard", "reference"])
def test_c_a_tampered_package_with_every_digest_recomputed_never_runs(package, tmp_path, part):
    pkg = _copy(package, tmp_path)
    marker = tmp_path / "ran"
    payload = f"\nimport pathlib as _p\n_p.Path({str(marker)!r}).write_text('ran')\n"
    op = pkg / "ops" / "layernorm"
    if part == "kernel":
        (k,) = list((op / "kernels").glob("*.py"))
        k.write_text(k.read_text() + payload)
    elif part == "reference":
        (op / "reference.py").write_text((op / "reference.py").read_text() + payload)
    else:
        table = json.loads((op / "dispatch.json").read_text())
        guard = table["entries"][0]["guard"]
        guard["axes"] = {a: {"lo": 1, "hi": 1 << 20} for a in guard["axes"]}   # every shape to the kernel
        (op / "dispatch.json").write_text(json.dumps(table))
        (op / "reference.py").write_text((op / "reference.py").read_text() + payload)
    data = _manifest(pkg)
    _rehash(pkg, data)
    with pytest.raises(PackageError, match="signature does not hold"):
        load_package(pkg)
    assert not marker.exists(), "the tampered package's code ran"
    del data["signature"]       # stripped: an unsigned package
    (pkg / "kernelloop-package.json").write_text(json.dumps(data, indent=1))
    with pytest.raises(PackageError, match="unsigned"):
        load_package(pkg)
    assert not marker.exists()
    with pytest.warns(UserWarning, match="caller allowed"):   # the payload is live: on the caller's say-so it runs
        load_package(pkg, allow_unsigned=True)
    assert marker.exists()


def test_an_unsigned_package_loads_only_on_the_callers_say_so(package, tmp_path):
    pkg = _copy(package, tmp_path)
    data = _manifest(pkg)
    del data["signature"]
    (pkg / "kernelloop-package.json").write_text(json.dumps(data, indent=1))
    with pytest.warns(UserWarning, match="unsigned"):
        loaded = load_package(pkg, allow_unsigned=True)
    assert not loaded.trust.signed and "caller allowed" in loaded.trust.note


def test_d_a_foreign_signature_is_refused_unless_trusted(package, tmp_path):
    pkg = _copy(package, tmp_path)
    data = _manifest(pkg)
    foreign = Ed25519PrivateKey.generate()
    data["signature"] = sign(data["digest"], foreign).model_dump(mode="json")
    (pkg / "kernelloop-package.json").write_text(json.dumps(data, indent=1))
    with pytest.raises(PackageError, match="not in the trust store"):
        load_package(pkg)
    pub = tmp_path / "foreign.pub"
    pub.write_bytes(foreign.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
    assert load_package(pkg, trust=[pub]).trust.trusted
    res = CliRunner().invoke(app, ["keys", "trust", str(pub), "--json"])
    assert res.exit_code == 0, res.output
    try:
        assert load_package(pkg).trust.trusted
    finally:
        Path(json.loads(res.output)["trusted"]).unlink()


def test_a_package_exported_before_signing_loads_on_the_callers_say_so(package, tmp_path):
    """As exported before archives were MAC'd and packages signed: no signature, no archive commitment, and the
    digest of that manifest as it was then. Refused as unsigned; loads with the opt-in, saying so."""
    from kernelloop.base.records import canonical_json, sha256_hex
    pkg = _copy(package, tmp_path)
    data = _manifest(pkg)
    del data["signature"]
    for op in data["ops"]:
        del op["archive_commitment"]
    body = {k: v for k, v in data.items() if k != "digest"}
    data["digest"] = sha256_hex(canonical_json(body))          # the old digest: the manifest without the field
    (pkg / "kernelloop-package.json").write_text(json.dumps(data, indent=1))
    with pytest.raises(PackageError, match="unsigned"):
        load_package(pkg)
    with pytest.warns(UserWarning, match="unsigned"):
        loaded = load_package(pkg, allow_unsigned=True)
    assert not loaded.trust.signed and loaded.manifest.ops[0].archive_commitment == ""
