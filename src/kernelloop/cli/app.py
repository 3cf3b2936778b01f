"""The `kernelloop` command."""

from __future__ import annotations

import typer

from .optimize import optimize
from .record import record
from .audit import audit_pruning
from .replay import replay
from .profile import profile
from .show import show
from .agent import agent_app  # issue 6 (agents as proposers)
from .mcp import mcp  # issue 6
from .submit import submit  # issue 6
from .trace import trace_app  # FlashInfer-Trace import/export
from .capture import capture
from .export import export
from .e2e import e2e
from .accelerate import accelerate
from .report import report  # the HTML report
from .ops import ops
from .reproduce import reproduce
from .ptx import ptx_app
from .fuse import fuse_app
from .gate import gate_app
from .schedule import schedule_app
from .gaps import gaps
from .extend import extend_app
from .keys import keys_app

app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                  help="kernelloop: a closed loop that makes GPU kernels faster and proves it.")
app.command()(optimize)
app.command()(show)
app.command()(ops)
app.command()(replay)
app.command()(record)
app.command()(profile)
app.command(name="audit-pruning")(audit_pruning)
app.add_typer(agent_app, name="agent")  # issue 6
app.command()(submit)  # issue 6
app.command()(mcp)  # issue 6
app.add_typer(trace_app, name="trace")  # FlashInfer-Trace import/export
app.command()(capture)
app.command()(export)
app.add_typer(keys_app, name="keys")   # the package signing key and trust store
app.command()(e2e)
app.command()(accelerate)
app.command()(report)  # the HTML report
app.command()(reproduce)
app.add_typer(ptx_app, name="ptx")
app.add_typer(fuse_app, name="fuse")
app.add_typer(schedule_app, name="schedule")
app.add_typer(gate_app, name="gate")
app.command()(gaps)
app.add_typer(extend_app, name="extend")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
