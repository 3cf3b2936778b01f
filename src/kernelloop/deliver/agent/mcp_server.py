"""The agent operations as MCP tools (`kernelloop mcp`, stdio), with the official `mcp` Python SDK.

Tools: `init_workspace`, `interface`, `proposal_schema`, `submit_kernel`, `submit_proposal`, `status`. Each
takes an optional `workspace` (default: the one the server was started with). Submissions run through
`kernelloop.deliver.agent.submit` -- the real controller, evaluator and archive -- and answer with the same JSON verdict
as `kernelloop submit`. Anticipated failures (no workspace, unknown parent, invalid proposal, changed op folder)
come back as tool errors the model can read. While the server runs, the SDK points fds 0/1 away from the wire,
so nothing a worker process prints can corrupt the protocol.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .workspace import WorkspaceError


def build_server(workspace: str | Path | None = None, device: str | None = None) -> MCPServer:
    """An MCPServer exposing the agent tools; `workspace`/`device` are the defaults of every tool."""
    server = MCPServer("kernelloop", instructions=(
        "kernelloop judges GPU kernels: submit Triton code with submit_kernel (or a KernelProposal with "
        "submit_proposal); it is compiled, verified against the reference on inputs and shapes you are not shown, "
        "timed when correct and archived with its lineage. Read `interface` first. You cannot change the "
        "reference, the verifier, the timer or the archive."))
    ws_of = _workspace_of(Path(workspace).resolve() if workspace else None)
    _add_workspace_tools(server, ws_of)
    _add_submit_tools(server, ws_of, device)
    return server


def _workspace_of(default_ws: Path | None):
    """A tool's `workspace` argument as a folder, the server's default when not given."""
    def ws_of(arg: str | None) -> Path:
        if arg:
            return Path(arg)
        if default_ws is None:
            raise ToolError("no workspace: pass `workspace`, or start the server with --workspace")
        return default_ws
    return ws_of


def _guarded(fn, *args, **kwargs) -> Any:
    """`fn(*args, **kwargs)`, its expected failures answered as a ToolError that names them."""
    from .submit import SubmissionError
    from ...core.manifest import ManifestChanged
    from ...core.archive import ArchiveError
    from ...core.sandbox.keys import RunKeyError
    try:
        return fn(*args, **kwargs)
    except (WorkspaceError, SubmissionError, ManifestChanged, ArchiveError, FileExistsError, ValueError,
            RunKeyError) as e:
        raise ToolError(f"{type(e).__name__}: {e}") from None


def _add_workspace_tools(server: MCPServer, ws_of) -> None:
    """The tools that set up and read a workspace: init_workspace, interface, proposal_schema."""
    @server.tool()
    def init_workspace(spec: str, out: str, run: str | None = None, workloads: str | None = None,
                       device: str | None = None) -> dict:
        """Create a workspace for an op (folder or spec.toml): interface, baseline figures (from a run archive
        when `run` is given), copies of the spec, reference and templates for reading."""
        from .workspace import init_workspace as init
        ws = _guarded(init, spec, out, workloads_file=workloads, run=run, device=device)
        return {"workspace": str(ws.root), "op": ws.data["op"], "device": ws.device,
                "workloads": [w["axes"] | {"dtype": w["dtype"]} for w in ws.data["workloads"]]}

    @server.tool()
    def interface(workspace: str | None = None) -> dict:
        """The op's launch signature, tensor shapes and dtypes per workload, rules, template parameters, and the
        baseline figures to beat."""
        root = ws_of(workspace)
        from .workspace import Workspace
        ws = _guarded(Workspace.load, root)
        return {"interface": json.loads((ws.root / "interface.json").read_text()),
                "baseline": json.loads((ws.root / "baseline.json").read_text())}

    @server.tool()
    def proposal_schema() -> dict:
        """JSON Schema of a KernelProposal (source or unified-diff patch, config or space, parents, rationale,
        falsifiable hypothesis)."""
        from ...tune.propose.proposal import proposal_json_schema
        return proposal_json_schema()


def _add_submit_tools(server: MCPServer, ws_of, device: str | None) -> None:
    """The tools that submit code for judgement and read the outcome: submit_kernel, submit_proposal, status."""
    @server.tool()
    def submit_kernel(source: str, config: dict[str, Any] | None = None, parent: str | None = None,
                      hypothesis: str = "", agent: str = "mcp", workspace: str | None = None,
                      space: dict[str, list[Any]] | None = None, profile: bool = True) -> dict:
        """Compile, verify, benchmark (and on CUDA profile) a Triton module defining `launch`, on every workload.
        `config`: keyword arguments for launch. `space`: several configurations at once, parameter -> values,
        every combination (at most 16), `config` holding the fixed keys. `parent`: the candidate id it derives
        from. `hypothesis`: what you expect to move, e.g. 'registers down; latency_us down -10%'. `profile`:
        false skips Nsight Compute on CUDA. Returns the verdict with its evidence."""
        from .submit import Submission, submit
        sub = Submission(source=source, config=dict(config or {}), space=dict(space) if space else None,
                         parent=parent, hypothesis=hypothesis, agent=agent)
        return _guarded(submit, ws_of(workspace), sub, device=device, profile=profile)

    @server.tool()
    def submit_proposal(proposal: dict[str, Any], parent: str | None = None, hypothesis: str = "",
                        agent: str = "mcp", workspace: str | None = None) -> dict:
        """Validate a KernelProposal (see proposal_schema), then evaluate each configuration it names like
        submit_kernel. An invalid proposal is answered with the validation error; nothing runs."""
        from .submit import Submission, submit
        sub = Submission(proposal=proposal, parent=parent, hypothesis=hypothesis, agent=agent)
        return _guarded(submit, ws_of(workspace), sub, device=device)

    @server.tool()
    def status(workspace: str | None = None) -> dict:
        """The workspace's run: Pareto front and best kernel time per workload, counts by verdict, recent
        submissions."""
        from .status import workspace_status
        return _guarded(workspace_status, ws_of(workspace), device).as_json()


def serve(workspace: str | Path | None = None, device: str | None = None) -> None:
    """Run the server on stdio until the client closes it."""
    build_server(workspace, device).run("stdio")


__all__ = ["build_server", "serve"]
