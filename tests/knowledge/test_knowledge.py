"""The knowledge base: the shipped files load and validate; malformed files fail naming file and entry."""

import textwrap

import pytest

from kernelloop.base.records.device import DeviceProperties
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.tune.knowledge import EVIDENCE_NAMES, KnowledgeError, check_fact, load_file, load_knowledge
from kernelloop.tune.knowledge.loader import default_dir


@pytest.fixture(scope="module")
def kb():
    return load_knowledge()


def test_shipped_knowledge_loads(kb):
    assert default_dir().name == "knowledge" and (default_dir() / "hopper-facts.toml").is_file()
    assert {"F-SM90-SMEM-PER-SM", "F-H200-SM-COUNT", "F-H200-COPY-BANDWIDTH"} <= set(kb.facts)
    assert {"E-SPILL-MORE-WARPS", "E-ISSUE-BOUND-FEWER-WARPS", "E-ROW-LENGTH-NOT-MULTIPLE-OF-16"} <= set(kb.experience)
    assert kb.facts["F-SM90-SMEM-PER-SM"].check.value == 228 * 1024
    assert kb.citation("F-H200-SM-COUNT") == "F-H200-SM-COUNT (hopper-facts.toml@2026.12.1)"
    for e in kb.experience.values():   # experience keeps its condition, evidence and citations
        assert e.when and e.evidence and not kb.check_citations(e.cites)
        for x in e.expect:
            assert x.metric in EVIDENCE_NAMES
    assert all(i.startswith("E-") for i in kb.experience) and all(i.startswith("F-") for i in kb.facts)  # apart


H200 = DeviceProperties(name="NVIDIA H200", virtual=False, sm_count=132, capability=(9, 0), shared_per_sm=233472,
                        shared_per_block_optin=232448, regs_per_sm=65536, max_threads_per_sm=2048,
                        max_threads_per_block=1024, max_regs_per_thread=255, warp_size=32, l2_bytes=62914560,
                        total_memory=150_000_000_000)


def test_fact_checks(kb):
    statuses = {f.id: check_fact(f, H200, {"copy_gbps": 3350.0}).status for f in kb.facts.values()}
    assert set(statuses.values()) == {"holds"}
    wrong = check_fact(kb.facts["F-SM90-SMEM-PER-SM"], H200.with_(shared_per_sm=101376))
    assert wrong.status == "violated" and "101376" in wrong.note
    assert check_fact(kb.facts["F-H200-COPY-BANDWIDTH"], H200, {"copy_gbps": 2100.0}).status == "violated"
    assert check_fact(kb.facts["F-H200-COPY-BANDWIDTH"], H200).status == "unknown"   # not measured yet
    a100 = H200.with_(name="NVIDIA A100-SXM4-80GB", capability=[8, 0])
    assert check_fact(kb.facts["F-H200-SM-COUNT"], a100).status == "not-applicable"
    assert check_fact(kb.facts["F-SM90-REGS-PER-SM"], a100).status == "not-applicable"
    assert check_fact(kb.facts["F-H200-SM-COUNT"], VIRTUAL_HOPPER).status == "unknown"
    assert check_fact(kb.facts["F-H200-L2"], H200.with_(l2_bytes=50 << 20)).status == "violated"


GOOD_FACT = """
[[fact]]
id = "F-X"
statement = "x"
check = { property = "sm_count", value = 1 }
source = "s"
"""

GOOD_EXP = """
[[experience]]
id = "E-X"
statement = "x"
when = "bottleneck == 'compute-bound' and num_warps > 1"
requires = ["num_warps"]
moves = [{ param = "num_warps", step = "down" }]
expect = [{ metric = "latency_us", direction = "down", magnitude = -0.1 }]
evidence = ["e"]
cites = ["F-X"]
confidence = "low"
"""


def _write(tmp_path, name, body, schema=1):
    p = tmp_path / name
    p.write_text(f'schema = {schema}\nversion = "t1"\n' + textwrap.dedent(body))
    return p


def test_minimal_files_load(tmp_path):
    _write(tmp_path, "a.toml", GOOD_FACT)
    _write(tmp_path, "b.toml", GOOD_EXP)
    kb = load_knowledge(tmp_path)
    assert set(kb.facts) == {"F-X"} and set(kb.experience) == {"E-X"}
    h = kb.experience["E-X"].expect[0].hypothesis()
    assert h.metric == "latency_us" and h.magnitude == -0.1


@pytest.mark.parametrize("body, match", [
    (GOOD_EXP.replace("num_warps > 1", "num_wraps > 1"), r"E-X: .*unknown name\(s\) \['num_wraps'\]"),
    (GOOD_EXP.replace('param = "num_warps"', 'param = "ROWS"'), "list it in 'requires'"),
    (GOOD_EXP.replace("magnitude = -0.1", "magnitude = 0.1"), "contradicts"),
    (GOOD_EXP.replace('metric = "latency_us"', 'metric = "latency"'), r"unknown metric\(s\) \['latency'\]"),
    (GOOD_EXP.replace('step = "down"', 'step = "any"'), "at least one parameter"),
    (GOOD_EXP.replace("num_warps > 1", "__import__('os')"), "not allowed|may be called"),
    (GOOD_EXP.replace('id = "E-X"', 'id = "X-1"'), "pattern"),
    (GOOD_EXP.replace('evidence = ["e"]', "evidence = []"), "E-X: evidence"),
    (GOOD_FACT.replace('check = { property = "sm_count", value = 1 }\n', ""), "F-X: check"),
])
def test_malformed_entries_name_file_and_entry(tmp_path, body, match):
    _write(tmp_path, "f.toml", GOOD_FACT + body if "[[experience]]" in body else body)
    with pytest.raises(KnowledgeError, match=match) as e:
        load_knowledge(tmp_path)
    assert "f.toml" in str(e.value)


def test_cross_file_validation(tmp_path):
    _write(tmp_path, "a.toml", GOOD_FACT)
    _write(tmp_path, "b.toml", GOOD_FACT)
    with pytest.raises(KnowledgeError, match=r"b.toml: F-X: duplicate id \(first defined in a.toml\)"):
        load_knowledge(tmp_path)
    (tmp_path / "b.toml").unlink()
    _write(tmp_path, "c.toml", GOOD_EXP.replace('cites = ["F-X"]', 'cites = ["F-MISSING"]'))
    with pytest.raises(KnowledgeError, match=r"c.toml: E-X: cites unknown entry \['F-MISSING'\]"):
        load_knowledge(tmp_path)


def test_schema_version_and_syntax(tmp_path):
    with pytest.raises(KnowledgeError, match="schema 2 is not supported"):
        load_file(_write(tmp_path, "s.toml", GOOD_FACT, schema=2))
    bad = tmp_path / "t.toml"
    bad.write_text("schema = 1\nversion = \n")
    with pytest.raises(KnowledgeError, match="t.toml"):
        load_file(bad)
    with pytest.raises(KnowledgeError, match="no such knowledge"):
        load_knowledge(tmp_path / "nowhere")


@pytest.mark.gpu
def test_facts_hold_on_this_gpu(kb):
    from kernelloop.core.device import device_properties
    props = device_properties("cuda")
    results = [check_fact(f, props) for f in kb.facts.values()]
    violated = [(r.id, r.note) for r in results if r.status == "violated"]
    assert not violated, violated
