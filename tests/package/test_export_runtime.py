"""Export of a real interpreter run and the package runtime: ranges verified at export, guard decisions, the
reference for everything else, tampering, environment mismatch, counts, torch ops under torch.compile(fullgraph).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.package import PackageError, load_package  # noqa: E402
from kernelloop.deliver.package import runtime  # noqa: E402
from kernelloop.deliver.package.build import ExportError  # noqa: E402
from kernelloop.deliver.package.export import ExportOptions, export_package  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


RMS = """op = "rmsnorm"
[[workload]]
axes = { M = 5, N = 256 }
dtype = "fp16"
[[workload]]
axes = { M = 23, N = 256 }
dtype = "fp16"
"""


@pytest.fixture(scope="module")
def run_dir(persistent_rmsnorm_runs) -> Path:
    """rmsnorm's persistent template pinned to PROGRAMS_PER_SM=1,num_warps=4,PREFETCH=0 on M 5 and M 23 at N 256, fp16
    (budget 1, no confirmation; tests/conftest.py runs it beside the other modules' runs)."""
    return persistent_rmsnorm_runs["tests/package/test_export_runtime.py"]


@pytest.fixture(scope="module")
def package_dir(run_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pkg") / "p"
    export_package([run_dir], ExportOptions(out=out, ops_root=ops_dir(), extend=["M=1:40"], interior=2))
    return out


def test_export_keeps_a_range_verified_at_its_edges(package_dir):
    table = json.loads((package_dir / "ops/rmsnorm/dispatch.json").read_text())
    (entry,) = table["entries"]
    assert entry["guard"]["axes"]["M"] == {"lo": 1, "hi": 40} and entry["guard"]["axes"]["N"] == {"lo": 256, "hi": 256}
    by_source = {}
    for s in entry["shapes"]:
        by_source.setdefault(s["source"], set()).add(s["axes"]["M"])
    assert by_source["run"] == {5, 23}
    assert {1, 2, 39, 40} <= by_source["edge"]
    assert len(by_source.get("interior", ())) == 2
    assert all(s["kernel_us"] is None for s in entry["shapes"] if s["source"] != "run")   # speed only where timed
    audit = json.loads((package_dir / "audit/rmsnorm.json").read_text())
    assert audit["export_checks"] and all(c["status"] == "PASSED" for c in audit["export_checks"])
    assert len(audit["secret_commitment"]) == 64
    assert [t["status"] for t in audit["entries"]["e0"]] == ["PASSED", "PASSED"]


def test_calls_inside_the_range_run_the_kernel_and_match_the_reference(package_dir):
    pkg = load_package(package_dir)
    k = pkg["rmsnorm"]
    g = torch.Generator().manual_seed(0)
    w = (1 + 0.1 * torch.randn(256, generator=g)).half()
    for m in (1, 7, 33, 40):   # 7 and 33 were never measured: verified range, no speed claim
        x = torch.randn(m, 256, generator=g).half()
        y = k(x, w)
        ref = torch.nn.functional.rms_norm(x.double(), (256,), w.double(), 1e-6)
        assert (y.double() - ref).abs().max() < 1e-2
    assert k.hits["e0"] == 4 and not k.fallbacks


@pytest.mark.parametrize("case,reason", [
    ("outside", "no entry covers the shape"), ("dtype", "no entry covers the shape"),
    ("strided", "not contiguous"), ("misaligned", "aligned"), ("eps", "scalar eps")])
def test_inputs_outside_every_guard_run_the_reference(package_dir, case, reason):
    k = load_package(package_dir)["rmsnorm"]
    w = torch.ones(256, dtype=torch.float16)
    x = torch.randn(8, 256).half()
    kw = {}
    if case == "outside":
        x = torch.randn(41, 256).half()
    elif case == "dtype":
        x, w = x.bfloat16(), w.bfloat16()
    elif case == "strided":
        x = torch.randn(8, 512).half()[:, ::2]
    elif case == "misaligned":
        x = torch.randn(8 * 256 + 1).half()[1:].view(8, 256)
    else:
        kw = {"eps": 1e-5}
    y = k(x, w, **kw)
    ref = torch.nn.functional.rms_norm(x.float(), (256,), w.float(), kw.get("eps", 1e-6))
    assert torch.allclose(y.float(), ref, atol=1e-2, rtol=1e-2)
    assert not k.hits["e0"] and sum(k.fallbacks.values()) == 1
    assert reason in next(iter(k.fallbacks))


def test_counts_become_workloads_weighted_by_calls(package_dir, tmp_path):
    pkg = load_package(package_dir)
    k = pkg["rmsnorm"]
    w = torch.ones(256, dtype=torch.float16)
    for m, n in ((8, 3), (64, 2)):
        for _ in range(n):
            k(torch.randn(m, 256).half(), w)
    counts = pkg.write_counts(tmp_path / "counts.json")
    data = json.loads(counts.read_text())["ops"]["rmsnorm"]
    assert data["entries"] == {"e0": 3} and data["fallbacks"] == {"no entry covers the shape": 2}
    assert {(s["axes"]["M"], s["calls"], s["covered"]) for s in data["shapes"]} == {(8, 3, True), (64, 2, False)}
    from kernelloop.deliver.package.counts import workloads_from_counts
    from kernelloop.core.spec import load_op
    wls = workloads_from_counts(counts, load_op(ops_dir() / "rmsnorm").spec)
    assert {(w.axes["M"], w.weight) for w in wls} == {(8, 3.0), (64, 2.0)}
    assert workloads_from_counts(counts, load_op(ops_dir() / "rmsnorm").spec, uncovered_only=True)[0].axes["M"] == 64


def test_torch_op_runs_eagerly_and_under_compile_fullgraph(package_dir):
    pkg = load_package(package_dir).register()
    op = pkg["rmsnorm"].torch_op
    x, w = torch.randn(9, 256).half(), torch.ones(256, dtype=torch.float16)
    eager = op(x, w, 1e-6)
    fn = torch.compile(lambda a, b: op(a, b, 1e-6) * 2, fullgraph=True, backend="eager")
    assert torch.equal(fn(x, w), eager * 2)
    assert pkg["rmsnorm"].hits["e0"] == 2
    again = load_package(package_dir).register()   # a second load re-points the same torch ops
    again["rmsnorm"].torch_op(x, w, 1e-6)
    assert again["rmsnorm"].hits["e0"] == 1


@pytest.mark.parametrize("what", ["kernel", "table", "manifest", "extra", "missing"])
def test_a_changed_package_refuses_to_load(package_dir, tmp_path, what):
    p = tmp_path / "p"
    shutil.copytree(package_dir, p)
    kernel = next((p / "ops/rmsnorm/kernels").iterdir())
    if what == "kernel":
        kernel.write_text(kernel.read_text() + "\n# changed\n")
    elif what == "table":
        f = p / "ops/rmsnorm/dispatch.json"
        f.write_text(f.read_text().replace('"hi": 40', '"hi": 4000'))
    elif what == "manifest":
        f = p / "kernelloop-package.json"
        f.write_text(f.read_text().replace('"version": "0.1.0"', '"version": "0.1.1"'))
    elif what == "extra":
        (p / "ops/rmsnorm/kernels/helper.py").write_text("x = 1\n")
    else:
        kernel.unlink()
    with pytest.raises(PackageError, match={"kernel": "changed after export", "table": "changed after export",
                                            "manifest": "manifest was changed", "extra": "not in the manifest",
                                            "missing": "missing"}[what]):
        load_package(p)


def test_another_environment_runs_the_reference_with_a_warning(package_dir, monkeypatch):
    monkeypatch.setattr(runtime, "current_versions", lambda: {"torch": "2.99.0", "triton": "3.9.0"})
    with pytest.warns(UserWarning, match="torch 2.99"):
        k = load_package(package_dir)["rmsnorm"]
    x, w = torch.randn(8, 256).half(), torch.ones(256, dtype=torch.float16)
    k(x, w)
    assert not k.hits["e0"] and "torch 2.99" in next(iter(k.fallbacks))


def test_a_package_from_another_gpu_runs_the_reference_saying_why(package_dir, monkeypatch):
    k = load_package(package_dir)["rmsnorm"]
    monkeypatch.setattr(k, "arch", lambda device: "sm_80")
    k(torch.randn(8, 256).half(), torch.ones(256, dtype=torch.float16))
    assert not k.hits["e0"] and next(iter(k.fallbacks)) == ("the package was verified on interpret; this device is "
                                                            "sm_80")


def test_a_run_without_passed_trials_is_not_packaged(tmp_path):
    """A run whose every trial failed (an op folder whose reference is not what its kernels compute: each verdict
    WRONG) is archived, exits 1 and is not packaged."""
    op = tmp_path / "ops" / "rmsnorm"
    shutil.copytree(ops_dir() / "rmsnorm", op)
    (op / "reference.py").write_text("def reference(x, weight, eps):\n    return x * weight\n")
    out = tmp_path / "empty"
    wl = tmp_path / "empty.toml"
    wl.write_text(RMS.split("[[workload]]")[0] + "[[workload]]" + RMS.split("[[workload]]")[1])
    p = subprocess.run([sys.executable, "-m", "kernelloop.cli.app", "optimize", str(op), "--workloads", str(wl),
                        "--budget", "1", "--no-confirm", "--out", str(out), "--template", "rowwise"], cwd=ROOT,
                       capture_output=True, timeout=600)
    assert p.returncode == 1, p.stdout.decode()[-2000:]   # it ran, nothing passed
    with pytest.raises(ExportError, match="no PASSED"):
        export_package([out], ExportOptions(out=tmp_path / "o", ops_root=tmp_path / "ops"))
    assert not (tmp_path / "o").exists()


def test_interpreter_packages_do_not_run_in_a_compiling_process(package_dir, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.warns(UserWarning, match="Triton interpreter"):
        k = load_package(package_dir)["rmsnorm"]
    assert k.disabled


def test_bad_exports_are_refused_with_a_reason(run_dir, tmp_path):
    with pytest.raises(ExportError, match="no archive"):
        export_package([tmp_path], ExportOptions(out=tmp_path / "o1"))
    with pytest.raises(ExportError, match="applies to none"):
        export_package([run_dir], ExportOptions(out=tmp_path / "o2", ops_root=ops_dir(), extend=["Q=1:4"]))
    with pytest.raises(ExportError, match="no axis"):
        export_package([run_dir], ExportOptions(out=tmp_path / "o2", ops_root=ops_dir(), extend=["rmsnorm.Q=1:4"]))
    with pytest.raises(ExportError, match="domain"):
        export_package([run_dir], ExportOptions(out=tmp_path / "o2", ops_root=ops_dir(), extend=["M=0:4"]))
    with pytest.raises(ExportError, match="same op"):
        export_package([run_dir, run_dir], ExportOptions(out=tmp_path / "o3", ops_root=ops_dir()))
    ops = tmp_path / "ops"
    shutil.copytree(ops_dir() / "rmsnorm", ops / "rmsnorm")
    (ops / "rmsnorm/reference.py").write_text((ops / "rmsnorm/reference.py").read_text() + "\n# edited\n")
    with pytest.raises(ExportError, match="changed since run"):
        export_package([run_dir], ExportOptions(out=tmp_path / "o4", ops_root=ops))
    assert not (tmp_path / "o4").exists()


def test_a_proved_ptx_edit_travels_with_its_entry_and_runs_only_where_proved(run_dir, tmp_path):
    """A PTX-level edit of the run's winner (archived with its parent and diff; its proof report written here as
    the export's input, verdict FASTER) is attached to the entry with its provenance; the package hashes its files;
    in this process (the interpreter) the runtime keeps the source-level kernel and says why."""
    import triton

    from kernelloop.core.archive import Archive
    from kernelloop.tune.ptx.archive import put_candidate, put_proof
    from kernelloop.tune.ptx.patch import edited_ptx
    from kernelloop.tune.ptx.prove import ProofReport, TimingComparison
    from kernelloop.tune.ptx.recover import from_candidate
    from kernelloop.tune.ptx.rules import propose
    from kernelloop.tune.select.pareto import best_per_workload
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    with Archive(run / "archive.sqlite") as a:
        run_id = a.runs()[0]["id"]
        wid, trial = sorted(best_per_workload(a.trials(run_id)).items())[0]
        cand, w = a.get_candidate(trial.candidate_id), a.get_workload(wid)
        (k,), why = from_candidate(cand, w)
        edit = propose(k, parent=cand.id, rules=["cache_hint"])[0]
        report = ProofReport(candidate_id=edit.id, parent_candidate_id=cand.id, kernel=k.name, rule=edit.rule,
                             executor="written by the test", stage="done", verdict="faster", verifier="passed",
                             timing=TimingComparison(workload=w.label, original_us=10.0, edited_us=9.0,
                                                     speedup=1.111, ci_low=1.05, ci_high=1.15, verdict="FASTER",
                                                     samples=60, policy="cold-l2-events"),
                             environment={"triton": triton.__version__, "arch": "interpret"})
        put_candidate(a, edit, k.ptx)
        put_proof(a, run_id, wid, report)
    out = tmp_path / "pkg"
    export_package([run], ExportOptions(out=out, ops_root=ops_dir(), ranges=False, ptx=True))
    table = json.loads((out / "ops" / "rmsnorm" / "dispatch.json").read_text())
    (entry,) = [e for e in table["entries"] if e["candidate_id"] == cand.id][:1]
    o = entry["ptx"]
    assert o["edit_id"] == edit.id and o["speedup"] == 1.111 and o["arch"] == "interpret" and o["rule"] == edit.rule
    manifest = json.loads((out / "kernelloop-package.json").read_text())
    for f in (o["file"], o["diff"], o["proof"]):
        assert f"ops/rmsnorm/{f}" in manifest["files"]
    assert (out / "ops" / "rmsnorm" / o["file"]).read_text() == edited_ptx(edit, k.ptx)
    assert "--- a/" in (out / "ops" / "rmsnorm" / o["diff"]).read_text()
    pkg = load_package(out)
    kern = pkg["rmsnorm"]
    assert kern.ptx[entry["id"]].startswith("not used: no CUDA device")
    x = torch.randn(5, 256).half()
    wgt = (1 + 0.1 * torch.randn(256)).half()
    ref = torch.nn.functional.rms_norm(x.double(), (256,), wgt.double(), 1e-6)
    assert (kern(x, wgt).double() - ref).abs().max() < 1e-2 and kern.hits[entry["id"]] == 1
    plain = tmp_path / "plain"
    export_package([run], ExportOptions(out=plain, ops_root=ops_dir(), ranges=False))
    assert all(e.get("ptx") is None for e in json.loads((plain / "ops" / "rmsnorm" / "dispatch.json").read_text())
               ["entries"])
