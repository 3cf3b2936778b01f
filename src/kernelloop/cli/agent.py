"""`kernelloop agent init|status|llm`: workspaces for outside agents, and the LLM proposer's loop."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import common
from .common import esc
from .llm_options import (LlmBaseUrlOpt, LlmConfigOpt, LlmKeyEnvOpt, LlmModelOpt, LlmProviderOpt, LlmReplayOpt,
                          llm_config)

agent_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                        help="Agents as proposers: workspaces for outside agents, the LLM proposer.")


@agent_app.command("init")
def init(
    spec: Annotated[str, typer.Argument(help=common.SPEC_HELP)],
    out: Annotated[Optional[Path], typer.Option(help="Workspace folder (default: agent-<op>-<time>).")] = None,
    run: Annotated[Optional[Path], typer.Option(help="A run folder whose figures become the baseline.")] = None,
    workloads: Annotated[Optional[Path], typer.Option(help="Workload file (default: the op's, by device).")] = None,
    device: Annotated[Optional[str], typer.Option(help="cuda or interpret (default: cuda when present).")] = None,
    checks: Annotated[int, typer.Option(min=1, help="Verification runs per trial.")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the workspace manifest as JSON.")] = False,
) -> None:
    """Create a workspace: spec and reference copies for reading, the launch interface, baseline figures."""
    from ..deliver.agent.workspace import WorkspaceError, init_workspace
    from ..core.spec import SpecError
    console = common.console(stderr=True)
    op = common.resolve_op(spec)
    target = out or Path(f"agent-{op.name if op.is_dir() else op.parent.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        ws = init_workspace(op, target, workloads_file=common.resolve_path(workloads), run=run, device=device, checks=checks)
    except (SpecError, ValueError) as e:
        console.print(f"[red]bad input:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    except WorkspaceError as e:
        console.print(f"[red]{esc(e)}[/red]")
        raise typer.Exit(common.BAD_INPUT)
    if as_json:
        print(json.dumps({"workspace": str(ws.root), **ws.data}, indent=2))
    else:
        console.print(f"workspace {esc(ws.root)} for {esc(ws.data['op'])} on {esc(ws.device)}: read {esc(ws.root / 'README.md')}")


@agent_app.command("status")
def status(
    workspace: Annotated[Path, typer.Option(help="Workspace folder.")] = Path("."),
    device: Annotated[Optional[str], typer.Option(help="Which device's run (default: the workspace's).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The answer is JSON (always; accepted like every "
                                                         "command's --json).")] = True,
) -> None:
    """The workspace run's front, best kernel time per workload, counts and recent submissions (JSON)."""
    from ..deliver.agent.status import workspace_status
    from ..deliver.agent.workspace import WorkspaceError
    try:
        print(json.dumps(workspace_status(workspace, device).as_json(), indent=2))
    except WorkspaceError as e:
        common.console(stderr=True).print(f"[red]{esc(e)}[/red]")
        raise typer.Exit(common.BAD_INPUT)


@agent_app.command("llm")
def llm(
    spec: Annotated[str, typer.Argument(help=common.SPEC_HELP)],
    config: LlmConfigOpt = None,
    provider: LlmProviderOpt = None,
    model: LlmModelOpt = None,
    base_url: LlmBaseUrlOpt = None,
    api_key_env: LlmKeyEnvOpt = None,
    replay: LlmReplayOpt = None,
    workloads: Annotated[Optional[Path], typer.Option(help="Workload file.")] = None,
    budget: Annotated[int, typer.Option(min=1, help="Candidates per workload.")] = 8,
    calls: Annotated[int, typer.Option(min=1, help="LLM calls per workload.")] = 40,
    device: Annotated[Optional[str], typer.Option(help="cuda or interpret.")] = None,
    checks: Annotated[int, typer.Option(min=1, help="Verification runs per trial.")] = 2,
    prompts: Annotated[str, typer.Option(help="Prompt set version (a folder of the built-in prompts, or of "
                                              "$KERNELLOOP_PROMPTS).")] = "v1",
    out: Annotated[Optional[Path], typer.Option(help="Run folder (default: runs/<op>-llm-<time>).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out (recorded calls are reused).")] = False,
    no_confirm: Annotated[bool, typer.Option("--no-confirm",
                                             help="Skip re-measuring winners beside baselines.")] = False,
    gate: Annotated[Optional[str], typer.Option(help=common.GATE_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON.")] = False,
) -> None:
    """Run the loop with the LLM proposer (planner, coder, debugger); every call is recorded under RUN/llm."""
    from ..deliver import api
    from ..core.archive import Archive, ArchiveError
    from ..tune.loop import Budget, RunOptions
    from ..core.manifest import ManifestChanged
    from ..tune.loop.llm import run_llm
    from ..tune.propose.llm import LLMBudget, LLMConfigError, ReplayMiss, render_llm
    from ..deliver.report.terminal import render
    from ..core.spec import SpecError, load_op, load_workloads
    console = common.console(stderr=as_json)
    try:
        bundle = load_op(common.resolve_op(spec))
        dev = api.resolve_device(device)
        wl = common.resolve_path(workloads) or api.default_workloads(bundle.folder, dev)
        wls = load_workloads(wl, bundle.spec)
        cfg = llm_config(config, provider, model, base_url, api_key_env, replay=replay)
        api.check_gate(gate)
    except (SpecError, LLMConfigError, api.UsageError) as e:
        console.print(f"[red]bad input:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    run_dir = out or Path("runs") / f"{bundle.spec.name}-llm-{time.strftime('%Y%m%d-%H%M%S')}"
    opts = RunOptions(device=dev, budget=Budget.unlimited(), checks=checks, confirm=not no_confirm,
                      **({"gate": gate} if gate is not None else {}))
    try:
        run_llm(bundle, wls, opts, run_dir, cfg, mode="replay" if replay else "record", cassette_dir=replay,
                prompts_version=prompts, budget=LLMBudget(candidates=budget, calls=calls), resume=resume)
    except (FileExistsError, ManifestChanged, ArchiveError, ReplayMiss, LLMConfigError, RuntimeError) as e:
        console.print(f"[red]run stopped:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted; continue with --resume --out {esc(run_dir)}[/yellow]")
        raise typer.Exit(common.INTERRUPTED)
    with Archive(run_dir / "archive.sqlite") as archive:
        summary = api.summarize(archive, run_dir=run_dir)   # the record kernelloop.Run.load(run_dir) holds
    if as_json:
        print(summary.model_dump_json(indent=2))
    else:
        render(summary.model_dump(mode="json"), console)
        render_llm(summary.llm, console)
    if any(w.best is None for w in summary.workloads):
        raise typer.Exit(common.FAILED)


__all__ = ["agent_app"]
