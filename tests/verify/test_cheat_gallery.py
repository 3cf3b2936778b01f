"""The cheat gallery (tests/fixtures/cheats): every cheating candidate gets its expected verdict.

Static cheats are checked with `check_source` directly and, for one, through `Evaluator.evaluate` (the
evaluator screens every candidate with the rules before it runs). Cheats that no static rule can see run through
the real evaluator in the Triton interpreter, where the verification battery must catch them. CUDA-only cheats run
through a cuda evaluator in the gpu tier.
"""

import ast
import tomllib
from pathlib import Path

import pytest

from kernelloop.core.bench.policy import COLD_L2_EVENTS
from kernelloop.core.execute.evaluate import Evaluator, Timeouts
from kernelloop.core.execute.pool import Worker
from kernelloop.base.records import Candidate, Status, Workload
from kernelloop.core.verify.rules import RULE_IDS, check_source

CHEATS = Path(__file__).resolve().parents[1] / "fixtures" / "cheats"
MANIFEST: dict[str, dict] = tomllib.loads((CHEATS / "expected.toml").read_text())
DEFAULT_AXES = {"M": 8, "N": 256}

# DESIGN.md's attack classes: each must have at least one cheat in the gallery.
ATTACK_CLASSES = ["side-stream", "background thread", "lazy output", "aliased output", "patched timer",
                  "cached across timed calls (by pointer", "cached across timed calls (by id",
                  "cached across timed calls (by content", "after N calls", "constant or zero outputs",
                  "freed memory", "mutated inputs", "precision downgrade", "hard-coded", "expected answer from the process",
                  "library being beaten"]


def source(name: str) -> str:
    return (CHEATS / name).read_text()


def candidate(name: str) -> Candidate:
    return Candidate(op="layernorm", template="custom", source=source(name), config={}, proposer="cheat-gallery")


def workload(entry: dict) -> Workload:
    return Workload(op="layernorm", axes=entry.get("axes", DEFAULT_AXES), dtype=entry.get("dtype", "fp32"))


def params(select) -> list:
    out = []
    for name, entry in MANIFEST.items():
        if not select(entry):
            continue
        out.append(pytest.param(name, entry, id=name.removesuffix(".py")))
    return out


def is_static(e: dict) -> bool:
    return e["status"] == "REJECTED"


# ---- the gallery itself -------------------------------------------------------------------------------------

def test_manifest_lists_every_cheat_and_covers_every_attack_class():
    files = {p.name for p in CHEATS.glob("*.py")}
    assert files == set(MANIFEST), files ^ set(MANIFEST)
    assert len(files) >= 20
    for name, e in MANIFEST.items():
        assert Status(e["status"]) is not Status.PASSED, name
        assert isinstance(e.get("cuda"), bool), name
        if is_static(e):
            assert e["rule"] in RULE_IDS, name
        else:
            assert e.get("check") and "rule" not in e, name
        assert e.get("requires") in (None, "battery"), name
        doc = ast.get_docstring(ast.parse(source(name)))
        assert doc and doc.startswith("Attack: "), f"{name} must open with a docstring naming its attack"
    attacks = " | ".join(e["attack"] for e in MANIFEST.values()).lower()
    missing = [a for a in ATTACK_CLASSES if a.lower() not in attacks]
    assert not missing, missing


@pytest.mark.parametrize("name,entry", params(is_static))
def test_static_cheat_is_rejected_by_its_rule(layernorm, name, entry):
    hits = check_source(source(name), layernorm.spec)
    assert entry["rule"] in {h.rule for h in hits}, [(h.rule, h.line, h.detail) for h in hits]
    first = hits[0]
    assert first.message == f"{first.rule} at line {first.line}: {first.detail}. {first.rationale}"
    assert first.detail   # the verdict names what matched, not only the rule


@pytest.mark.parametrize("name,entry", params(lambda e: not is_static(e)))
def test_dynamic_cheat_is_invisible_to_the_static_rules(layernorm, name, entry):
    # By design: a pure Triton kernel that writes zeros or hard-codes a shape looks like any other kernel.
    assert check_source(source(name), layernorm.spec) == []


# ---- dynamic verdicts through the real evaluator (interpreter) ----------------------------------------------

@pytest.fixture(scope="module")
def evaluator(layernorm, evaluator_for):
    return evaluator_for(layernorm, "cheat-gallery", samples=3, checks=2, timeouts=Timeouts(check=60.0, bench=60.0))


def test_honest_template_passes_the_gallery_evaluator(evaluator, layernorm, job_dir):
    honest = Candidate(op="layernorm", template="rowwise", source=layernorm.template_sources["rowwise"],
                       config={"BLOCK_N": 256, "ROWS": 2, "num_warps": 4, "EVICT_FIRST": 0})
    assert check_source(honest.source, layernorm.spec) == []
    ev = evaluator.evaluate(honest, workload({}), job_dir(evaluator))
    assert ev.verdict.status is Status.PASSED, ev.verdict


@pytest.mark.parametrize("name,entry", params(lambda e: not is_static(e) and not e["cuda"]))
def test_dynamic_cheat_gets_its_status(evaluator, job_dir, name, entry):
    ev = evaluator.evaluate(candidate(name), workload(entry), job_dir(evaluator))
    assert ev.verdict.status is Status(entry["status"]), ev.verdict
    assert ev.measurement is None


def test_static_cheat_is_rejected_by_the_evaluator_before_it_runs(evaluator, job_dir):
    ev = evaluator.evaluate(candidate("library_functional.py"), workload({}), job_dir(evaluator))
    assert ev.verdict.status is Status.REJECTED, ev.verdict
    assert ev.verdict.message.startswith("library-op at line ")
    assert ev.measurement is None


# ---- CUDA-only cheats (gpu tier) ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cuda_evaluator(layernorm, tmp_path_factory):
    worker = Worker("cuda", tmp_path_factory.mktemp("gallery-gpu-worker"))
    ev = Evaluator(layernorm, "cuda", worker, COLD_L2_EVENTS.model_copy(update={"samples": 20}),
                   secret="cheat-gallery-gpu", checks=2, timeouts=Timeouts(check=60.0, bench=120.0))
    yield ev
    worker.close()


@pytest.mark.gpu
@pytest.mark.parametrize("name,entry", params(lambda e: e["cuda"]))
def test_cuda_cheat_gets_its_status_on_the_device(cuda_evaluator, tmp_path, name, entry):
    w = Workload(op="layernorm", axes=entry.get("axes", {"M": 4096, "N": 4096}), dtype=entry.get("dtype", "fp16"))
    try:
        ev = cuda_evaluator.evaluate(candidate(name), w, tmp_path / "job")
    finally:
        cuda_evaluator.worker.kill()  # a cheat that ran (patched events, side streams) must not taint the next one
    assert ev.verdict.status is Status(entry["status"]), ev.verdict
    assert ev.measurement is None
