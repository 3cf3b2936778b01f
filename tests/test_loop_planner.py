"""`--strategy planner`: the rule planner as the controller's proposer, with evidence after every PASSED trial.

Interpreter runs on one tiny workload (budget <= 3). Planner moves are exercised with a fake evidence source that
archives a report around the recorded H200 Nsight Compute profile of torch's layer_norm (tests/fixtures/ncu:
compute-bound at 2 FLOP/byte), so the knowledge base's E-ISSUE-BOUND-FEWER-WARPS fires; the default sources
(timing-only in the interpreter, Nsight Compute on a GPU host) are exercised as they are.
"""

import importlib.util
import json
import shutil
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.tune.loop import Budget, Controller, RunOptions
from kernelloop.tune.profile.evidence import (EvidenceContext, EvidenceRequest, NcuEvidence, TimingEvidence, kernel_regex,
                                         report_for)
from kernelloop.tune.profile.ncu_csv import read_details_csv, select_kernel
from kernelloop.tune.propose import PlannerStrategy
from kernelloop.base.records import (BuildArtifact, Candidate, Environment, Hypothesis, Measurement, Stats, Status,
                                TimingPolicy, Trial, Verdict, Workload, canonical_json)
from kernelloop.deliver.report.summary import run_summary
from kernelloop.core.spec import load_op, load_workloads
from kernelloop.core.spec.space import prune
from kernelloop.core.spec.start import StartError, parse_assignments, resolve_start


ROOT = Path(__file__).resolve().parents[1]
NCU_CSV = ROOT / "tests" / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"
TINY = 'op = "layernorm"\n[[workload]]\naxes = { M = 64, N = 256 }\ndtype = "fp16"\n'
START = {"BLOCK_N": "256", "num_warps": "8"}          # 1 element per thread: the issue-bound entry applies
runner = CliRunner()


class RecordedProfileEvidence:
    """Fake evidence source: every trial 'profiles' as torch's layer_norm did on the H200 (compute-bound)."""

    name = "recorded-h200-profile"

    def __init__(self):
        self.kernel = select_kernel(read_details_csv(NCU_CSV), "layer_norm")
        self.calls = []

    def collect(self, ctx):
        self.calls.append((ctx.trial.id, ctx.request))
        return report_for(ctx, kernel=self.kernel, notes=["fake evidence: recorded H200 profile of torch layer_norm"])


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    """A private copy of ops/layernorm (the manifest hashes its files; a resume must see the same ones)."""
    folder = tmp_path_factory.mktemp("ops") / "layernorm"
    shutil.copytree(ops_dir() / "layernorm", folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "tiny.toml").write_text(TINY)
    return load_op(folder)


@pytest.fixture(scope="module")
def tiny(op):
    return load_workloads(op.folder / "tiny.toml", op.spec)


def _opts(budget, start=START):
    return RunOptions(device="interpret", budget=Budget(evals=budget), strategy="planner", checks=1, confirm=False,
                      start=dict(start) if start else None, timeouts=Timeouts(check=60.0, bench=120.0))


@pytest.fixture(scope="module")
def planner_run(op, tiny, tmp_path_factory):
    """Two evaluations, then the same run resumed to three (replayed trials reuse their archived reports; the
    resumed run takes its start configuration from the archived options)."""
    run_dir = tmp_path_factory.mktemp("planner") / "run"
    first = RecordedProfileEvidence()
    Controller(op, tiny, _opts(2), run_dir, evidence=first).run()
    again = RecordedProfileEvidence()
    Controller(op, tiny, _opts(3, start=None), run_dir, evidence=again).run(resume=True)
    return run_dir, first, again


def _trials(run_dir):
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        trials = sorted(a.trials(run["id"]), key=lambda t: t.index)
        return run, [(t, a.get_candidate(t.candidate_id), a.profile(run["id"], t.id)) for t in trials], \
            a.events(run["id"])


def test_planner_moves_from_profile_evidence_with_lineage(planner_run, tiny):
    run_dir, first, again = planner_run
    run, rows, events = _trials(run_dir)
    assert run["options"]["strategy"] == "planner" and run["options"]["start"] == START
    configs = [c.config for _, c, _ in rows]
    start = {"BLOCK_N": 256, "ROWS": 1, "num_warps": 8, "EVICT_FIRST": 0, "STREAM_STORE": 0}
    assert configs[0] == start                                      # --start first, unnamed params filled in
    assert [c["num_warps"] for c in configs] == [8, 4, 2]          # fewer warps: nearest first
    assert all(c == {**start, "num_warps": c["num_warps"]} for c in configs)
    root = rows[0][1]
    assert root.parent_ids == [] and root.hypothesis == "" and root.proposer == "planner"
    for trial, cand, _ in rows[1:]:
        assert cand.parent_ids == [root.id] and cand.proposer == "planner"
        assert cand.hypothesis == "sol_compute_pct down; latency_us down"
    proposals = [e["payload"] for e in events if e["kind"] == "search" and e["payload"]["kind"] == "proposal"]
    assert [p["candidate"] for p in proposals] == [c.id for _, c, _ in rows[1:]]
    assert {p["rule"] for p in proposals} == {"E-ISSUE-BOUND-FEWER-WARPS"}
    assert all(p["parent"] == root.id and p["workload"] == tiny[0].id for p in proposals)
    plans = [e["payload"] for e in events if e["kind"] == "search" and e["payload"]["kind"] == "plan"]
    assert plans[0]["fired"] == ["E-ISSUE-BOUND-FEWER-WARPS"] and plans[0]["parent"]["num_warps"] == 8


def test_hypothesis_outcomes_are_archived_against_the_parent(planner_run):
    run_dir, _, _ = planner_run
    run, rows, _ = _trials(run_dir)
    assert all(t.verdict.status is Status.PASSED for t, _, _ in rows), [(t.verdict.status, t.verdict.message)
                                                                          for t, _, _ in rows]
    root_report = rows[0][2]
    assert root_report.kernel is not None and root_report.hypotheses == [] and root_report.outcomes == []
    assert root_report.classification.bottleneck.value == "compute-bound"
    for trial, cand, rep in rows[1:]:
        assert rep is not None and rep.trial_id == trial.id
        assert [h.metric for h in rep.hypotheses] == ["sol_compute_pct", "latency_us"]
        assert "E-ISSUE-BOUND-FEWER-WARPS" in rep.cites
        assert f"parent trial {rows[0][0].id}" in rep.notes
        by = {o.hypothesis.metric: o for o in rep.outcomes}
        # The same recorded profile for parent and child: the compute throughput did not move -> refuted.
        assert by["sol_compute_pct"].status == "refuted" and by["sol_compute_pct"].change == 0
        lat = by["latency_us"]                                      # decided on the measured intervals
        assert lat.parent == rows[0][0].measurement.kernel.median_us
        assert lat.child == trial.measurement.kernel.median_us
        assert lat.status in ("confirmed", "refuted")
        assert lat.status == ("confirmed" if lat.observed.value == "down" else "refuted")


def test_resume_reuses_archived_evidence_and_show_reports_the_hit_rate(planner_run, tiny):
    run_dir, first, again = planner_run
    _, rows, events = _trials(run_dir)
    assert len(first.calls) == 2 and len(again.calls) == 1         # replayed trials were not profiled again
    assert again.calls[0][1].parent_id == rows[0][1].id
    ev = [e["payload"] for e in events if e["kind"] == "evidence"]
    assert [e["trial"] for e in ev] == [t.id for t, _, _ in rows]   # one report per PASSED trial, no duplicate
    assert all(e["source"] == "recorded-h200-profile" and e["profiled"] and e["seconds"] >= 0 for e in ev)
    assert [e["outcomes"]["refuted"] >= 1 for e in ev] == [False, True, True]
    with Archive(run_dir / "archive.sqlite") as a:
        summary = run_summary(a)
    h = summary.workloads[0].hypotheses.model_dump(mode="json")
    decided = h["confirmed"] + h["refuted"]
    assert h["trials"] == 2 and decided == 4 and h["inconclusive"] == 0 and h["profiled"] == 3
    assert h["by_metric"]["sol_compute_pct"] == {"confirmed": 0, "refuted": 2, "inconclusive": 0}
    assert h["hit_rate"] == pytest.approx(h["confirmed"] / 4)
    assert summary.costs.profile_s == pytest.approx(sum(e["seconds"] for e in ev))
    table = runner.invoke(app, ["show", str(run_dir)])
    assert table.exit_code == 0 and "planner hypotheses" in table.stdout
    shown = json.loads(runner.invoke(app, ["show", str(run_dir), "--json"]).stdout)
    assert shown["workloads"][0]["hypotheses"] == h


def test_benchmark_script_against_a_recorded_space(planner_run, op, tiny, tmp_path):
    """benchmarks/planner_vs_exhaustive.py on the planner archive and a space file covering the pruned space."""
    run_dir, _, _ = planner_run
    w = tiny[0]
    space, _ = prune(op.spec.templates[0], w, VIRTUAL_HOPPER)
    value = lambda c: 10.0 + abs(c["num_warps"] - 2) + c["ROWS"] + c["EVICT_FIRST"] + c["STREAM_STORE"]  # noqa: E731
    doc = {"format": "kernelloop-space/1", "name": "synthetic", "op": "layernorm", "objective": "kernel_us",
           "workloads": [{"id": w.id, "label": w.label, "axes": w.axes, "dtype": "fp16", "weight": 1.0}],
           "records": [{"config": {"template": "rowwise", **c},
                        "results": {w.id: {"value": value(c), "status": "PASSED"}}} for c in space]}
    (tmp_path / "space.json").write_text(json.dumps(doc))
    spec = importlib.util.spec_from_file_location("pve", ROOT / "benchmarks" / "planner_vs_exhaustive.py")
    pve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pve)
    out = tmp_path / "cmp.json"
    assert pve.main(["--exhaustive", str(tmp_path / "space.json"), "--planner", str(run_dir), "--workload", w.label,
                     "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["exhaustive"]["best_us"] == 11.0 and got["exhaustive"]["best_config"]["num_warps"] == 2
    plan = got["planner"]
    assert plan["evaluations"] == 3 and [s["config"]["num_warps"] for s in plan["trajectory"]] == [8, 4, 2]
    assert [s["rule"] for s in plan["trajectory"]] == [None, "E-ISSUE-BOUND-FEWER-WARPS", "E-ISSUE-BOUND-FEWER-WARPS"]
    assert got["ratio_same_measurement"] == pytest.approx(value(plan["best_config"]) / 11.0)
    assert got["ratio"] == pytest.approx(plan["best_us"] / 11.0)
    assert got["hit_rate"] == plan["hypotheses"]["hit_rate"] and plan["hypotheses"]["refuted"] >= 2
    assert got["within_at_evaluation"] is None                     # interpreter µs vs synthetic µs: never within


# -- the default evidence in the interpreter, and the CLI ----------------------------------------------------

def test_cli_planner_in_the_interpreter_explores_on_timing_only_reports(op, tmp_path):
    out = tmp_path / "run"
    r = runner.invoke(app, ["optimize", str(op.folder), "--workloads", str(op.folder / "tiny.toml"), "--device",
                            "interpret", "--strategy", "planner", "--start", "BLOCK_N=256,ROWS=1,num_warps=8",
                            "--budget", "2", "--checks", "1", "--no-confirm", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    h = summary["workloads"][0]["hypotheses"]
    assert h["reports"] == 2 and h["profiled"] == 0 and h["trials"] == 0 and h["hit_rate"] is None
    assert "profile_s" in summary["costs"]
    with Archive(out / "archive.sqlite") as a:
        run = a.runs()[0]
        src = [e["payload"] for e in a.events(run["id"], "evidence-source")]
        assert src == [{"source": "timing", "note": "the Triton interpreter cannot be profiled"}]
        search = [e["payload"] for e in a.events(run["id"], "search")]
        plan = next(e for e in search if e["kind"] == "plan")
        assert plan["fired"] == [] and "E-ISSUE-BOUND-FEWER-WARPS" in plan["not_evaluable"]
        assert any(e["kind"] == "explore" for e in search)
        for t in a.trials(run["id"]):
            rep = a.profile(run["id"], t.id)
            assert rep.kernel is None and rep.roofline.kernel_us == t.measurement.kernel.median_us
            assert rep.roofline.arithmetic_intensity == pytest.approx(8 * 64 / (4 * 64 + 4))   # spec formulas
            assert any("timing only" in n for n in rep.notes)


@pytest.mark.parametrize("start, message", [
    ("BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0", "BLOCK_N <= next_pow2(N)"),
    ("BLOCK_N=300", "'300' is not a value of BLOCK_N"),
    ("TILE=4", "unknown parameter(s) ['TILE']"),
    ("BLOCK_N", "expected NAME=VALUE"),
])
def test_start_outside_the_space_exits_2_naming_it(op, tmp_path, start, message):
    r = runner.invoke(app, ["optimize", str(op.folder), "--workloads", str(op.folder / "tiny.toml"), "--device",
                            "interpret", "--strategy", "planner", "--start", start, "--out", str(tmp_path / "r")])
    assert r.exit_code == common.BAD_INPUT, r.output
    assert message in " ".join(r.output.split()), r.output
    assert not (tmp_path / "r").exists()


def test_start_needs_the_planner_and_strategies_are_checked(op, tmp_path):
    r = runner.invoke(app, ["optimize", str(op.folder), "--device", "interpret", "--strategy", "random",
                            "--start", "BLOCK_N=256", "--out", str(tmp_path / "r")])
    assert r.exit_code == common.BAD_INPUT and "only used by --strategy planner" in r.output
    r = runner.invoke(app, ["optimize", str(op.folder), "--device", "interpret", "--strategy", "nope"])
    assert r.exit_code == common.BAD_INPUT and "planner" in r.output
    assert "planner" in " ".join(runner.invoke(app, ["optimize", "--help"]).output.split())


def test_resolve_start_names_the_workload_and_rule(op):
    wls = [Workload(op="layernorm", axes={"M": 64, "N": 256}, dtype="fp16"),
           Workload(op="layernorm", axes={"M": 1, "N": 512}, dtype="bf16")]
    got = resolve_start(op.spec, wls, parse_assignments("num_warps=2, ROWS=1"), VIRTUAL_HOPPER)
    assert got[wls[0].id] == {"template": "rowwise", "BLOCK_N": 256, "ROWS": 1, "num_warps": 2, "EVICT_FIRST": 0,
                              "STREAM_STORE": 0}
    assert got[wls[1].id]["BLOCK_N"] == 512                        # first BLOCK_N the [1, 512] space keeps
    with pytest.raises(StartError, match=r"layernorm\[1x512\]:bf16: all 7 configurations .*'M >= ROWS'"):
        resolve_start(op.spec, wls, {"ROWS": "2", "num_warps": "1", "EVICT_FIRST": "0", "STREAM_STORE": "0"},
                      VIRTUAL_HOPPER)
    with pytest.raises(StartError, match="twice"):
        parse_assignments("ROWS=1,ROWS=2")


def test_strategy_asks_the_start_first_and_never_repeats(op):
    w = Workload(op="layernorm", axes={"M": 64, "N": 256}, dtype="fp16")
    space = [{"template": "rowwise", **c} for c in prune(op.spec.templates[0], w, VIRTUAL_HOPPER)[0]]
    start = {"template": "rowwise", "BLOCK_N": 256, "ROWS": 4, "num_warps": 2, "EVICT_FIRST": 1, "STREAM_STORE": 0}
    issue_bound = {"bottleneck": "compute-bound", "arithmetic_intensity": 2.0}
    s = PlannerStrategy(space, seed=5, start=start, evidence=lambda c: issue_bound, axes=w.axes, elem=2)
    asked = []
    while (c := s.ask()) is not None:
        asked.append(c)
        s.tell(c, float(c["num_warps"] + c["ROWS"]))
    assert asked[0] == start and len({canonical_json(c) for c in asked}) == len(asked) == len(space)
    with pytest.raises(ValueError, match="not in the space"):
        PlannerStrategy(space, start={**start, "BLOCK_N": 4096})


# -- Nsight Compute as the evidence source, against a stand-in ncu -------------------------------------------

FAKE_NCU = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
if "--import" in args:
    sys.stdout.write(open(args[args.index("--import") + 1]).read())
    sys.exit(0)
open(os.environ["FAKE_NCU_LOG"], "a").write(json.dumps(args) + "\\n")
stem = args[args.index("--export") + 1]
open(stem + ".ncu-rep", "w").write(__import__("lzma").open({str(NCU_CSV)!r}, "rt").read())
"""


def _measured(us, wid):
    policy = TimingPolicy(name="t", clock="cuda-events", warmup=1, samples=3, flush_bytes=0, sleep_cycles=0,
                          bootstrap=100)
    st = Stats(median_us=us, ci_low_us=us * 0.99, ci_high_us=us * 1.01, iqr_us=0.1, n=3)
    return Measurement(subject="c", workload_id=wid, policy=policy, kernel_samples_us=[us] * 3,
                       call_samples_us=[us] * 3, kernel=st, call=st, bytes_moved=1.0, gbps=1.0, roofline_fraction=0.7)


def test_ncu_evidence_profiles_the_build_kernels_and_archives_outcomes(op, tmp_path, monkeypatch):
    from kernelloop.tune.profile import ncu_report_adapter
    exe = tmp_path / "tools" / "ncu"
    exe.parent.mkdir()
    exe.write_text(FAKE_NCU)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KERNELLOOP_NCU", str(exe))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setattr(ncu_report_adapter, "load_ncu_report_module", lambda ncu=None: None)
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype="fp16")
    base = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 16, "EVICT_FIRST": 0, "STREAM_STORE": 0}
    src = op.template_sources["rowwise"]
    parent = Candidate(op="layernorm", template="rowwise", source=src, config=base)
    child = Candidate(op="layernorm", template="rowwise", source=src, config={**base, "num_warps": 8},
                      parent_ids=[parent.id], hypothesis="sol_compute_pct down; latency_us down")
    # The stand-in's report holds torch's kernels: name the build's kernel after them so the filter matches.
    build = BuildArtifact(kernel_names=["vectorized_layer_norm_kernel"], registers=40, spills=0, compile_s=1.0,
                          toolchain="t")
    env = Environment(device="cuda", gpu="", torch="t", triton="t", python="p", host="h")
    run_dir = tmp_path / "run"
    with Archive(run_dir / "archive.sqlite") as a:
        a.create_run("r", op.spec, {}, "m", env, {})
        trials = []
        for i, (cand, us) in enumerate(((parent, 30.0), (child, 24.0))):
            t = Trial(run_id="r", index=i, candidate_id=cand.id, workload_id=w.id, manifest_hash="m", build=build,
                      verdict=Verdict(status=Status.PASSED), measurement=_measured(us, w.id), started=0.0, finished=1.0)
            a.record_trial(t, cand, w)
            trials.append(t)
        ctx = dict(archive=a, run_id="r", run_dir=run_dir, op_dir=op.folder, spec=op.spec, device="cuda",
                   environment=env.model_dump())
        TimingEvidence("stand-in").collect(EvidenceContext(**ctx, workload=w, candidate=parent, trial=trials[0]))
        hyps = (Hypothesis(metric="sol_compute_pct", direction="down"),
                Hypothesis(metric="latency_us", direction="down"))
        rep = NcuEvidence(timeout_s=60).collect(EvidenceContext(
            **ctx, workload=w, candidate=child, trial=trials[1],
            request=EvidenceRequest(hypotheses=hyps, cites=("E-ISSUE-BOUND-FEWER-WARPS",), parent_id=parent.id)))
        assert a.profile("r", trials[1].id) == rep
    call = json.loads((tmp_path / "calls.jsonl").read_text().splitlines()[0])
    assert call[call.index("--kernel-name") + 1] == "regex:vectorized_layer_norm_kernel"
    assert rep.kernel is not None and rep.classification.bottleneck.value == "compute-bound"
    assert rep.artifact == f"profiles/{trials[1].id}.ncu-rep" and (run_dir / rep.artifact).is_file()
    assert (run_dir / "sources" / f"{child.id}.py").read_text() == src
    assert rep.roofline.fraction == pytest.approx(0.7)               # roof: the copy timed beside the trial
    by = {o.hypothesis.metric: o for o in rep.outcomes}
    assert by["latency_us"].status == "confirmed" and by["latency_us"].parent == 30.0
    assert by["sol_compute_pct"].status == "inconclusive"            # the parent has no profile, only timing
    assert rep.cites == ["E-ISSUE-BOUND-FEWER-WARPS"] and rep.build.registers == 40
    assert kernel_regex(parent, trials[0].model_copy(update={"build": None})) == "_layernorm_fwd"


# -- the GPU tier --------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_planner_profiles_every_passed_trial_with_ncu(tmp_path):
    from kernelloop.tune.profile.ncu_report_adapter import find_ncu
    if find_ncu() is None:
        pytest.skip("ncu not found ($KERNELLOOP_NCU, PATH)")
    out = tmp_path / "run"
    r = runner.invoke(app, ["optimize", str(ops_dir() / "layernorm"), "--workloads",
                            str(ROOT / "benchmarks" / "workloads" / "layernorm-4096.toml"), "--device", "cuda",
                            "--strategy", "planner", "--start", "BLOCK_N=1024,ROWS=1,num_warps=1,EVICT_FIRST=0",
                            "--budget", "6", "--no-confirm", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    with Archive(out / "archive.sqlite") as a:
        run = a.runs()[0]
        trials = a.trials(run["id"])
        passed = [t for t in trials if t.verdict.status is Status.PASSED]
        assert len(trials) == 6 and passed
        reports = [a.profile(run["id"], t.id) for t in passed]
        assert all(rep is not None for rep in reports)
        assert [e["payload"]["source"] for e in a.events(run["id"], "evidence-source")] == ["ncu"]
        profiled = [rep for rep in reports if rep.kernel is not None]
        assert profiled, [rep.notes for rep in reports]
        assert all((out / rep.artifact).is_file() and rep.classification is not None for rep in profiled)
        children = [t for t in passed if a.get_candidate(t.candidate_id).parent_ids]
        assert children, "the planner proposed nothing from the profiles"
        assert any(a.profile(run["id"], t.id).outcomes for t in children)
