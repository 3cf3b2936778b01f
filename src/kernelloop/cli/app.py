"""The `kernelloop` command."""

from __future__ import annotations

import typer

from .optimize import optimize
from .show import show

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="kernelloop: a closed loop that makes GPU kernels faster and proves it.")
app.command()(optimize)
app.command()(show)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
