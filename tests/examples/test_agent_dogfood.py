"""examples/agent-dogfood: the chunk-resident LayerNorm submitted the way an outside agent does it.

`kernelloop agent init` + `kernelloop submit --space` in the interpreter on a tiny workload (N = 300 with a
partial last chunk, N = 65 with a one-element last chunk; both the register-resident and the streaming path)
must PASS; a copy whose variance forgets to mask the tail chunk must come back WRONG_VALUES with the verifier's
evidence. The last test compiles the kernel for sm_90 with the arguments Triton turns into constants (N == 1,
M == 1), which the interpreter never does.
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.agent import Submission, submit, workspace_status
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.execute.evaluate import Timeouts

ROOT = Path(__file__).resolve().parents[2]
OP = ROOT / "ops" / "layernorm"
EXAMPLE = ROOT / "examples" / "agent-dogfood" / "layernorm_chunked.py"
SOURCE = EXAMPLE.read_text()
TAIL_MASK = """            if TAIL and c == NCHUNK - 1:
                d = tl.where(tmask, d, 0.0)
"""
BROKEN = SOURCE.replace(TAIL_MASK, "")   # masked-off lanes of the last chunk add mean**2 to the variance
FAST = dict(timeouts=Timeouts(check=120.0, bench=120.0))
# CHUNK=8: N=300 has 38 chunks (> MAX_CHUNKS), the streaming Welford path; CHUNK=64: register-resident
SPACE = {"CHUNK": [8, 64]}
FIXED = {"ROWS": 2, "WB_FIRST": 1, "num_warps": 1}


def _json(text: str) -> dict:
    return json.loads(text[text.index("{"):])


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    base = tmp_path_factory.mktemp("dogfood")
    wl = base / "wl.toml"
    wl.write_text('op = "layernorm"\n'
                  '[[workload]]\naxes = { M = 5, N = 300 }\ndtype = "fp16"\n'
                  '[[workload]]\naxes = { M = 3, N = 65 }\ndtype = "fp32"\n')
    r = CliRunner().invoke(app, ["agent", "init", str(OP), "--out", str(base / "ws"), "--workloads", str(wl),
                                 "--device", "interpret", "--checks", "1", "--json"])
    assert r.exit_code == 0, r.output
    return base / "ws"


def test_the_example_passes_through_submit(ws):
    assert BROKEN != SOURCE, "the tail mask the broken copy removes is in the example"
    r = CliRunner().invoke(app, ["submit", str(EXAMPLE), "--workspace", str(ws), "--config", json.dumps(FIXED),
                                 "--space", json.dumps(SPACE), "--agent", "dogfood",
                                 "--hypothesis", "latency_us down"])
    assert r.exit_code == 0, r.output
    ans = _json(r.stdout)
    assert ans["verdict"] == "PASSED" and ans["interpreter"] is True
    assert [c["config"] for c in ans["candidates"]] == [{**FIXED, "CHUNK": 8}, {**FIXED, "CHUNK": 64}]
    assert len(ans["results"]) == 4 and all(x["status"] == "PASSED" for x in ans["results"])
    assert {x["candidate"] for x in ans["results"]} == {c["id"] for c in ans["candidates"]}
    assert all(x["measurement"]["kernel_us"] > 0 for x in ans["results"])
    st = workspace_status(ws)
    assert st["counts"] == {"PASSED": 4}
    assert all(w["best"]["config"]["CHUNK"] in (8, 64) for w in st["workloads"])


def test_a_tail_that_is_not_masked_is_wrong(ws):
    ans = submit(ws, Submission(source=BROKEN, config={**FIXED, "CHUNK": 64}, agent="dogfood"), **FAST)
    assert ans["verdict"] == "WRONG_VALUES"
    fp32 = next(x for x in ans["results"] if x["workload"].endswith(":fp32"))
    assert fp32["status"] == "WRONG_VALUES" and fp32["measurement"] is None
    assert fp32["failing_case"] and fp32["error_metrics"][0]["mismatched"] > 0
    assert workspace_status(ws)["counts"].get("WRONG_VALUES", 0) >= 1


def test_compiles_for_hopper_with_constant_ones(monkeypatch):
    """Triton passes an int argument equal to 1 as a constant: N == 1 and M == 1 must still compile."""
    import importlib.util

    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
        from triton.compiler.errors import CompilationError
    except ImportError as e:
        pytest.skip(f"no ahead-of-time compiler API in this triton: {e}")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # other test modules set it: a real JITFunction here
    spec = importlib.util.spec_from_file_location("layernorm_chunked", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    base = {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", "M": "i32", "N": "i32", "stride_x": "i32",
            "stride_y": "i32", "eps": "fp32"}
    for ones in (["N", "stride_x", "stride_y"], ["M"]):
        n1 = "N" in ones
        kernels = [(mod._ln_resident, {"CHUNK": 1 if n1 else 1024, "NCHUNK": 1 if n1 else 5, "TAIL": not n1,
                                       "ROWS": 2, "VEC": 1 if n1 else 8, "WB_FIRST": 1}),
                   (mod._ln_streaming, {"CHUNK": 64, "VEC": 1 if n1 else 8})]
        for fn, consts in kernels:
            sig = {**{k: "constexpr" if k in ones else t for k, t in base.items()}, **{k: "constexpr" for k in consts}}
            values = {**{k: 1 for k in ones}, **consts}
            src = ASTSource(fn=fn, signature=sig, constexprs={(list(sig).index(k),): v for k, v in values.items()})
            try:
                triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
            except CompilationError:
                raise
            except Exception as e:  # noqa: BLE001 - no CUDA backend or ptxas here: the frontend part cannot run
                pytest.skip(f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:200]}")


def test_a_proposal_with_a_cli_config_is_refused(ws, tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"source": SOURCE, "config": {"CHUNK": 64}, "rationale": "r",
                             "hypothesis": {"metrics": [{"metric": "latency_us", "direction": "down"}],
                                            "latency_change_pct": -10}}))
    r = CliRunner().invoke(app, ["submit", str(p), "--workspace", str(ws), "--config", '{"num_warps": 2}'])
    assert r.exit_code == common.BAD_INPUT and "its own configuration" in _json(r.stdout)["error"]
