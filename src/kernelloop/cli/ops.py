"""`kernelloop ops`: the built-in ops (shipped in the package), or the ops of a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import BaseModel, Field
from rich.table import Table

from . import common
from .common import esc


class OpEntry(BaseModel):
    """One op as `kernelloop ops` lists it."""

    name: str = Field(description="Op name (what `kernelloop optimize NAME` takes).")
    description: str = Field(description="The spec's one line for humans.")
    folder: str = Field(description="The op folder (copy it to start your own op).")
    dtypes: list[str] = Field(description="Supported element types.")
    templates: list[str] = Field(description="Template names.")
    workloads: list[str] = Field(description="Workload files in the folder.")
    error: str | None = Field(None, description="Why the spec does not load (then the other fields are empty).")


def list_ops(root: Path) -> list[OpEntry]:
    """Every folder of `root` with a spec.toml, loaded and validated, sorted by name."""
    from ..core.spec import SpecError, load_op
    out = []
    for folder in sorted(p for p in root.iterdir() if (p / "spec.toml").is_file()):
        files = sorted(f.name for f in folder.glob("workloads*.toml"))
        try:
            spec = load_op(folder).spec
        except SpecError as e:
            out.append(OpEntry(name=folder.name, description="", folder=str(folder), dtypes=[], templates=[],
                               workloads=files, error=str(e)))
            continue
        out.append(OpEntry(name=spec.name, description=spec.description, folder=str(folder),
                           dtypes=[d.value for d in spec.dtypes], templates=[t.name for t in spec.templates],
                           workloads=files))
    return out


def ops(
    folder: Annotated[Optional[Path], typer.Argument(help="A folder of op folders (default: the built-in ops).")
                      ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List the built-in ops (or the op folders under FOLDER): name, dtypes, templates, workload files."""
    from ..base.builtin import ops_dir
    console = common.console(stderr=as_json)
    root = folder if folder is not None else ops_dir()
    if not root.is_dir():
        console.print(f"[red]bad argument:[/red] {esc(root)}: no such folder")
        raise typer.Exit(common.BAD_INPUT)
    entries = list_ops(root)
    if as_json:
        print(json.dumps({"folder": str(root), "ops": [e.model_dump() for e in entries]}, indent=2))
    else:
        table = Table(title=f"ops in {root}")
        for col in ("name", "description", "dtypes", "templates", "workloads"):
            table.add_column(col, overflow="fold")
        for e in entries:
            table.add_row(e.name, e.description if e.error is None else f"[red]does not load:[/red] {e.error}",
                          ", ".join(e.dtypes), ", ".join(e.templates), ", ".join(e.workloads))
        console.print(table)
        console.print("optimize one by name (`kernelloop optimize NAME`), or copy its folder to write your own "
                      "(`kernelloop optimize ./my_ops/NAME`)")
    if any(e.error for e in entries):
        raise typer.Exit(common.BAD_INPUT)
