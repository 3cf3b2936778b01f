"""examples/agent-dogfood: the chunk-resident LayerNorm submitted the way an outside agent does it.

`kernelloop agent init` + `kernelloop submit --space` in the interpreter on a tiny workload (N = 300 with a
partial last chunk, N = 65 with a one-element last chunk; both the register-resident and the streaming path)
must PASS; a copy whose variance forgets to mask the tail chunk must come back WRONG_VALUES with the verifier's
evidence. (tests/ops/test_chunked_compile.py compiles the kernel for sm_90 with the arguments Triton turns into
constants, N == 1 and M == 1, which the interpreter never does.)
"""

import json

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.agent import Submission, submit, workspace_status
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.core.execute.evaluate import Timeouts

OP = ops_dir() / "layernorm"
EXAMPLE = ops_dir() / "layernorm" / "chunked.py"  # written in the agent-mode dogfood, now the op's second template
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
    st = workspace_status(ws).as_json()
    assert st["counts"] == {"PASSED": 4}
    assert all(w["best"]["config"]["CHUNK"] in (8, 64) for w in st["workloads"])


def test_a_tail_that_is_not_masked_is_wrong(ws):
    ans = submit(ws, Submission(source=BROKEN, config={**FIXED, "CHUNK": 64}, agent="dogfood"), **FAST)
    assert ans["verdict"] == "WRONG_VALUES"
    fp32 = next(x for x in ans["results"] if x["workload"].endswith(":fp32"))
    assert fp32["status"] == "WRONG_VALUES" and fp32["measurement"] is None
    assert fp32["failing_case"] and fp32["error_metrics"][0]["mismatched"] > 0
    assert workspace_status(ws).as_json()["counts"].get("WRONG_VALUES", 0) >= 1


def test_a_proposal_with_a_cli_config_is_refused(ws, tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"source": SOURCE, "config": {"CHUNK": 64}, "rationale": "r",
                             "hypothesis": {"metrics": [{"metric": "latency_us", "direction": "down"}],
                                            "latency_change_pct": -10}}))
    r = CliRunner().invoke(app, ["submit", str(p), "--workspace", str(ws), "--config", '{"num_warps": 2}'])
    assert r.exit_code == common.BAD_INPUT and "its own configuration" in _json(r.stdout)["error"]
