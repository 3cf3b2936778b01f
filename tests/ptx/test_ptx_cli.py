"""`kernelloop ptx`: recover (a .ptx, a cubin of SASS alone, a candidate built for sm_90 here), propose (a candidate,
a recorded run), prove and time (no GPU: exit 3; the CPU stand-in), show."""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":   # the stand-in executor interprets the template (before triton)
    os.environ["TRITON_INTERPRET"] = "1"

import base64  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from typer.testing import CliRunner  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.cli.app import app  # noqa: E402
from kernelloop.base.records import Candidate  # noqa: E402

runner = CliRunner()


def test_recover_a_ptx_and_a_cubin(kernels, tmp_path):
    k = kernels["rmsnorm/rowwise"]
    (tmp_path / "k.ptx").write_text(k.ptx)
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.ptx"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["recoverable"] and data["round_trip_ok"] and "ptx" not in data["kernels"][0]["kernel"]
    (tmp_path / "k.cubin").write_bytes(base64.b64decode(k.cubin_b64))
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.cubin")])
    assert res.exit_code == 1 and "not recoverable" in res.stdout and "embeds no PTX" in res.stdout


def test_recover_a_candidate(kernels, tmp_path):
    source = (ops_dir() / "rmsnorm" / "kernel.py").read_text()
    cand = Candidate(op="rmsnorm", template="rowwise", source=source,
                     config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    res = runner.invoke(app, ["ptx", "recover", str(path), "--workload", "M=64,N=1024"])
    assert res.exit_code == 0, res.output
    assert "_rmsnorm_fwd" in res.stdout and "round trip: ok" in res.stdout and "byte-identical" in res.stdout
    assert "threads 128" in res.stdout


def _candidate(tmp_path, surveyed):
    row = next(r for r in surveyed if r.op == "rmsnorm" and r.template == "rowwise")
    cand = Candidate(op="rmsnorm", template="rowwise", source=(ops_dir() / "rmsnorm" / "kernel.py").read_text(),
                     config=row.config)
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    return path, cand


def test_propose_writes_checked_edits(surveyed, tmp_path):
    path, cand = _candidate(tmp_path, surveyed)
    res = runner.invoke(app, ["ptx", "propose", str(path), "--workload", "M=3,N=4096", "--rules", "cache_hint,unroll",
                              "--out", str(tmp_path / "edits"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    (t,) = data["targets"]
    (k,) = t["kernels"]
    assert t["parent_candidate_id"] == cand.id and k["round_trip"]["ok"] and k["windows"][0]["loop"]
    rules = {e["candidate"]["rule"].split(":")[0] for e in k["edits"]}
    assert rules == {"cache_hint", "unroll"} and all(e["violations"] == [] for e in k["edits"])
    assert data["passed"] == len(k["edits"]) and all(e["diff"].startswith("--- a/") for e in k["edits"])
    assert len(list((tmp_path / "edits").glob("p-*.json"))) == len(k["edits"])
    res = runner.invoke(app, ["ptx", "propose", str(path), "--rules", "nonesuch"])
    assert res.exit_code == 2 and "unknown rule" in res.output
    (tmp_path / "k.ptx").write_text("x")
    res = runner.invoke(app, ["ptx", "propose", str(tmp_path / "k.ptx")])
    assert res.exit_code == 2 and "no source-level kernel" in res.output


def test_prove_and_time_need_a_gpu_or_run_the_stand_in(surveyed, tmp_path, monkeypatch):
    import torch
    path, _ = _candidate(tmp_path, surveyed)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    res = runner.invoke(app, ["ptx", "prove", str(path), "--workload", "M=3,N=4096"])
    assert res.exit_code == 3 and "CUDA GPU" in res.output
    res = runner.invoke(app, ["ptx", "prove", str(path), "--workload", "M=3,N=4096", "--rules", "unroll",
                              "--executor", "stand-in", "--checks", "1", "--max", "1"])
    assert res.exit_code == 0, res.output
    assert "proved at verifier" in res.stdout and "stand-in" in res.stdout
    res = runner.invoke(app, ["ptx", "time", str(path), "--workload", "M=3,N=4096", "--rules", "unroll",
                              "--executor", "stand-in", "--checks", "1", "--max", "1", "--json"])
    assert res.exit_code == 0, res.output
    (p,) = json.loads(res.stdout)["targets"][0]["proofs"]
    assert p["stage"] == "done" and p["timing"]["samples"] == 5 and "not kernel time" in p["timing"]["policy"]


def test_propose_and_show_on_a_recorded_run(tmp_path):
    """A recorded H200 run (schema 4) is migrated; its winner's edits are archived; `show` lists them with their
    parent and diff."""
    from kernelloop.base.compressed import decompress_to
    run = tmp_path / "run"
    run.mkdir()
    src = Path(__file__).parents[1] / "fixtures" / "archives" / "h200-layernorm-planner.sqlite.xz"
    decompress_to(src, run / "archive.sqlite")
    res = runner.invoke(app, ["ptx", "show", str(run)])
    assert res.exit_code == 0 and "no PTX-level edits" in res.stdout
    # the winner's source page, kept where `kernelloop profile --ncu` keeps it, weighs its windows
    from kernelloop.tune.profile.report import source_page_path
    from kernelloop.tune.ptx.pipeline import recover_target, targets
    (target,) = targets(run)
    (kernel,) = recover_target(target)
    source_page_path(run, target.trial_id).parent.mkdir()
    source_page_path(run, target.trial_id).write_text(_source_page(kernel))
    res = runner.invoke(app, ["ptx", "propose", str(run), "--rules", "cache_hint", "--json"])
    assert res.exit_code == 0, res.output
    (t,) = json.loads(res.stdout)["targets"]
    assert t["op"] == "layernorm" and t["run_id"] and t["kernels"][0]["edits"]
    assert {w["source"] for w in t["kernels"][0]["windows"]} == {"profile"}
    assert any(f"profiles/{target.trial_id}.source.csv" in n for n in t["kernels"][0]["notes"])
    res = runner.invoke(app, ["ptx", "show", str(run), "--json"])
    shown = json.loads(res.stdout)
    assert {c["parent_candidate_id"] for c in shown["candidates"]} == {t["parent_candidate_id"]}
    assert all(c["diff"].startswith("--- a/") for c in shown["candidates"]) and shown["proofs"] == []
    res = runner.invoke(app, ["ptx", "show", str(tmp_path)])
    assert res.exit_code == 2


# --- windows on a profile's source page, the LLM's edits --------------------------------------------------------

SMALL = {"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}


def _small(tmp_path):
    """rmsnorm's row-wise candidate on M=64,N=1024 (no survey needed), and its kernel built as `ptx` builds it."""
    from kernelloop.tune.ptx.pipeline import recover_target, targets
    from kernelloop.tune.ptx.recover import parse_axes
    from kernelloop.base.records import Workload
    cand = Candidate(op="rmsnorm", template="rowwise", source=(ops_dir() / "rmsnorm" / "kernel.py").read_text(),
                     config=SMALL)
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    (t,) = targets(path, Workload(op="", axes=parse_axes("M=64,N=1024"), dtype="fp16"))
    (k,) = recover_target(t)
    return path, k


def _source_page(kernel) -> str:
    """A source page export of the kernel's own SASS (as loaded at 0x7f3a00000000): samples 1 per instruction."""
    from kernelloop.tune.ptx.windows import _cubin_of, sass_lines
    rows = ['"Kernel Name","%s"' % kernel.name,
            '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"']
    rows += [f'"{0x7f3a00000000 + addr:#x}","{text}","1","64"' for addr, _, _, text in sass_lines(_cubin_of(kernel))]
    return "\n".join(rows) + "\n"


def test_propose_weighs_windows_by_a_source_page(tmp_path):
    path, k = _small(tmp_path)
    (tmp_path / "page.csv").write_text(_source_page(k))
    args = ["ptx", "propose", str(path), "--workload", "M=64,N=1024", "--rules", "cache_hint", "--json"]
    res = runner.invoke(app, args + ["--profile", str(tmp_path / "page.csv")])
    assert res.exit_code == 0, res.output
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert {w["source"] for w in kw["windows"]} == {"profile"}
    assert kw["windows"][0]["profile_metric"] == "Warp Stall Sampling (All Samples)"
    assert any(n.startswith("windows weighed by Warp Stall Sampling (All Samples) from ") for n in kw["notes"])
    # a page of another kernel: the static estimate, the note saying why, and exit 2 (the --profile was no use)
    other = Path(__file__).parents[1] / "fixtures" / "ptx" / "handwritten-ncu-source-page.csv"
    res = runner.invoke(app, args + ["--profile", str(other)])
    assert res.exit_code == 2 and "could be weighed" in res.output
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert {w["source"] for w in kw["windows"]} == {"sass"} and kw["edits"]
    assert any(f"no kernel named '{k.name}'" in n and "static estimate" in n for n in kw["notes"])
    (tmp_path / "details.csv").write_text('"ID","Kernel Name","Metric Name"\n"0","k","x"\n')
    res = runner.invoke(app, args + ["--profile", str(tmp_path / "details.csv")])
    assert res.exit_code == 2 and "no SASS table" in res.output
    res = runner.invoke(app, args)   # no page: the static estimate, said so
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert {w["source"] for w in kw["windows"]} == {"sass"} and any("static estimate" in n for n in kw["notes"])


def _llm_answer(kernel, window, new: str) -> str:
    body = "\n".join(kernel.ptx.split("\n")[window.start:window.end + 1])
    return json.dumps({"window": window.label or "entry block", "hypothesis": "L1 hits of x up: latency down 2 %",
                       "ptx": body.replace("@%p1 ld.global.v4.b32", f"@%p1 {new}", 1)})


def test_propose_asks_the_llm(tmp_path, monkeypatch):
    """--llm: the hottest window to the model (the options name it), ptxas's refusal back to it verbatim, the
    repaired edit checked and written; the recording replays without a server; a bad setting is refused."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "propose" / "llm"))   # the scripted server of the LLM tests
    from llm_script import ScriptedLLMServer
    from kernelloop.tune.ptx.checks import check_edit
    from kernelloop.tune.ptx.windows import hot_windows
    for var in ("KERNELLOOP_LLM_CONFIG", "KERNELLOOP_LLM_PROVIDER", "KERNELLOOP_LLM_MODEL", "KERNELLOOP_LLM_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SCRIPTED_KEY", "sk-test")
    path, k = _small(tmp_path)
    w = hot_windows(k)[0]
    bad, good = _llm_answer(k, w, "ld.global.nonesuch.v4.b32"), _llm_answer(k, w, "ld.global.L1::evict_last.v4.b32")
    args = ["ptx", "propose", str(path), "--workload", "M=64,N=1024", "--rules", "cache_hint", "--llm",
            "--provider", "openai", "--model", "m", "--api-key-env", "SCRIPTED_KEY", "--json"]
    with ScriptedLLMServer([{"content": "no JSON here"}, {"content": bad}, {"content": good}]) as server:
        res = runner.invoke(app, args + ["--base-url", server.base_url, "--out", str(tmp_path / "out")])
        asked = [r["body"]["messages"][-1]["content"] for r in server.requests]
    assert res.exit_code == 0, res.output
    assert len(asked) == 3 and "ld.global.v4.b32" in asked[0] and "estimated issue slots" in asked[0]
    assert "not a PtxAnswer" in asked[1]
    lines = k.ptx.split("\n")
    refused = check_edit(k.ptx, "\n".join(lines[:w.start] + [json.loads(bad)["ptx"]] + lines[w.end + 1:]),
                         metadata=k.metadata)
    assert refused and all(f"{v.rule}: {v.message}" in asked[2] for v in refused)   # ptxas's error, verbatim
    assert "nonesuch" in asked[2]
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    (edit,) = [e for e in kw["edits"] if e["candidate"]["rule"] == "llm"]
    assert edit["violations"] == [] and edit["candidate"]["proposer"].startswith("llm:m:")
    assert "+\t@%p1 ld.global.L1::evict_last.v4.b32" in edit["diff"]
    written = [json.loads(f.read_text()) for f in (tmp_path / "out").glob("p-*.json")]
    assert [c["hypothesis"] for c in written if c["rule"] == "llm"] == [edit["candidate"]["hypothesis"]]
    assert (tmp_path / "out" / "llm" / "exchanges.jsonl").is_file()
    # the recording replays: the same edit, no network
    res = runner.invoke(app, args + ["--replay", str(tmp_path / "out" / "llm")])
    assert res.exit_code == 0, res.output
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert [e["diff"] for e in kw["edits"] if e["candidate"]["rule"] == "llm"] == [edit["diff"]]
    # ... with no provider or model configured: the recording names them
    res = runner.invoke(app, ["ptx", "propose", str(path), "--workload", "M=64,N=1024", "--rules", "cache_hint",
                              "--llm", "--json", "--replay", str(tmp_path / "out" / "llm")])
    assert res.exit_code == 0, res.output
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert [e["diff"] for e in kw["edits"] if e["candidate"]["rule"] == "llm"] == [edit["diff"]]
    # bad settings: no model; no folder to record in; a model that keeps answering nonsense
    res = runner.invoke(app, ["ptx", "propose", str(path), "--llm", "--provider", "openai", "--out",
                              str(tmp_path / "o2")])
    assert res.exit_code == 2 and "no LLM model is configured" in res.output
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--replay DIR" in res.output
    with ScriptedLLMServer([{"content": "no"}] * 3) as server:
        res = runner.invoke(app, args + ["--base-url", server.base_url, "--out", str(tmp_path / "o3")])
    (kw,) = json.loads(res.stdout)["targets"][0]["kernels"]
    assert not [e for e in kw["edits"] if e["candidate"]["rule"] == "llm"]
    assert any(n.startswith("llm:m:") and "no edit for entry block" in n for n in kw["notes"])


def test_bad_input_is_refused_before_any_build(tmp_path, monkeypatch):
    """A --workload without an axis of the op (or with one it lacks), a .ptx that is not PTX, a .cubin that is not
    a cubin, --llm with no model configured or an empty --replay: exit 2, saying what was expected."""
    for var in ("KERNELLOOP_LLM_CONFIG", "KERNELLOOP_LLM_PROVIDER", "KERNELLOOP_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    cand = Candidate(op="rmsnorm", template="rowwise", source=(ops_dir() / "rmsnorm" / "kernel.py").read_text(),
                     config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    (tmp_path / "g.ptx").write_text("this is not PTX\n")
    (tmp_path / "g.cubin").write_bytes(b"not an ELF")
    (tmp_path / "empty").mkdir()
    for args, said in (
            (["recover", str(path), "--workload", "M=256"], "--workload 'M=256' for rmsnorm: axes: axes ['M'] "
                                                            "differ from the spec's ['M', 'N'] (missing N)"),
            (["propose", str(path), "--workload", "M=256,N=64,K=3"], "(unknown K)"),
            (["recover", str(path), "--workload", "M=x"], "'M=x' is not NAME=INTEGER"),
            (["recover", str(tmp_path / "g.ptx")], "not PTX (expected the text of a PTX module"),
            (["recover", str(tmp_path / "g.cubin")], "not a cubin (expected an ELF cubin or a CUDA fatbinary)"),
            (["propose", str(path), "--llm", "--out", str(tmp_path / "o")], "no LLM model is configured: give "
                                                                            "--provider and --model"),
            (["propose", str(path), "--llm", "--replay", str(tmp_path / "empty")], "no recording at")):
        res = runner.invoke(app, ["ptx", *args])
        assert res.exit_code == 2, (args, res.output)
        assert said in " ".join(res.output.split()), (args, res.output)
        assert "None" not in res.output and "Traceback" not in res.output


def test_the_executor_is_a_choice_and_the_stand_in_needs_the_interpreter(tmp_path, monkeypatch):
    """--executor takes gpu or stand-in only (any other word ran the stand-in); the stand-in without
    TRITON_INTERPRET=1 is bad input said plainly before any build (it was a traceback, exit 1, after the builds)."""
    cand = Candidate(op="rmsnorm", template="rowwise", source=(ops_dir() / "rmsnorm" / "kernel.py").read_text(),
                     config=SMALL)
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    res = runner.invoke(app, ["ptx", "prove", str(path), "--workload", "M=64,N=1024", "--executor", "cpu"])
    assert res.exit_code == 2 and "'cpu' is not one of 'gpu'," in res.output and "'stand-in'" in res.output
    monkeypatch.delenv("TRITON_INTERPRET")
    res = runner.invoke(app, ["ptx", "time", str(path), "--workload", "M=64,N=1024", "--executor", "stand-in"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "run the command with TRITON_INTERPRET=1" in " ".join(res.output.split())


def test_replay_help_names_the_ptx_recording():
    res = runner.invoke(app, ["ptx", "propose", "--help"], env={"COLUMNS": "200"})
    assert "llm-ptx/" in res.output and "a run's llm/ folder" not in res.output
