"""Outside agents: `agent init` workspaces, `submit` through the real controller and archive, `agent status`.

Kernels are the op's own row-wise template (correct), and edits of it (wrong: no bias; zeros: writes 0).
"""

import json
import shutil
import stat
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.agent import (Submission, SubmissionError, Workspace, WorkspaceError, init_workspace, submit,
                              workspace_status)
from kernelloop.core.archive import Archive
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.base.records import Candidate, Status
from kernelloop.deliver.agent.status_records import Measured, WorkspaceStatus

OP = ops_dir() / "layernorm"
TEMPLATE = (OP / "kernel.py").read_text()
CONFIG = {"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}
WRONG = TEMPLATE.replace("y = xc * rstd * w + b", "y = xc * rstd * w")
ZEROS = TEMPLATE.replace("y = xc * rstd * w + b", "y = xc * 0.0")
CHEAT = TEMPLATE.replace("    M, N = x.shape\n", "    import torch.nn.functional as F\n"
                         "    y.copy_(F.layer_norm(x, (x.shape[-1],), weight, bias, eps))\n    return\n", 1)
FAST = dict(timeouts=Timeouts(check=60.0, bench=60.0))


def workloads_file(folder: Path) -> Path:
    f = folder / "wl.toml"
    f.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    return f


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    base = tmp_path_factory.mktemp("agent")
    return init_workspace(OP, base / "ws", workloads_file=workloads_file(base), checks=1, device="interpret")


@pytest.fixture(scope="module")
def good(ws):
    return submit(ws.root, Submission(source=TEMPLATE, config=CONFIG, hypothesis="latency_us down -5%",
                                      agent="test"), **FAST)


def test_init_shows_the_interface_not_the_verifier(ws):
    iface = json.loads((ws.root / "interface.json").read_text())
    assert iface["launch"] == "launch(x, weight, bias, y, *, eps, **config)"
    assert iface["workloads"][0]["tensors"]["x"] == {"shape": [4, 64], "dtype": "fp16"}
    assert iface["templates"]["rowwise"]["params"]["BLOCK_N"][0] == 256
    from kernelloop.core.spec import load_op
    assert iface["code"] == load_op(OP).spec.code_policy.model_dump(mode="json")   # the allow-list it is held to
    assert "triton.jit" in iface["code"]["names"] and "getattr" not in iface["code"]["builtins"]
    text = (ws.root / "interface.json").read_text() + (ws.root / "README.md").read_text()
    for hidden in ("seed", "secret", "heavy_tail", "near_zero", "inputs_policy", "heldout"):
        assert hidden not in text, hidden
    assert json.loads((ws.root / "baseline.json").read_text())["status"] == "not measured"
    assert json.loads((ws.root / "proposal.schema.json").read_text())["title"] == "KernelProposal"
    copy = ws.root / "reference" / "reference.py"
    assert copy.read_text() == (OP / "reference.py").read_text()
    assert not copy.stat().st_mode & stat.S_IWUSR, "copies are for reading"
    assert not ws.run_dir().exists(), "the archive is created by the first submit"
    with pytest.raises(WorkspaceError, match="already is a workspace"):
        init_workspace(OP, ws.root, workloads_file=ws.data["workloads_file"])


def test_submit_judges_and_archives_with_the_frozen_manifest(ws, good):
    assert good["verdict"] == "PASSED" and good["interpreter"] is True
    (r,) = good["results"]
    assert r["status"] == "PASSED" and r["on_front"] and r["best_on_workload"]["is_this"]
    assert r["measurement"]["kernel_us"] > 0 and r["measurement"]["policy"] == "interpreter-wallclock"
    assert "eager" in r["measurement"]["speedups"]
    assert "failing_case" not in r, "a passing verdict does not reveal the verifier's cases"
    cand = good["candidates"][0]
    assert cand["proposer"] == "agent:test" and cand["hypothesis"] == "latency_us down -5%"
    assert cand["template"] == "rowwise", "the template's own source keeps its name"
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        (run,) = a.runs()
        assert run["id"] == good["run"]
        assert run["manifest"]["reference_sha256"] == ws.data["op_files"]["reference.py"]
        assert a.get_candidate(cand["id"]).source == TEMPLATE


def test_wrong_kernel_gets_the_verifier_report_and_lineage(ws, good):
    parent = good["candidates"][0]["id"]
    ans = submit(ws.root, Submission(source=WRONG, config=CONFIG, parent=parent, agent="test"), **FAST)
    (r,) = ans["results"]
    assert ans["verdict"] == "WRONG_VALUES" and r["status"] == "WRONG_VALUES"
    assert r["failing_case"] and r["error_metrics"][0]["mismatched"] > 0 and r["measurement"] is None
    assert ans["run"] == good["run"], "later submits resume the same run"
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        assert a.ancestors(ans["candidates"][0]["id"]) == [parent]
    st = workspace_status(ws.root)
    assert st.counts == {"PASSED": 1, "WRONG_VALUES": 1}
    (w,) = st.workloads
    assert [f.candidate for f in w.front] == [parent] and w.best.candidate == parent
    assert st.recent[0].status is Status.WRONG_VALUES


def test_resubmitting_the_same_kernel_is_not_judged_again(ws, good):
    again = submit(ws.root, Submission(source=TEMPLATE, config=CONFIG, agent="test"), **FAST)
    assert again["results"][0]["trial"] == good["results"][0]["trial"]
    assert again["results"][0]["previously_archived"] is True


def test_proposal_patch_space_and_invalid_proposals(ws, good):
    parent = good["candidates"][0]["id"]
    patch = ("@@ -1,1 +1,1 @@\n-\"\"\"LayerNorm forward, one program per ROWS rows.\n"
             "+\"\"\"LayerNorm forward, one program per ROWS rows (agent's copy).\n")
    proposal = {"patch": patch, "parent_ids": [parent], "space": {"BLOCK_N": [64], "ROWS": [1, 2], "num_warps": [1]},
                "rationale": "two rows per program", "hypothesis": {"metrics": [{"metric": "registers",
                                                                                  "direction": "up"}],
                                                                     "latency_change_pct": -5}}
    ans = submit(ws.root, Submission(proposal=proposal, agent="test"), **FAST)
    assert [r["status"] for r in ans["results"]] == ["PASSED", "PASSED"]
    assert [c["config"]["ROWS"] for c in ans["candidates"]] == [1, 2]
    assert all(c["parent_ids"] == [parent] and c["hypothesis"] == "registers up; latency_us down -5%"
               for c in ans["candidates"])
    assert all(r["parents"][0]["speedup_over_parent"] > 0 for r in ans["results"])
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        before = a.next_index(good["run"])
    bad = [({**proposal, "patch": patch.replace("forward", "backward")}, "does not apply"),
           ({**proposal, "hypothesis": {"metrics": []}}, "hypothesis"),
           ({**proposal, "parent_ids": ["c-0000000000000000"]}, "unknown parent"),
           ({**proposal, "space": {"NOT_A_PARAM": [1]}}, "does not accept keyword")]
    for value, why in bad:
        with pytest.raises(SubmissionError, match=why):
            submit(ws.root, Submission(proposal=value), **FAST)
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        assert a.next_index(good["run"]) == before, "invalid proposals run nothing"


def test_editing_the_workspace_copies_changes_nothing(ws, good):
    """The agent rewrites its copy of the reference to expect zeros; evaluation still uses the op folder."""
    copy = ws.root / "reference" / "reference.py"
    copy.chmod(0o644)
    copy.write_text("def reference(x, weight, bias, eps):\n    return x * 0\n")
    ans = submit(ws.root, Submission(source=ZEROS, config=CONFIG, agent="test"), **FAST)
    assert ans["verdict"].startswith("WRONG_")


def test_calling_the_library_is_rejected_and_archived(ws, good):
    ans = submit(ws.root, Submission(source=CHEAT, config=CONFIG, parent=good["candidates"][0]["id"],
                                     agent="test"), **FAST)
    (r,) = ans["results"]
    # the allow-list names the library module first (`torch.nn.functional` is not declared); the library call is
    # named by its own rule too
    assert ans["verdict"] == "REJECTED" and r["reason"] == "rejected: not-allowed" and r["measurement"] is None
    assert {"library-op", "not-allowed"} <= {h["rule"] for h in ans["candidates"][0]["static_rules"]}
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        assert a.find_trial(ans["run"], ans["candidates"][0]["id"], r["workload_id"]).verdict.status.value == "REJECTED"


def test_changed_op_folder_is_refused(tmp_path):
    op = tmp_path / "layernorm"
    shutil.copytree(OP, op)
    w = init_workspace(op, tmp_path / "ws", workloads_file=workloads_file(tmp_path), checks=1, device="interpret")
    (op / "reference.py").write_text((op / "reference.py").read_text() + "\n# changed\n")
    with pytest.raises(WorkspaceError, match="changed since `agent init` .*reference.py"):
        submit(w.root, Submission(source=TEMPLATE, config=CONFIG))
    assert not (w.run_dir() / "archive.sqlite").exists()


def test_baseline_from_a_run_archive(ws, good, tmp_path):
    other = init_workspace(OP, tmp_path / "ws2", workloads_file=ws.data["workloads_file"], run=ws.run_dir(),
                           device="interpret")
    base = json.loads((other.root / "baseline.json").read_text())
    assert base["status"] == "measured" and base["run"] == good["run"]
    best = base["workloads"][0]["best"]
    assert best["kernel_us"] == pytest.approx(workspace_status(ws.root).workloads[0].best.kernel_us)


def test_cuda_needs_a_gpu_and_no_workspace_is_an_error(ws, tmp_path):
    from kernelloop.core.device import cuda_available
    if not cuda_available():
        with pytest.raises(WorkspaceError, match="no CUDA device"):
            submit(ws.root, Submission(source=TEMPLATE, config=CONFIG), device="cuda")
    with pytest.raises(WorkspaceError, match="not a kernelloop workspace"):
        Workspace.load(tmp_path)


@pytest.mark.gpu
def test_submit_on_cuda_through_the_same_path(tmp_path):
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4096, N = 4096 }\ndtype = "fp16"\n')
    w = init_workspace(OP, tmp_path / "ws", workloads_file=tmp_path / "wl.toml", device="cuda")
    ans = submit(w.root, Submission(source=TEMPLATE, config={"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}))
    (r,) = ans["results"]
    assert ans["verdict"] == "PASSED" and ans["interpreter"] is False
    assert r["measurement"]["policy"] == "cold-l2-events" and r["build"]["registers"] is not None
    assert r["profile"]["status"] in {"ok", "unavailable", "failed"}
    assert ans["candidates"][0]["id"] == Candidate(op="layernorm", template="rowwise", source=TEMPLATE,
                                                   config={"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}).id
    with Archive(w.run_dir("cuda") / "archive.sqlite") as a:   # the candidate's tensors came back from the GPU
        (t,) = a.trials(ans["run"])
        assert t.device and t.transport in ("cuda-ipc", "host-arena")


def test_a_space_of_configurations_in_one_submission(ws, good):
    ans = submit(ws.root, Submission(source=TEMPLATE, config={"ROWS": 1, "num_warps": 1},
                                     space={"BLOCK_N": [64, 128], "EVICT_FIRST": [0, 1]}, agent="test"), **FAST)
    assert ans["verdict"] == "PASSED"
    assert [(c["config"]["BLOCK_N"], c["config"]["EVICT_FIRST"]) for c in ans["candidates"]] == \
        [(64, 0), (64, 1), (128, 0), (128, 1)]
    assert all(c["config"]["ROWS"] == 1 and c["template"] == "rowwise" for c in ans["candidates"])
    by_id = {c["id"]: c["label"] for c in ans["candidates"]}
    assert [r["candidate"] for r in ans["results"]] == list(by_id), "each result names its candidate"
    assert all(r["label"] == by_id[r["candidate"]] for r in ans["results"])
    assert ans["results"][0]["previously_archived"] is False
    st = workspace_status(ws.root)
    (w,) = st.workloads
    best = w.best
    assert best.config and best.label and best.kernel_us > 0
    assert set(best.speedups) >= {"eager"} and best.roofline_fraction is not None
    assert w.confirmed is None and "confirmed" not in st.as_json()["workloads"][0]


def test_malformed_spaces_and_proposals_with_a_config_run_nothing(ws, good):
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        before = a.next_index(good["run"])
    bad = [(dict(space={"BLOCK_N": []}), "non-empty list"),
           (dict(space={"BLOCK_N": 64}), "non-empty list"),
           (dict(space={"BLOCK_N": [{"a": 1}]}), "numbers, strings or booleans"),
           (dict(config={"BLOCK_N": 64}, space={"BLOCK_N": [64, 128]}), "both in the config and in the space"),
           (dict(space={"BLOCK_N": [64, 128, 256], "ROWS": [1, 2, 4], "num_warps": [1, 2]}), "at most 16")]
    for kw, why in bad:
        with pytest.raises(SubmissionError, match=why):
            submit(ws.root, Submission(source=TEMPLATE, **kw), **FAST)
    proposal = {"source": TEMPLATE, "config": CONFIG, "rationale": "r",
                "hypothesis": {"metrics": [{"metric": "registers", "direction": "up"}], "latency_change_pct": -1}}
    with pytest.raises(SubmissionError, match="its own configuration"):
        submit(ws.root, Submission(proposal=proposal, config={"ROWS": 2}), **FAST)
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        assert a.next_index(good["run"]) == before, "nothing ran"


def key_paths(x, at: str = "") -> set[str]:
    """Every key of a JSON value, as a dotted path (`[]` for a list's items)."""
    if isinstance(x, dict):
        return {p for k, v in x.items() for p in {f"{at}{k}"} | key_paths(v, f"{at}{k}.")}
    if isinstance(x, list):
        return {p for v in x for p in key_paths(v, at.rstrip(".") + "[].")}
    return set()


# The keys `agent status` printed before it was a record (taken from a workspace like the test's): agents read them.
FIGURES = ("call_ci_us call_us gbps kernel_ci_us kernel_us policy roofline_fraction samples speedups speedups.copy "
           "speedups.copy.ci speedups.copy.speedup speedups.copy.verdict speedups.eager speedups.eager.ci "
           "speedups.eager.speedup speedups.eager.verdict").split()
TOP = {"workspace", "op", "device", "interpreter", "baseline", "baseline.status", "run", "counts", "workloads",
       "workloads[].id", "workloads[].label", "workloads[].front", "recent"}
EMPTY = TOP | {"baseline.note", "note"}
MEASURED = TOP | {"note"} | {"baseline." + k for k in (
    "device gpu interpreter run source workloads workloads[].id workloads[].workload workloads[].best "
    "workloads[].best.call_us workloads[].best.candidate workloads[].best.kernel_us workloads[].best.label "
    "workloads[].baselines workloads[].baselines.copy workloads[].baselines.copy.call_us "
    "workloads[].baselines.copy.kernel_us workloads[].baselines.eager workloads[].baselines.eager.call_us "
    "workloads[].baselines.eager.kernel_us").split()}
CONFIRMED = EMPTY - {"note"} | {"counts.PASSED", "integrity", *(f"integrity.{k}" for k in (
    "commitment", "reason", "run_id", "state", "tampered"))} | {f"recent[].{k}" for k in (
        "candidate", "index", "kernel_us", "message", "proposer", "status", "trial", "workload_id")} | {
    f"workloads[].{k}" for k in ("trials", "passed", "best", "confirmed", "best.candidate", "best.label", "best.config",
                                 "best.config.BLOCK_N", "best.config.ROWS", "best.config.num_warps",
                                 "confirmed.candidate", "confirmed.baselines", "confirmed.baselines.copy",
                                 "confirmed.baselines.copy.call_us", "confirmed.baselines.copy.kernel_us",
                                 "confirmed.baselines.eager", "confirmed.baselines.eager.call_us",
                                 "confirmed.baselines.eager.kernel_us", *(f"best.{f}" for f in FIGURES),
                                 *(f"confirmed.{f}" for f in FIGURES), *(f"front[].{f}" for f in (
                                     "candidate", "label", "proposer", "parent_ids", "hypothesis", "latency_us",
                                     "registers", "shared_bytes", "compile_s")))}


def test_status_shows_the_confirmed_baselines_with_the_keys_agents_read(tmp_path):
    w = init_workspace(OP, tmp_path / "ws", workloads_file=workloads_file(tmp_path), checks=1, device="interpret")
    empty = workspace_status(w.root)
    assert empty.run is None and empty.note == "nothing submitted yet" and key_paths(empty.as_json()) == EMPTY
    ans = submit(w.root, Submission(source=TEMPLATE, config=CONFIG), confirm=True, **FAST)
    assert ans["verdict"] == "PASSED"
    status = workspace_status(w.root)
    (st,) = status.workloads
    conf = st.confirmed
    assert conf.candidate == ans["candidates"][0]["id"] and conf.kernel_us > 0
    assert {"eager", "copy"} <= set(conf.baselines) and conf.baselines["copy"].kernel_us > 0
    assert status.integrity.state == "authenticated"
    assert key_paths(status.as_json()) == CONFIRMED
    assert WorkspaceStatus.model_validate(status.as_json()).as_json() == status.as_json()
    other = init_workspace(OP, tmp_path / "ws2", workloads_file=w.data["workloads_file"], run=w.run_dir(),
                           device="interpret")
    measured = workspace_status(other.root)
    assert isinstance(measured.baseline, Measured) and measured.baseline.run == ans["run"]
    assert key_paths(measured.as_json()) == MEASURED
    assert json.loads((other.root / "baseline.json").read_text()) == measured.as_json()["baseline"]


def test_a_baseline_file_of_another_shape_is_refused(tmp_path):
    """baseline.json is a record: a file edited into another shape is named, not passed on."""
    w = init_workspace(OP, tmp_path / "ws", workloads_file=workloads_file(tmp_path), checks=1, device="interpret")
    (w.root / "baseline.json").write_text(json.dumps({"status": "measured", "run": "r-1"}))
    with pytest.raises(WorkspaceError, match="baseline.json does not hold"):
        workspace_status(w.root)


def test_a_static_rule_rejection_lists_every_hit_once_per_candidate(tmp_path):
    """Two workloads, two configurations, a source breaking several rules: each candidate names every hit (rule,
    line, the offending source line) once; the four results point there instead of repeating them."""
    wl = tmp_path / "wl2.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n'
                  '[[workload]]\naxes = { M = 3, N = 32 }\ndtype = "fp32"\n')
    ws2 = init_workspace(OP, tmp_path / "ws", workloads_file=wl, checks=1, device="interpret")
    source = CHEAT.replace("    return\n", "    import time\n    time.sleep(0)\n    return\n", 1)
    ans = submit(ws2.root, Submission(source=source, config={k: v for k, v in CONFIG.items() if k != "num_warps"},
                                      space={"num_warps": [1, 2]}, agent="test"), **FAST)
    assert ans["verdict"] == "REJECTED" and len(ans["candidates"]) == 2 and len(ans["results"]) == 4
    lines = source.splitlines()
    for c in ans["candidates"]:
        hits = c["static_rules"]
        assert len(hits) >= 2 and len({(h["rule"], h["line"]) for h in hits}) == len(hits)
        assert "library-op" in {h["rule"] for h in hits}
        assert all(h["source"] == lines[h["line"] - 1].strip() and h["why"] for h in hits)
    for r in ans["results"]:
        assert r["status"] == "REJECTED" and r["log_tail"] == "" and "candidates[].static_rules" in r["message"]
        assert r["reason"].startswith("rejected: ")
