"""The proposal schema and its local validation: JSON extraction, schema, unified diffs, the launch interface."""

import json

import pytest

from llm_script import GOOD, proposal
from kernelloop.tune.propose.proposal import (KernelProposal, ProposalInvalid, apply_unified_diff, check_interface,
                                         extract_json, materialize, parse_proposal, proposal_json_schema)
from kernelloop.base.records import Candidate


def test_json_schema_describes_every_field():
    schema = proposal_json_schema()
    assert set(schema["properties"]) == {"language", "source", "patch", "parent_ids", "config", "space", "rationale",
                                         "hypothesis", "cites", "schedule"}
    assert set(schema["required"]) == {"rationale", "hypothesis"}
    assert schema["additionalProperties"] is False
    json.dumps(schema)


def test_extract_json_from_fences_and_prose():
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Here:\n```json\n{"a": 2}\n```\nthanks') == {"a": 2}
    assert extract_json('I think {"a": 3} is it') == {"a": 3}
    with pytest.raises(ProposalInvalid, match="not valid JSON"):
        extract_json('{"a": ')


@pytest.mark.parametrize("change, why", [
    ({"source": None}, "exactly one of 'source', 'patch' and 'schedule'"),
    ({"patch": "@@ -1 +1 @@\n-a\n+b\n"}, "exactly one"),
    ({"source": None, "patch": "@@ -1 +1 @@\n-a\n+b\n"}, "needs parent_ids"),
    ({"config": {"A": 1}, "space": {"A": [1]}}, "not both"),
    ({"config": None, "space": {"A": []}}, "empty"),
    ({"hypothesis": {"metrics": [{"metric": "latency_us", "direction": "up"}], "latency_change_pct": -5}},
     "contradicts"),
    ({"hypothesis": {"metrics": [], "latency_change_pct": -5}}, "at least 1"),
    ({"language": "cuda"}, "language"),
    ({"rationale": ""}, "rationale"),
    ({"surprise": 1}, "surprise"),
])
def test_schema_violations_name_the_problem(change, why):
    value = {**json.loads(proposal(source=GOOD, config={"BLOCK": 64})), **change}
    value = {k: v for k, v in value.items() if v is not None}
    with pytest.raises(ProposalInvalid, match=why):
        parse_proposal(json.dumps(value))


def test_hypothesis_text_adds_the_latency_expectation():
    p = parse_proposal(proposal(source=GOOD, config={"BLOCK": 64}, latency=-12.5, metrics=[("sol_dram_pct", "up")]))
    assert p.hypothesis.text() == "sol_dram_pct up; latency_us down -12.5%"
    same = parse_proposal(proposal(source=GOOD, latency=0, metrics=[("registers", "down")]))
    assert same.hypothesis.text() == "registers down; latency_us same"


def test_unified_diff_applies_with_offset_and_reports_failures():
    src = "a\nb\nc\nd\ne\n"
    assert apply_unified_diff(src, "@@ -2,2 +2,2 @@\n b\n-c\n+C\n") == "a\nb\nC\nd\ne\n"
    # the stated line is off by two: the context is found nearby, as `patch` does
    assert apply_unified_diff(src, "@@ -1,1 +1,2 @@\n d\n+d2\n") == "a\nb\nc\nd\nd2\ne\n"
    two = "--- a/k.py\n+++ b/k.py\n@@ -1,1 +1,1 @@\n-a\n+A\n@@ -5,1 +5,1 @@\n-e\n+E\n"
    assert apply_unified_diff(src, two) == "A\nb\nc\nd\nE\n"
    with pytest.raises(ProposalInvalid, match="hunk 1 .* does not apply"):
        apply_unified_diff(src, "@@ -1,1 +1,1 @@\n-zzz\n+y\n")
    with pytest.raises(ProposalInvalid, match="outside any hunk"):
        apply_unified_diff(src, "just text")
    with pytest.raises(ProposalInvalid, match="no hunk"):
        apply_unified_diff(src, "--- a/k.py\n+++ b/k.py\n")
    with pytest.raises(ProposalInvalid, match="neither"):
        apply_unified_diff(src, "@@ -1,1 +1,1 @@\n*a\n")


def test_interface_check(layernorm):
    spec = layernorm.spec
    check_interface(GOOD, spec, {"BLOCK", "num_warps"})
    with pytest.raises(ProposalInvalid, match="requires \\['BLOCK'\\]"):
        check_interface(GOOD, spec, set())
    with pytest.raises(ProposalInvalid, match="does not accept"):
        check_interface(GOOD, spec, {"BLOCK", "ROWS"})
    with pytest.raises(ProposalInvalid, match="positionally"):
        check_interface("def launch(x, y, *, eps):\n    pass\n", spec, set())
    with pytest.raises(ProposalInvalid, match="no top-level function `launch`"):
        check_interface("def run(x):\n    pass\n", spec, set())
    with pytest.raises(ProposalInvalid, match="does not parse: line 1"):
        check_interface("def launch(:\n", spec, set())
    check_interface("def launch(*tensors, **kw):\n    pass\n", spec, {"ANY"})


def test_materialize_patch_space_and_lineage(layernorm):
    parent = Candidate(op="layernorm", template="custom", source=GOOD, config={"BLOCK": 64})
    patch = ("@@ -1,1 +1,1 @@\n-\"\"\"LayerNorm, one program per row, the whole row in registers.\"\"\"\n"
             "+\"\"\"v2\"\"\"\n")
    p = parse_proposal(proposal(patch=patch, parents=[parent.id], space={"BLOCK": [64, 128], "num_warps": [1, 2]}))
    cands = materialize(p, layernorm.spec, {parent.id: parent}, proposer="llm:test", known_cites=set())
    assert [c.config for c in cands] == [{"BLOCK": 64, "num_warps": 1}, {"BLOCK": 64, "num_warps": 2},
                                         {"BLOCK": 128, "num_warps": 1}, {"BLOCK": 128, "num_warps": 2}]
    assert all(c.source.startswith('"""v2"""') and c.parent_ids == [parent.id] and c.proposer == "llm:test"
               for c in cands)
    with pytest.raises(ProposalInvalid, match="unknown parent"):
        materialize(p, layernorm.spec, {}, proposer="x")
    cited = KernelProposal.model_validate({**p.model_dump(), "cites": ["E-NOPE"]})
    with pytest.raises(ProposalInvalid, match="unknown knowledge id"):
        materialize(cited, layernorm.spec, {parent.id: parent}, proposer="x", known_cites={"E-YES"})
    big = parse_proposal(proposal(source=GOOD, space={"BLOCK": list(range(5)), "num_warps": list(range(4))}))
    with pytest.raises(ProposalInvalid, match="20 configurations"):
        materialize(big, layernorm.spec, {}, proposer="x")
