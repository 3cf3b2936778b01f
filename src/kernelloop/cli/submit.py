"""`kernelloop submit FILE`: judge an agent's kernel in a workspace; print the JSON verdict.

Exit codes: 0 PASSED on every workload (and every configuration); 1 judged, but some workload or configuration
did not pass; 2 bad input (no workspace, unreadable file, invalid proposal, unknown parent, bad --config or
--space); 3 the evaluation could not run (the op folder or the run's manifest changed, archive error, worker
failed to start).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..deliver.api import DEVICES
from . import common
from .common import esc


def submit(
    file: Annotated[Path, typer.Argument(help="A Python module defining `launch`, or a KernelProposal .json.")],
    parent: Annotated[Optional[str], typer.Option(help="Candidate id this one derives from.")] = None,
    hypothesis: Annotated[str, typer.Option(help="What you expect to move, e.g. "
                                                 "'registers down; latency_us down -10%'.")] = "",
    config: Annotated[Optional[str], typer.Option(help="Keyword arguments of launch, as a JSON object.")] = None,
    space: Annotated[Optional[str], typer.Option(
        help="Several configurations in one submission: a JSON object parameter -> list of values; every "
             "combination is judged (at most 16), --config holding the fixed keys.")] = None,
    workspace: Annotated[Path, typer.Option(help="Workspace folder (from `kernelloop agent init`).")] = Path("."),
    device: Annotated[Optional[str], typer.Option(help="cuda or interpret (default: the workspace's).")] = None,
    agent: Annotated[str, typer.Option(help="Name recorded as the proposer (agent:NAME).")] = "agent",
    confirm: Annotated[bool, typer.Option(help="Also re-measure each workload's best beside the baselines.")] = False,
    profile: Annotated[bool, typer.Option(help="On CUDA, profile PASSED trials with Nsight Compute when ncu is "
                                               "installed (--no-profile: verdicts and timings only).")] = True,
    timeout: Annotated[Optional[float], typer.Option(
        "--timeout", min=1.0, help="Seconds each worker job of a trial may take: loading, verification (the first "
                                   "call compiles) and timing, each (default 300, timing 600); past it the worker "
                                   "is killed and the trial is TIMEOUT.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The answer is JSON (always; accepted like every "
                                                         "command's --json).")] = True,
) -> None:
    """Compile, verify, benchmark (and profile on CUDA) a kernel through the workspace's run; JSON verdict."""
    from ..deliver.agent.submit import Submission, SubmissionError
    from ..deliver.agent.submit import submit as run_submit
    from ..deliver.agent.workspace import WorkspaceError
    from ..core.archive import ArchiveError
    from ..core.execute.evaluate import Timeouts
    from ..core.manifest import ManifestChanged
    err = common.console(stderr=True)
    parsed = {}
    for name, text in (("--config", config), ("--space", space)):
        try:
            value = json.loads(text) if text else {}
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
        except (json.JSONDecodeError, ValueError) as e:
            err.print(f"[red]bad argument:[/red] {esc(name)}: {esc(e)}")
            raise typer.Exit(common.BAD_INPUT)
        parsed[name] = value
    cfg, spc = parsed["--config"], parsed["--space"] or None
    if device is not None and device not in DEVICES:
        err.print(f"[red]bad argument:[/red] --device {esc(repr(device))}: use cuda or interpret")
        raise typer.Exit(common.BAD_INPUT)
    try:
        sub = Submission.from_file(file, parent=parent, hypothesis=hypothesis, config=cfg, space=spc, agent=agent)
        timeouts = Timeouts(check=timeout, bench=timeout) if timeout is not None else None
        answer = run_submit(workspace, sub, device=device, confirm=confirm, profile=profile, timeouts=timeouts)
    except SubmissionError as e:
        print(json.dumps({"verdict": "INVALID", "error": str(e)}, indent=2))
        raise typer.Exit(common.BAD_INPUT)
    except WorkspaceError as e:
        print(json.dumps({"verdict": "NOT_EVALUATED", "error": str(e)}, indent=2))
        raise typer.Exit(common.BAD_INPUT if "not a kernelloop workspace" in str(e) else common.STOPPED)
    except (ManifestChanged, ArchiveError, FileExistsError, RuntimeError) as e:
        answer = {"verdict": "NOT_EVALUATED", "error": str(e)}
        # the controller refuses to resume a run whose frozen manifest differs (raised as ManifestChanged, or as
        # RuntimeError "cannot resume: the manifest changed ...")
        if isinstance(e, ManifestChanged) or "manifest changed" in str(e):
            answer["hint"] = ("this workspace's run was frozen under another reference, verifier, timer or "
                              "environment: start a new workspace (`kernelloop agent init SPEC --out NEW`) and "
                              "submit there")
        print(json.dumps(answer, indent=2))
        raise typer.Exit(common.STOPPED)
    print(json.dumps(answer, indent=2))
    if answer["verdict"] != "PASSED":
        raise typer.Exit(common.FAILED)
