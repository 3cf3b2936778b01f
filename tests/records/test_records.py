import json
import pytest
from pydantic import ValidationError

from kernelloop.base.records import (BuildArtifact, Candidate, ErrorMetrics, Status, Trial, Verdict, Workload,
                                canonical_json)


def test_round_trip_and_frozen():
    c = Candidate(op="x", template="t", source="def launch(): pass", config={"B": 128, "w": 4}, parent_ids=["c-1"])
    assert Candidate.from_json(c.to_json()) == c
    with pytest.raises(ValidationError):
        c.op = "y"


def test_candidate_id_covers_source_and_config_only():
    a = Candidate(op="x", template="t", source="A", config={"B": 1}, proposer="p1")
    assert a.id == Candidate(op="x", template="t", source="A", config={"B": 1}, proposer="p2", hypothesis="h").id
    assert a.id != Candidate(op="x", template="t", source="A ", config={"B": 1}).id
    assert a.id != Candidate(op="x", template="t", source="A", config={"B": 2}).id


def test_canonical_json_is_order_independent():
    assert canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'


def test_workload_id_ignores_weight_but_not_axes():
    w = Workload(op="x", axes={"M": 2, "N": 3}, dtype="fp16", weight=2.0)
    assert w.id == Workload(op="x", axes={"M": 2, "N": 3}, dtype="fp16").id
    assert w.id != Workload(op="x", axes={"M": 2, "N": 4}, dtype="fp16").id
    with pytest.raises(ValidationError):
        Workload(op="x", axes={"M": 2}, dtype="fp8")


def test_verdict_requires_its_evidence():
    with pytest.raises(ValidationError, match="error metrics"):
        Verdict(status=Status.WRONG_VALUES, case="c")
    with pytest.raises(ValidationError, match="failing case"):
        Verdict(status=Status.WRONG_INCOMPLETE, message="m")
    with pytest.raises(ValidationError, match="message"):
        Verdict(status=Status.TIMEOUT)
    m = ErrorMetrics(output="y", max_abs=1.0, max_rel=1.0, mismatched=3, total=10)
    v = Verdict(status=Status.WRONG_VALUES, case="c", metrics=[m], message="bad")
    assert Verdict.from_json(v.to_json()) == v


def test_trial_round_trip_with_discriminated_build():
    b = BuildArtifact(registers=32, spills=0, shared_bytes=0, compile_s=1.0, toolchain="triton")
    t = Trial(run_id="r", index=0, candidate_id="c", workload_id="w", manifest_hash="m", build=b,
              verdict=Verdict(status=Status.PASSED), started=0.0, finished=1.0)
    back = Trial.from_json(t.to_json())
    assert back == t and back.build.kind == "artifact"
    assert t.id.startswith("t-") and t.id == back.id


def test_tolerance_scales_atol_with_the_reduction_length():
    from kernelloop.base.records import Tolerance
    t = Tolerance(atol=1e-3, rtol=1e-2, atol_scale="sqrt_(K)")
    assert t.resolve({"K": 4096}).atol == pytest.approx(0.064)
    assert t.resolve({"K": 4096}).rtol == 1e-2
    assert Tolerance(atol=1e-3, rtol=0).resolve({"K": 9}).atol == 1e-3
    with pytest.raises(ValidationError):
        Tolerance(atol=1e-3, rtol=0, atol_scale="__import__('os')")


def test_build_artifact_keeps_the_compiled_warp_count_and_reads_records_without_it():
    b = BuildArtifact(registers=168, spills=0, shared_bytes=213464, warps=12, compile_s=1.3, toolchain="triton 3.6.0")
    assert BuildArtifact.from_json(b.to_json()).warps == 12
    old = json.loads(b.to_json())
    del old["warps"]                              # a record archived before the field existed
    assert BuildArtifact.model_validate(old).warps is None


def test_evaluate_expression_parses_once_and_still_checks_every_call():
    """The parsed, checked code of an expression is cached: the same expression with other names gives their value,
    a name missing on a later call is still refused, and a disallowed expression is refused every time."""
    from kernelloop.base.records import evaluate_expression
    from kernelloop.base.records.spec import _compiled
    expr = "cdiv(M, BLOCK_M) * num_warps + 1"
    assert evaluate_expression(expr, {"M": 100, "BLOCK_M": 64, "num_warps": 4}) == 9
    hits = _compiled.cache_info().hits
    assert evaluate_expression(expr, {"M": 129, "BLOCK_M": 64, "num_warps": 8}) == 25
    assert _compiled.cache_info().hits == hits + 1
    with pytest.raises(ValueError, match=r"unknown name\(s\) \['num_warps'\]"):
        evaluate_expression(expr, {"M": 1, "BLOCK_M": 1})
    for _ in range(2):
        with pytest.raises(ValueError, match="not allowed"):
            evaluate_expression("M.__class__", {"M": 1})


def test_a_workload_label_has_one_axis_order_whatever_the_dict_order():
    from kernelloop.base.records import Workload
    fresh = Workload(op="gemm_nt", axes={"M": 16, "N": 256, "K": 64}, dtype="fp16")
    sorted_keys = Workload(op="gemm_nt", axes={"K": 64, "M": 16, "N": 256}, dtype="fp16")   # as JSON stores it
    back = Workload.from_json(fresh.to_json())
    assert fresh.label == sorted_keys.label == back.label == "gemm_nt[16x256x64]:fp16"
    assert list(back.axes) == ["M", "N", "K"] and back.id == fresh.id
    copied = fresh.model_copy(update={"axes": {"K": 8, "N": 4, "M": 2}})   # no validation: the label still orders
    assert copied.label == "gemm_nt[2x4x8]:fp16"
    att = Workload(op="attention", axes={"D": 64, "HKV": 2, "B": 1, "S": 8, "H": 4}, dtype="bf16")
    assert att.label == "attention[1x4x2x8x64]:bf16"
    assert Workload(op="x", axes={"zeta": 1, "alpha": 2}, dtype="fp16").label == "x[2x1]:fp16"
