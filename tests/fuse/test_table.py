"""The pattern table on its own: admission rules, conditions, confirmation and eviction by a GPU measurement,
durability across connections. Records are built by hand here; tests/fuse/test_fuse_pipeline.py drives it with real
runs."""

from __future__ import annotations

from kernelloop.deliver.fuse.evidence import Evidence, WorkloadEvidence
from kernelloop.deliver.fuse.plans import OpPlan, PortPlan
from kernelloop.deliver.fuse.table import Conditions, PatternTable, facts_of
from kernelloop.base.records.measurement import Comparison, Ratio

PLAN = OpPlan(kind="add_norm", family="residual_add_norm", signature="sig-x", steps=[0, 1], dtype="bf16",
              inputs=[PortPlan(name="a", axes=["M", "N"], operand="in0")],
              outputs=[PortPlan(name="y", axes=["M", "N"], operand="%1")], axes={"M": "s0", "N": "s1"},
              scalars={"eps": 1e-6}, workloads=[{"M": 16, "N": 64}])


def _ev(device: str, verdict: str | None, status: str = "PASSED", m: int = 16, run: str = "r-1") -> Evidence:
    ratio = None if verdict is None else Ratio(baseline="eager", speedup=1.3 if verdict == "FASTER" else 1.0,
                                               ci_low=1.2, ci_high=1.4, verdict=Comparison(verdict))
    return Evidence(run_id=run, run_dir="/x", device=device, source="search", proposer="search:staged", trials=1,
                    workloads=[WorkloadEvidence(axes={"M": m, "N": 64}, dtype="bf16", status=status,
                                                candidate_id="c-1", vs_eager=ratio)])


def _admit(t: PatternTable, ev: Evidence) -> str:
    return t.admit("pat-1", PLAN, ["aten.add.Tensor"], "add_norm", "SRC", {"ROWS": 1}, "c-1", ev, "sha")


def test_interpreter_admits_on_verification_then_a_gpu_confirms_or_evicts(tmp_path):
    path = tmp_path / "p.sqlite"
    with PatternTable(path) as t:
        assert _admit(t, _ev("interpret", None)) == "speed not measured"
        e = t.find("pat-1", "add_norm")
        assert e.status == "unmeasured" and e.conditions.axes == {"M": [16], "N": [64]}
        assert e.conditions.facts == ["N % 16 == 0"]          # M is varied by the verifier itself: no condition
    with PatternTable(path) as t:                              # durable: a new connection reads it back
        e = t.find("pat-1", "add_norm")
        plan2 = PLAN.model_copy(update={"scalars": {"eps": 1e-5}})
        assert t.reverified(e, plan2, _ev("cuda", "FASTER", m=15, run="r-2")) == "hit: confirmed on the GPU"
        e = t.find("pat-1", "add_norm")
        assert e.status == "admitted" and e.conditions.scalars == {"eps": [1e-6, 1e-5]}
        assert e.conditions.axes["M"] == [15, 16] and [x.run_id for x in e.evidence] == ["r-1", "r-2"]
        assert t.reverified(e, PLAN, _ev("cuda", "SAME", run="r-3")).startswith("evicted")
        assert t.find("pat-1", "add_norm") is None and t.get("pat-1", "add_norm").status == "evicted"
        assert [x["event"] for x in t.log("pat-1")] == ["admitted-unmeasured", "confirmed", "evicted"]


def test_only_passed_and_faster_enter(tmp_path):
    with PatternTable(tmp_path / "p.sqlite") as t:
        assert _admit(t, _ev("cuda", "SAME")).startswith("not admitted: SAME")
        assert _admit(t, _ev("interpret", None, status="WRONG_VALUES")).startswith("not admitted")
        assert t.get("pat-1", "add_norm") is None
        assert _admit(t, _ev("cuda", "FASTER")) == "admitted"
        assert [x["event"] for x in t.log()] == ["rejected", "rejected", "admitted"]


def test_a_failed_reverification_keeps_the_entry_and_says_so(tmp_path):
    with PatternTable(tmp_path / "p.sqlite") as t:
        _admit(t, _ev("interpret", None))
        e = t.find("pat-1", "add_norm")
        assert "failed" in t.reverified(e, PLAN, _ev("interpret", None, status="WRONG_VALUES", m=7))
        e = t.find("pat-1", "add_norm")
        assert e.conditions.axes["M"] == [16] and len(e.evidence) == 2


def test_conditions():
    c = Conditions(dtypes=["bf16"], scalars={"eps": [1e-6]}, axes={"M": [16], "N": [64]},
                   facts=facts_of([{"M": 16, "N": 64}], ["M"]), template_sha256="sha")
    ok = [{"M": 15, "N": 64}]
    assert c.unmet("bf16", {"eps": 1e-5}, ok, "sha") == ""               # new shapes and eps: re-verified
    assert "template source" in c.unmet("bf16", {"eps": 1e-6}, ok, "other")
    assert "fp16" in c.unmet("fp16", {"eps": 1e-6}, ok, "sha")
    assert "N % 16 == 0" in c.unmet("bf16", {"eps": 1e-6}, [{"M": 16, "N": 72}], "sha")
    assert "axes" in c.unmet("bf16", {"eps": 1e-6}, [{"M": 16}], "sha")



def test_evidence_device_is_a_device_record_stored_as_its_text():
    ev = _ev("interpret", None)
    assert ev.device.is_interpret and not ev.device.is_cuda and ev.speed == "not measured"
    assert ev.model_dump(mode="json")["device"] == "interpret" and Evidence.model_validate_json(ev.to_json()) == ev
    gpu = _ev("cuda", "FASTER")
    assert gpu.device.is_cuda and gpu.speed == "FASTER"
