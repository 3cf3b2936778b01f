"""The MCP server through a real MCP client session: the SDK's stdio client spawns `python -m kernelloop.cli.app mcp`
and calls the tools: init a workspace, read the interface and schema, submit a kernel (judged by the real
controller), submit an invalid proposal (answered with the validation error), read the status."""

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is a test extra (absent on the GPU image)")
import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[2]
CHEATS = ROOT / "tests" / "fixtures" / "cheats"
# Gallery cheats an agent might submit: caught by a source rule, by the value check, by the poisoned output.
GALLERY = {"library_functional.py": "REJECTED", "zeros_output.py": "WRONG_VALUES", "no_op.py": "WRONG_INCOMPLETE"}
OP = ops_dir() / "layernorm"
TEMPLATE = (OP / "kernel.py").read_text()
CONFIG = {"BLOCK_N": 64, "ROWS": 1, "num_warps": 1}


def _json(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def _session(tmp_path: Path) -> dict:
    out: dict = {}
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelloop.cli.app", "mcp"], cwd=str(ROOT))
    with open(tmp_path / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
                ws = str(tmp_path / "ws")
                out["init"] = _json(await session.call_tool("init_workspace", {
                    "spec": str(OP), "out": ws, "workloads": str(tmp_path / "wl.toml"), "device": "interpret"}))
                out["interface"] = _json(await session.call_tool("interface", {"workspace": ws}))
                out["schema"] = _json(await session.call_tool("proposal_schema", {}))
                out["submit"] = _json(await session.call_tool("submit_kernel", {
                    "source": TEMPLATE, "config": CONFIG, "hypothesis": "latency_us down -5%", "agent": "mcp-test",
                    "workspace": ws}))
                bad = {"patch": "@@ -1,1 +1,1 @@\n-no such line\n+x\n",
                       "parent_ids": [out["submit"]["candidates"][0]["id"]],
                       "rationale": "r", "hypothesis": {"metrics": [{"metric": "registers", "direction": "up"}],
                                                        "latency_change_pct": -1}}
                out["invalid"] = await session.call_tool("submit_proposal", {"proposal": bad, "workspace": ws})
                out["no_ws"] = await session.call_tool("status", {})
                out["status"] = _json(await session.call_tool("status", {"workspace": ws}))
                out["cheats"] = {}
                for name in GALLERY:
                    out["cheats"][name] = _json(await session.call_tool("submit_kernel", {
                        "source": (CHEATS / name).read_text(), "config": {}, "agent": "mcp-cheater",
                        "workspace": ws, "profile": False}))
    return out


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mcp")
    try:
        return anyio.run(_session, folder)
    except Exception as e:   # the server's own account of why the session ended (it was seen to close once)
        log = folder / "server.stderr"
        tail = log.read_text(errors="replace")[-4000:] if log.is_file() else "(no server log)"
        raise RuntimeError(f"the MCP session failed: {e!r}\nserver stderr:\n{tail}") from e


def test_tools_are_listed(session):
    assert session["tools"] == ["init_workspace", "interface", "proposal_schema", "status", "submit_kernel",
                                "submit_proposal"]
    assert session["interface"]["interface"]["launch"] == "launch(x, weight, bias, y, *, eps, **config)"
    assert session["interface"]["baseline"]["status"] == "not measured"
    assert session["schema"]["title"] == "KernelProposal"


def test_submit_over_mcp_is_judged_and_archived(session):
    ans = session["submit"]
    assert ans["verdict"] == "PASSED" and ans["results"][0]["measurement"]["kernel_us"] > 0
    assert ans["candidates"][0]["proposer"] == "agent:mcp-test"
    st = session["status"]
    assert st["run"] == ans["run"] and st["counts"] == {"PASSED": 1}
    assert st["workloads"][0]["front"][0]["candidate"] == ans["candidates"][0]["id"]


def test_invalid_proposal_and_missing_workspace_are_tool_errors(session):
    assert session["invalid"].is_error and "does not apply" in session["invalid"].content[0].text
    assert session["no_ws"].is_error and "no workspace" in session["no_ws"].content[0].text


def test_gallery_cheats_get_the_same_verdict_over_mcp_as_through_the_cli(session, tmp_path):
    """The MCP path judges exactly as `kernelloop submit` does: same status and same message, cheat by cheat."""
    from typer.testing import CliRunner

    from kernelloop.cli.app import app
    (tmp_path / "wl.toml").write_text('op = "layernorm"\n[[workload]]\naxes = { M = 4, N = 64 }\ndtype = "fp16"\n')
    ws = tmp_path / "ws"
    r = CliRunner().invoke(app, ["agent", "init", str(OP), "--out", str(ws), "--workloads", str(tmp_path / "wl.toml"),
                                 "--device", "interpret"])
    assert r.exit_code == 0, r.output
    for name, status in GALLERY.items():
        over_mcp = session["cheats"][name]
        r = CliRunner().invoke(app, ["submit", str(CHEATS / name), "--workspace", str(ws), "--agent", "cli-cheater",
                                     "--no-profile"])
        through_cli = json.loads(r.stdout)
        assert over_mcp["verdict"] == through_cli["verdict"] == status, (name, over_mcp, through_cli)
        # statuses and messages per workload (the failing case's seed differs: each workspace has its own secret)
        mcp = [(x["status"], x["message"]) for x in over_mcp["results"]]
        cli = [(x["status"], x["message"]) for x in through_cli["results"]]
        assert mcp == cli and all(m for _, m in mcp), name
