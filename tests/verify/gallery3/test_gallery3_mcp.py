"""The third gallery through MCP: an outside agent's submissions over the MCP server (the SDK's stdio client spawns
`python -m kernelloop.cli.app mcp`, which judges with the real controller) meet the same boundary as `submit`:
the allow-list, the semantic tolerances, the guard zones and the archive's MACs. The judging process is the
server; what comes back is the answer an agent reads."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is a test extra (absent on the GPU image)")
import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CHEATS3 = ROOT / "tests" / "fixtures" / "cheats3"
OP = ops_dir() / "layernorm"
# submission -> (the status every workload must get, words its message carries)
CASES = {
    "allowlist/runtime_os.py": ("REJECTED", "not-allowed"),
    "allowlist/frame_walk.py": ("REJECTED", "not-allowed"),
    "proto/forged_timing_agent.py": ("REJECTED", "not-allowed"),
    "semantics/scaled_layernorm.py": ("WRONG_VALUES", "bias"),
    "semantics/layernorm_skips_mean.py": ("WRONG_VALUES", "y: "),
    "semantics/writes_one_past.py": ("REJECTED", "memory-safety"),
}


def _json(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def _session(tmp_path: Path) -> dict:
    out: dict = {"cases": {}}
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 8, N = 256 }\ndtype = "fp16"\n'
                                      '[[workload]]\naxes = { M = 4, N = 512 }\ndtype = "fp32"\n')
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelloop.cli.app", "mcp"], cwd=str(ROOT))
    ws = str(tmp_path / "ws")
    with open(tmp_path / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                _json(await session.call_tool("init_workspace", {
                    "spec": str(OP), "out": ws, "workloads": str(tmp_path / "wl.toml"), "device": "interpret"}))
                for name in CASES:
                    out["cases"][name] = _json(await session.call_tool("submit_kernel", {
                        "source": (CHEATS3 / name).read_text(), "config": {}, "agent": "mcp-adversary",
                        "workspace": ws, "profile": False}))
                out["status"] = _json(await session.call_tool("status", {"workspace": ws}))
                db = Path(ws) / ".kernelloop" / "run-interpret" / "archive.sqlite"
                con = sqlite3.connect(db)           # the agent edits the archive it can reach
                con.execute("UPDATE trials SET status = 'PASSED'")
                con.commit()
                con.close()
                out["after_edit"] = _json(await session.call_tool("status", {"workspace": ws}))
    return out


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcp3")
    try:
        return anyio.run(_session, folder)
    except Exception as e:
        log = folder / "server.stderr"
        tail = log.read_text(errors="replace")[-4000:] if log.is_file() else "(no server log)"
        raise RuntimeError(f"the MCP session failed: {e!r}\nserver stderr:\n{tail}") from e


@pytest.mark.parametrize("name", list(CASES))
def test_every_case_is_judged_as_through_submit(session, name):
    status, words = CASES[name]
    ans = session["cases"][name]
    assert ans["verdict"] not in ("PASSED", "FASTER"), ans
    results = ans["results"]
    assert results and all(r["status"] == status for r in results), results
    assert all(words in json.dumps(r) for r in results), results


def test_no_trial_passed_and_an_edited_archive_reads_as_tampered(session):
    assert session["status"]["integrity"]["state"] == "authenticated", session["status"]["integrity"]
    assert not session["status"]["counts"].get("PASSED"), session["status"]["counts"]
    after = session["after_edit"]
    assert after["integrity"]["state"] == "tampered", after["integrity"]
    assert not after["counts"].get("PASSED"), after["counts"]
