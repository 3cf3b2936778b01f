"""`fuse` end to end in Triton's interpreter: llama-tiny's patterns realised through the loop (budget 1), admitted
into a pattern table on verification alone, composed into its exported graph; qwen2-tiny at other shapes reuses
the table -- re-verification, no search; gpt2-tiny's GEMM + GELU epilogue through the CLI.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kernelloop.core.archive import Archive  # noqa: E402
from kernelloop.deliver.fuse import FuseReport, PatternTable, fuse  # noqa: E402

pytest.importorskip("transformers")
from kernelloop.deliver.capture import models  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


GPT2_TEST = "test_gpt2_gemm_epilogue_through_the_cli"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuse")


@pytest.fixture(scope="module", autouse=True)
def gpt2_cli(request, work):
    """`kernelloop fuse gpt2-tiny` as its own process, started before the llama and qwen2 runs of this module (its own
    folder and pattern table: independent of them), so it runs beside them; its test waits for it."""
    if not any(item.name == GPT2_TEST for item in request.session.items):
        yield None
        return
    out = work / "gpt2"
    out.mkdir()
    logs = open(out.parent / "gpt2.stdout", "w+"), open(out.parent / "gpt2.stderr", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "kernelloop.cli.app", "fuse", "gpt2-tiny", "--family",
                             "gemm_epilogue", "--budget", "1", "--out", str(out), "--json"], stdout=logs[0],
                            stderr=logs[1], text=True)
    try:
        yield proc, out, logs
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in logs:
            f.close()


@pytest.fixture(scope="module")
def llama(work):
    model, inputs = models.build("llama-tiny")
    return model, inputs, fuse(model, [inputs], out=work / "llama", budget=1, table=work / "patterns.sqlite")


@pytest.fixture(scope="module")
def qwen(work, llama):
    model, inputs = models.build("qwen2-tiny", batch=3, seq=5)
    return model, inputs, fuse(model, [inputs], out=work / "qwen2", budget=1, table=work / "patterns.sqlite",
                               families=["residual_add_norm", "gemm_gate"])


def _by_kind(report: FuseReport) -> dict[str, list]:
    out = {}
    for p in report.patterns:
        out.setdefault(p.kind, []).append(p)
    return out


def test_llama_patterns_realised_and_composed(llama):
    model, inputs, result = llama
    r = result.report
    kinds = _by_kind(r)
    assert sorted(kinds) == ["add_norm", "dual_gemm", "gate_mul", "rotary"]
    assert all(p.passed and p.source == "search" and p.speed == "not measured" for p in r.patterns)
    assert all(p.table.endswith("speed not measured") for p in r.patterns)
    replaced = {}
    for s in r.sites:
        replaced.setdefault(s.kind, []).append(s.replaced)
    # residual add + RMSNorm: 3 returning both, 1 feeding only the final norm; SwiGLU as the dual GEMM (it
    # replaces more of the graph than its elementwise tail, which overlaps it); rotary on q and k per layer
    assert replaced == {"add_norm": [True] * 4, "dual_gemm": [True] * 2, "rotary": [True] * 2,
                        "gate_mul": [False] * 2}
    assert {s.reason for s in r.sites if not s.replaced} == {"overlaps a site with a larger gain"}
    spans = [s.module_paths for s in r.sites if s.kind == "add_norm"]
    assert ["model.layers.0", "model.layers.1.input_layernorm"] in spans   # layer 0's residual add, layer 1's norm
    (e,) = r.e2e
    assert e.outputs_ok and min(c.cosine for c in e.checks) > 0.9999 and e.kept is None
    hits = {p.op: e.counts[p.op]["hits"] for p in r.patterns}
    assert all(hits[p.op] > 0 for p in r.patterns if p.replaced) and not e.counts[kinds["gate_mul"][0].op]["hits"]
    assert r.kept and result.model is result.fused and (Path(r.package) / "kernelloop-package.json").is_file()
    assert FuseReport.model_validate_json((Path(r.package).parent / "report.json").read_text()) == r


def test_fused_model_is_the_models_own_call(llama):
    model, inputs, result = llama
    fused = result.fused
    with torch.no_grad():
        got, want = fused(*inputs), model(*inputs)
        assert type(got) is type(want) and got.logits.shape == want.logits.shape
        other = torch.randint(0, models.VOCAB, (1, 5))           # a shape it was not composed for: the model runs
        torch.testing.assert_close(fused(other).logits, model(other).logits, rtol=0, atol=0)
    assert fused.fallbacks == {"no fused graph for shape 1x5": 1}


def test_qwen2_reuses_the_table_without_a_search(qwen, work):
    _, _, result = qwen
    r = result.report
    assert r.kept and r.e2e[0].outputs_ok
    assert sorted(_by_kind(r)) == ["add_norm", "dual_gemm", "gate_mul"]
    for p in r.patterns:
        assert p.source == "table" and p.table == "hit" and p.passed, (p.op, p.table)
        assert {tuple(sorted(w.axes.items())) for w in p.local} and all(w.status == "PASSED" for w in p.local)
        assert [w.axes["M"] for w in p.local] == [15]        # a new shape (llama-tiny's was 16), re-verified
    runs = sorted((work / "qwen2" / "runs").glob("*/archive.sqlite"))
    assert len(runs) == len(r.patterns) and not (work / "qwen2" / "runs" / "search").exists()
    for path in runs:
        with Archive(path, readonly=True) as a:
            run = a.runs()[0]["id"]
            trials = a.trials(run)
            assert trials and {a.get_candidate(t.candidate_id).proposer for t in trials} == {"pattern-table"}
            assert len({t.workload_id for t in trials}) == len(trials)          # one candidate per workload
            assert not a.events(run, "search") and not a.events(run, "prune")   # nothing was searched
    with PatternTable(work / "patterns.sqlite") as t:
        events = [x["event"] for x in t.log()]
        assert events.count("reverified") == len(r.patterns)
        reused = {p.pattern for p in r.patterns}
        assert all(e.status == "unmeasured" and len(e.evidence) == (2 if e.key in reused else 1)
                   for e in t.entries())


def test_gpt2_gemm_epilogue_through_the_cli(gpt2_cli):
    proc, out, (stdout, stderr) = gpt2_cli
    proc.wait(timeout=900)
    stdout.seek(0)
    stderr.seek(0)
    text = stdout.read()
    assert proc.returncode == 0, (text + stderr.read())[-3000:]
    r = FuseReport.model_validate(json.loads(text))
    p, tail = r.patterns       # addmm + the tanh GELU chain as one GEMM; the chain alone overlaps it
    assert p.kind == "gemm_epilogue" and p.passed and p.replaced == 2 and p.ops[0] == "aten.addmm.default"
    assert tail.kind == "act_tail" and tail.passed and tail.replaced == 0 and "aten.tanh.default" in tail.ops
    assert r.e2e[0].outputs_ok and r.e2e[0].counts[p.op]["hits"] > 0 and (out / "patterns.sqlite").is_file()


def test_cli_bad_input_is_exit_2(work):
    from kernelloop.cli.app import app
    for args in (["--fix", "dual_gemm=BLOCK_M=64"], ["--shapes", "2by8"], ["--dtype", "fp8"]):
        res = CliRunner().invoke(app, ["fuse", "llama-tiny", "--out", str(work / "bad"), *args])
        assert res.exit_code == 2 and "bad argument" in res.output, (args, res.output)
    res = CliRunner().invoke(app, ["fuse", "no-such-model", "--out", str(work / "bad")])
    assert res.exit_code == 2 and "unknown model" in res.output


def test_cli_refuses_a_bad_family_strategy_or_table_before_any_work(work, tmp_path, monkeypatch):
    from kernelloop.cli import fuse as cli_fuse
    from kernelloop.cli.app import app

    def no_model(*args, **kwargs):
        raise AssertionError("the model was built before the arguments were checked")
    monkeypatch.setattr(cli_fuse, "load_model", no_model)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"not": "a database"}' * 100)
    for args, said in ((["--family", "bogus"], "--family 'bogus': the realisable families are residual_add_norm, "
                                               "gemm_gate, gemm_epilogue, rotary"),
                       (["--strategy", "bogus"], "strategy 'bogus': choose from"),
                       (["--table", str(corrupt)], "not a pattern table (an SQLite file)"),
                       (["--table", str(tmp_path)], "a folder, not a pattern table")):
        res = CliRunner().invoke(app, ["fuse", "llama-tiny", "--device", "interpret", "--out", str(tmp_path / "o"),
                                       *args])
        assert res.exit_code == 2, (args, res.output)
        assert said in " ".join(res.output.split()), (args, res.output)
    from kernelloop.deliver.api import UsageError
    with pytest.raises(UsageError, match="not a pattern table"):
        fuse(torch.nn.Linear(2, 2), [(torch.ones(1, 2),)], out=tmp_path / "o", table=corrupt)
