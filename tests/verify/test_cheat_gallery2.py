"""The second cheat gallery (tests/fixtures/cheats2): attacks on the surfaces around the kernel -- the workspace and
the key folder, helper modules, every output of a multi-output op, inputs that betray the verifier, the device, and
an exported package -- each with its expected verdict; and the honest kernel of every op still PASSES under the
sandbox and the ATen recorder.

Candidates that the source rules would refuse run here with the rules off (as code the rules cannot see would):
what is tested is the layer behind them (core/sandbox/policy.py, core/execute/aten.py, the verification battery, the
package's manifest).
"""

import ast
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import COLD_L2_EVENTS, INTERPRETER_WALLCLOCK
from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import device_properties
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.spec.space import prune
from kernelloop.core.verify.rules import check_source

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats2"
W = Workload(op="layernorm", axes={"M": 8, "N": 256}, dtype="fp32")

# file -> (expected status, the words the verdict's message starts with)
EXPECTED = {
    "reads_workspace_archive.py": (Status.REJECTED, "sandbox: open('{ws}/.kernelloop/run-interpret/archive.sqlite'"),
    "reads_key_folder.py": (Status.REJECTED, "sandbox: os.listdir('{home}/.config/kernelloop/keys')"),
    "helper_module.py": (Status.REJECTED, "aten-op: the launch issued aten.native_layer_norm"),
    "detects_verifier_distribution.py": (Status.WRONG_VALUES, "y: "),
    "pair_garbage_second_output.py": (Status.WRONG_VALUES, "z: "),
    "detects_device.py": (Status.WRONG_VALUES, "y: "),   # on a GPU only (gpu tier)
}


def source(name: str) -> str:
    return (CHEATS / name).read_text()


def test_every_cheat_is_listed_and_names_its_attack():
    assert {p.name for p in CHEATS.glob("*.py")} == set(EXPECTED)
    for name in EXPECTED:
        doc = ast.get_docstring(ast.parse(source(name)))
        assert doc and doc.startswith("Attack: "), name


def test_the_source_rules_refuse_the_ones_they_can_see(layernorm):
    # where the rules can read the source they refuse the file, import and host-side reads; the layers behind them
    # are tested below with the rules off. The device check is a plain kernel only a GPU run can judge.
    seen = {"reads_workspace_archive.py": "file-or-env-access", "reads_key_folder.py": "file-or-env-access",
            "helper_module.py": "file-or-env-access", "detects_verifier_distribution.py": "torch-on-hot-path"}
    for name, rule in seen.items():
        assert rule in {h.rule for h in check_source(source(name), layernorm.spec)}, name
    assert check_source(source("detects_device.py"), layernorm.spec) == []


@pytest.fixture()
def workspace(tmp_path, monkeypatch):
    """An agent's workspace with a run folder, the worker started from it (PWD names it)."""
    ws = tmp_path / "ws"
    run = ws / ".kernelloop" / "run-interpret"
    run.mkdir(parents=True)
    (run / "archive.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 64)
    monkeypatch.setenv("PWD", str(ws))
    return ws


@pytest.fixture()
def evaluator(layernorm, tmp_path, workspace):
    worker = Worker("interpret", tmp_path / "worker")
    ev = Evaluator(layernorm, "interpret", worker, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}),
                   secret="gallery-2", checks=2, timeouts=Timeouts(check=60.0, bench=60.0), static_rules=False)
    yield ev
    worker.close()


@pytest.mark.parametrize("name", ["reads_workspace_archive.py", "reads_key_folder.py", "helper_module.py",
                                  "detects_verifier_distribution.py"])
def test_a_layernorm_cheat_gets_its_status(evaluator, workspace, tmp_path, name):
    (Path.home() / ".config" / "kernelloop" / "keys").mkdir(parents=True, exist_ok=True)
    status, words = EXPECTED[name]
    ev = evaluator.evaluate(Candidate(op="layernorm", template="custom", source=source(name), config={}), W,
                            tmp_path / "job")
    assert ev.verdict.status is status, ev.verdict
    assert ev.verdict.message.startswith(words.format(ws=workspace, home=Path.home())), ev.verdict.message
    assert ev.measurement is None


def test_garbage_in_the_second_output_is_caught(tmp_path):
    from test_reference_outputs import make_op   # the two-output test op "pair" (y = 2x, z = row sums)
    bundle = load_op(make_op(tmp_path))
    worker = Worker("interpret", tmp_path / "worker")
    try:
        ev = Evaluator(bundle, "interpret", worker, INTERPRETER_WALLCLOCK, secret="pair-2", checks=2,
                       timeouts=Timeouts(check=60.0, bench=60.0))
        w = Workload(op="pair", axes={"M": 5, "N": 40}, dtype="fp32")
        honest = ev.evaluate(Candidate(op="pair", template="rows", source=bundle.template_sources["rows"],
                                       config={"GARBAGE": 0}), w, tmp_path / "a")
        bad = ev.evaluate(Candidate(op="pair", template="custom", source=source("pair_garbage_second_output.py"),
                                    config={}), w, worker.work_dir / "b")   # in the worker's view: no restart
    finally:
        worker.close()
    assert honest.verdict.status is Status.PASSED, honest.verdict
    status, words = EXPECTED["pair_garbage_second_output.py"]
    assert bad.verdict.status is status and bad.verdict.message.startswith(words), bad.verdict
    assert [m.mismatched for m in bad.verdict.metrics][0] == 0   # y is exact: only z is wrong


@pytest.mark.gpu
def test_a_kernel_that_cheats_only_off_the_interpreter_is_caught_on_the_device(layernorm, tmp_path):
    worker = Worker("cuda", tmp_path / "worker")
    try:
        ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS.model_copy(update={"samples": 20}),
                       secret="gallery-2-gpu", checks=2, timeouts=Timeouts(check=60.0, bench=120.0))
        verdict = ev.evaluate(Candidate(op="layernorm", template="custom", source=source("detects_device.py"),
                                        config={}),
                              Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16"),
                              tmp_path / "job").verdict
    finally:
        worker.close()
    assert verdict.status is EXPECTED["detects_device.py"][0], verdict


# ---- the honest kernel of every op --------------------------------------------------------------------------

def _first_workload(folder: Path) -> Workload:
    entry = tomllib.loads((folder / "workloads-interpret.toml").read_text())["workload"][0]
    return Workload(op=folder.name, axes=entry["axes"], dtype=entry["dtype"])


OPS = sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())


@pytest.fixture(scope="module")
def honest_worker(tmp_path_factory):
    worker = Worker("interpret", tmp_path_factory.mktemp("honest-worker"))
    yield worker
    worker.close()


@pytest.mark.parametrize("op", OPS)
def test_the_honest_kernel_of_every_op_passes_under_the_sandbox(honest_worker, op):
    bundle = load_op(ops_dir() / op)
    w = _first_workload(bundle.folder)
    props = device_properties("interpret")
    template, config = next((t, kept[0]) for t in bundle.spec.templates
                            if t.name in bundle.template_sources
                            for kept in [prune(t, w, props)[0]] if kept)
    ev = Evaluator(bundle, "interpret", honest_worker, INTERPRETER_WALLCLOCK.model_copy(update={"samples": 3}),
                   secret=f"honest-{op}", checks=2, timeouts=Timeouts(check=300.0, bench=300.0))
    result = ev.evaluate(Candidate(op=op, template=template.name, source=bundle.template_sources[template.name],
                                   config=config), w, honest_worker.work_dir / f"job-{op}")   # in its view
    assert result.verdict.status is Status.PASSED, result.verdict


# ---- a package file changed after export --------------------------------------------------------------------

NO_OP = '''"""Writes nothing: whatever the output buffer held is returned as the answer."""


def launch(*args, **kwargs):
    return None
'''


@pytest.fixture(scope="module")
def package_dir(tmp_path_factory, persistent_rmsnorm_runs):
    """A package exported from rmsnorm's persistent template pinned to PROGRAMS_PER_SM=1,num_warps=4,PREFETCH=0 on
    M 5 at N 256, fp16 (budget 1, no confirmation; tests/conftest.py runs it beside the other modules' runs)."""
    from kernelloop.deliver.package.export import ExportOptions, export_package
    out = tmp_path_factory.mktemp("pkg2") / "p"
    export_package([persistent_rmsnorm_runs["tests/verify/test_cheat_gallery2.py"]],
                   ExportOptions(out=out, ops_root=ops_dir(), extend=["M=1:8"], interior=1))
    return out


@pytest.mark.parametrize("how", ["kernel replaced by a cheat", "kernel and its manifest entry replaced"])
def test_a_package_changed_after_export_refuses_to_load(package_dir, tmp_path, how):
    import hashlib
    import json

    from kernelloop.deliver.package import PackageError, load_package
    p = tmp_path / "p"
    shutil.copytree(package_dir, p)
    kernel = next((p / "ops/rmsnorm/kernels").iterdir())
    old = hashlib.sha256(kernel.read_bytes()).hexdigest()
    kernel.write_text(NO_OP)
    expected = "changed after export (sha256 differs"
    if how.startswith("kernel and"):
        manifest = p / "kernelloop-package.json"
        data = json.loads(manifest.read_text())
        data["files"] = {k: (hashlib.sha256(NO_OP.encode()).hexdigest() if v == old else v)
                         for k, v in data["files"].items()}
        manifest.write_text(json.dumps(data))
        expected = "the manifest was changed after export"
    with pytest.raises(PackageError, match=re.escape(expected)):
        load_package(p)
