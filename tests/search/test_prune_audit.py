"""The pruning audit's arithmetic on known builds: recall of would-fail configurations, kept failures, pruned
configurations that run, resource estimates against the builds, and the top-1 % check on a recorded space."""

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import Workload
from kernelloop.core.spec import load_op
from kernelloop.core.build.aot import BUILT, COMPILE_ERROR, BuildOutcome
from kernelloop.tune.search.prune_audit import FAILS, RUNS, SPILLS, audit, build_class, outcomes_of, top_share
from kernelloop.core.spec.space import why_pruned

PROPS = VIRTUAL_HOPPER.with_(virtual=False)
W = Workload(op="gemm", axes={"M": 4096, "N": 4096, "K": 4096}, dtype="fp16")


def gemm(**kw):
    base = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3, PERSISTENT=0, TMA=1,
                EPILOGUE="none", TRANS_B=0)
    return {**base, **kw}


def built(config, shared, regs=128, warps=8, stack=0):
    return BuildOutcome(template="tiled", config=config, status=BUILT,
                        kernels=[{"name": "_gemm_kernel", "shared": shared, "num_warps": warps, "REG": regs,
                                  "STACK": stack, "LOCAL": 0}])


def test_build_class():
    assert build_class(built(gemm(), 100_000), PROPS) == (RUNS, "")
    assert build_class(built(gemm(), 300_000), PROPS)[0] == FAILS
    assert build_class(built(gemm(), 1000, stack=8), PROPS)[0] == SPILLS
    cls, why = build_class(BuildOutcome(template="tiled", config={}, status=COMPILE_ERROR,
                                        error="CompilationError: at 3:4\nmore"), PROPS)
    assert cls == FAILS and why == "compile_error: CompilationError: at 3:4"


def test_audit_counts_recall_kept_failures_and_pruned_runners():
    t = load_op(ops_dir() / "gemm").spec.templates[0]
    too_big = gemm(BLOCK_N=256, num_stages=5)                       # pruned: shared memory estimate over the limit
    eight_warps_small = gemm(BLOCK_M=64, BLOCK_N=64)                 # pruned by a semantic rule; builds and runs
    kept_ok = gemm()
    kept_bad = gemm(num_stages=4)                                   # kept; pretend ptxas refused it
    assert why_pruned(t, W, PROPS, too_big) and why_pruned(t, W, PROPS, eight_warps_small)
    assert why_pruned(t, W, PROPS, kept_ok) is None and why_pruned(t, W, PROPS, kept_bad) is None
    outcomes = [built(too_big, 393_280), built(eight_warps_small, 40_000), built(kept_ok, 98_368),
                BuildOutcome(template="tiled", config=kept_bad, status=COMPILE_ERROR, error="ptxas error")]
    rep = audit({"tiled": t}, W, PROPS, outcomes)
    assert rep["configurations"] == 4 and rep["pruned"] == 2 and rep["kept"] == 2
    assert rep["fails"] == 2 and rep["fails_pruned"] == 1 and rep["recall"] == 0.5
    assert rep["kept_failures"] == [{"template": "tiled", "config": kept_bad, "why": "compile_error: ptxas error"}]
    assert [r["config"] for r in rep["pruned_runners"]] == [eight_warps_small]
    assert rep["classes"] == {FAILS: 2, RUNS: 2}
    # the template's shared-memory estimate against the three builds (98368 = 3 x (128x64 + 64x128) x 2 + 64)
    row = next(r for r in rep["rows"] if r["config"] == kept_ok)
    assert row["estimate"]["shared"] == 98_368 and row["shared"] == 98_368
    assert rep["estimates"]["shared_abs_error_max"] is not None
    reasons = rep["by_reason"]
    assert any("shared memory" in k and v == {FAILS: 1} for k, v in reasons.items())


def test_audit_without_failures_has_no_recall():
    t = load_op(ops_dir() / "gemm").spec.templates[0]
    rep = audit({"tiled": t}, W, PROPS, [built(gemm(), 98_368)])
    assert rep["fails"] == 0 and rep["recall"] is None and rep["pruned_runners"] == []


def test_top_share_flags_a_pruned_configuration_among_the_best():
    runners = [{"template": "tiled", "config": gemm(BLOCK_M=64, BLOCK_N=64)}]
    pruned_key_cfg = {"template": "tiled", **runners[0]["config"]}
    records = [{"config": {"template": "tiled", **gemm(num_stages=s, GROUP_M=g)},
                "results": {"w1": {"value": 100.0 + s + g, "status": "PASSED"}}} for s in (2, 3, 4, 5) for g in (1, 8)]
    records += [{"config": {"template": "tiled", **gemm(BLOCK_K=128, num_stages=s)},
                 "results": {"w1": {"value": None, "status": "COMPILE_ERROR"}}} for s in (2, 3)]
    slow = {"records": records + [{"config": pruned_key_cfg, "results": {"w1": {"value": 150.0, "status": "PASSED"}}}]}
    ok = top_share(runners, slow, "w1", share=0.25)
    assert ok["measured"] == 9 and ok["measured_pruned"] == 1 and ok["top_k"] == 3 and ok["pruned_in_top"] == []
    assert ok["best_pruned_rank"] == 9 and ok["verdict"] == "no measured pruned configuration in the top share"
    fast = {"records": records + [{"config": pruned_key_cfg, "results": {"w1": {"value": 90.0, "status": "PASSED"}}}]}
    bad = top_share(runners, fast, "w1", share=0.25)
    assert bad["best_pruned_rank"] == 1 and bad["pruned_in_top"] == [{"config": pruned_key_cfg, "us": 90.0}]
    assert bad["verdict"] == "1 pruned configuration(s) in the top share"
    # 9 measured out of 1000 that run: the top 1 % is the best 10, more than were measured
    assert top_share(runners, fast, "w1", population=1000)["verdict"] == "too few measured for the top 10"
    assert top_share(runners, fast, "w1", population=800)["top_k"] == 8
    two = runners + [{"template": "tiled", "config": gemm(BLOCK_M=32)}]
    assert top_share(two, slow, "w1", share=0.25)["verdict"] == \
        "no measured pruned configuration in the top share (incomplete: 1 not measured)"
    missing = top_share(runners, {"records": records}, "w1")
    assert missing["unmeasured_pruned"] == 1 and missing["best_pruned_rank"] is None
    assert missing["verdict"] == "no pruned configuration was measured"
    assert top_share(runners, {"records": []}, "w1")["verdict"] == "nothing measured"


def test_a_pruned_configuration_launching_what_a_kept_one_launches_is_a_twin_not_a_runner():
    t = load_op(ops_dir() / "gemm").spec.templates[0]
    kept = gemm()
    twin_cfg = gemm(BLOCK_M=64, BLOCK_N=64, num_warps=8, GROUP_M=1)    # pruned (8 warps on a 64x64 tile)
    assert why_pruned(t, W, PROPS, twin_cfg)

    def launched(config, sha, grid):
        o = built(config, 40_000)
        o.kernels[0].update(cubin_sha256=sha, grid=grid, scalars=[4096, 4096, 4096])
        return o
    other = gemm(BLOCK_M=64, BLOCK_N=64, num_warps=8)
    same_as_other = gemm(BLOCK_M=64, BLOCK_N=64, num_warps=8, num_stages=2)
    outcomes = [launched(kept, "aa", [1024]), launched(twin_cfg, "aa", [1024]), launched(other, "bb", [4096]),
                launched(same_as_other, "bb", [4096])]
    rep = audit({"tiled": t}, W, PROPS, outcomes)
    assert rep["pruned_twins"] == 1 and rep["pruned_runner_configurations"] == 2
    # one timing serves both pruned configurations that launch the same thing
    assert [(r["config"], r["same_launches"]) for r in rep["pruned_runners"]] == [(other, [same_as_other])]
    assert rep["rows"][1]["twin_of"] == {"template": "tiled", **kept} and rep["rows"][2]["twin_of"] is None
    # the report holds the builds: auditing it again gives the same answer without building
    again = audit({"tiled": t}, W, PROPS, outcomes_of(rep["rows"]))
    assert {k: v for k, v in again.items() if k != "rows"} == {k: v for k, v in rep.items() if k != "rows"}


def test_top_share_with_a_screen_counts_what_the_screen_put_beyond_its_margin():
    runners = [{"template": "tiled", "config": gemm(BLOCK_M=64, BLOCK_N=64)},
               {"template": "tiled", "config": gemm(BLOCK_M=32)},
               {"template": "tiled", "config": gemm(BLOCK_M=16)}]
    flagged = {"template": "tiled", **runners[0]["config"]}
    records = [{"config": {"template": "tiled", **gemm(num_stages=s, GROUP_M=g)},
                "results": {"w1": {"value": 100.0 + s + g, "status": "PASSED"}}} for s in (2, 3, 4, 5) for g in (1, 8)]
    records.append({"config": flagged, "results": {"w1": {"value": 150.0, "status": "PASSED"}}})
    screen = {"pruned_screened": 3, "pruned_unscreened": 0, "threshold_us": 103.0, "margin": 0.1,
              "to_confirm": [{"config": flagged, "us": 110.0}], "verdict": "1 pruned configuration(s) ..."}
    done = top_share(runners, {"records": records}, "w1", share=0.25, screen=screen)
    assert done["verdict"] == ("no pruned configuration in the top share: 1 measured here, 2 screened more than 10% "
                               "slower than the screen's top-1 % threshold")
    assert done["screened_beyond_margin"] == 2 and done["flagged_unmeasured"] == []
    # the flagged one missing from the recording, a screen cut short, a screen of another audit: incomplete
    unmeasured = top_share(runners, {"records": records[:-1] + [{"config": {"template": "tiled", **gemm(BLOCK_M=32)},
                                                                  "results": {"w1": {"value": 150.0}}}]},
                           "w1", share=0.25, screen=screen)
    assert unmeasured["verdict"] == "incomplete: 1 flagged by the screen but not measured here"
    cut = top_share(runners, {"records": records}, "w1", share=0.25, screen={**screen, "pruned_unscreened": 1})
    assert cut["verdict"] == "incomplete: 1 not screened" and cut["screened_beyond_margin"] is None
    other = top_share(runners, {"records": records}, "w1", share=0.25, screen={**screen, "pruned_screened": 5})
    assert other["verdict"] == "incomplete: the screen covers 5 pruned launches, the audit lists 3"
    assert top_share(runners, {"records": records}, "w1", share=0.25, screen={})["verdict"].startswith(
        "incomplete: the screen has no threshold")
    # a pruned configuration in the top share is reported whatever the screen says
    fast = records[:-1] + [{"config": flagged, "results": {"w1": {"value": 90.0, "status": "PASSED"}}}]
    assert top_share(runners, {"records": fast}, "w1", share=0.25, screen=screen)["verdict"] == \
        "1 pruned configuration(s) in the top share"
