"""`kernelloop mcp`: serve the agent operations (init, interface, submit, status) as MCP tools over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def mcp(
    workspace: Annotated[Optional[Path], typer.Option(help="Default workspace of every tool.")] = None,
    device: Annotated[Optional[str], typer.Option(help="cuda or interpret (default: the workspace's).")] = None,
) -> None:
    """Run the MCP server on stdin/stdout (for Claude Code, Codex and other MCP clients)."""
    from ..deliver.agent.mcp_server import serve
    serve(workspace, device)
