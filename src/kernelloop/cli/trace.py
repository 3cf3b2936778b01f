"""`kernelloop trace export|import`: FlashInfer-Trace datasets from runs, and op folders from Definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import common
from .common import esc

trace_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                        help="FlashInfer-Trace: export runs as datasets, import Definitions as op folders.")


@trace_app.command("export")
def export(
    run: Annotated[Path, typer.Argument(help="Run folder (or its archive.sqlite, plain or compressed: .xz, .gz).")],
    out: Annotated[Path, typer.Option(help="Dataset folder: definitions/, workloads/, solutions/, traces/.")],
    op: Annotated[Optional[Path], typer.Option(help="The op folder the run used (default: ./ops/<op>, else the built-in op).")] = None,
    op_type: Annotated[Optional[str], typer.Option(help="Definitions' op_type (default: the op name).")] = None,
    author: Annotated[str, typer.Option(help="Author of the solutions and traces.")] = "kernelloop",
    value_returning: Annotated[bool, typer.Option(
        "--value-returning", help="Solutions allocate and return their outputs (default: destination passing, "
                                  "outputs as the last arguments, as kernelloop timed them).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was written as JSON.")] = False,
) -> None:
    """Write a run's Definitions, workloads, Solutions (candidates) and Traces (trials) as a FlashInfer dataset."""
    from ..core.archive import Archive, ArchiveError
    from ..deliver.interop import InteropError, export_run
    console = common.console(stderr=as_json, soft_wrap=True)
    path = common.archive_path(run, console)
    try:
        with Archive(path, readonly=True) as archive:
            report = export_run(archive, out, op_dir=op, op_type=op_type, author=author,
                                destination_passing_style=not value_returning)
    except InteropError as e:
        console.print(f"[red]cannot export:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    except (ArchiveError, LookupError) as e:
        console.print(f"[red]cannot read {esc(path)}:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    summary = {"out": str(out), "definitions": report.definitions, "workloads": report.workloads,
               "solutions": report.solutions, "traces": report.traces, "skipped": report.skipped,
               "files": [str(p) for p in report.files]}
    if as_json:
        print(json.dumps(summary, indent=2))
        return
    console.print(f"{esc(out)}: {report.definitions} definitions, {report.workloads} workloads, "
                  f"{esc(report.solutions)} solutions, {esc(report.traces)} traces")
    for s in report.skipped:
        console.print(f"[yellow]skipped[/yellow] {esc(s)}")


def _read_workloads(path: Path) -> list:
    from ..deliver.interop import InteropError
    from ..deliver.interop import flashinfer_trace as fi
    from ..deliver.interop.errors import parse
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InteropError("", f"cannot read: {e.strerror or e}", str(path)) from None
    out = []
    for i, line in enumerate(lines):
        if line.strip():
            where = f"{path}:{i + 1}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise InteropError("", f"not valid JSON: {e}", where) from None
            model = fi.Trace if isinstance(data, dict) and "workload" in data else fi.Workload
            out.append(parse(model, data, where))
    return out


def _from_dataset(root: Path, definition: str | None, solution: str | None, pick: bool = True):
    """The Definition, its workloads and the Solution named (or the only importable one; none when not `pick`:
    the solution came from a file)."""
    from ..deliver.interop import InteropError, load_dataset
    from ..deliver.interop.import_code import check_solution
    ds = load_dataset(root)
    if not ds.definitions:
        raise InteropError("definitions", "no Definition under definitions/", str(root))
    if definition is None:
        if len(ds.definitions) > 1:
            raise InteropError("--definition", f"the dataset holds {len(ds.definitions)}: "
                                               f"{', '.join(sorted(ds.definitions))}; name one", str(root))
        definition = next(iter(ds.definitions))
    if definition not in ds.definitions:
        known = ", ".join(sorted(ds.definitions))
        raise InteropError("--definition", f"{definition!r} is not in the dataset ({known})", str(root))
    d = ds.definitions[definition]
    sols = ds.solutions.get(definition, [])
    if solution is not None:
        chosen = [s for s in sols if s.name == solution]
        if not chosen:
            raise InteropError("--solution", f"no solution {solution!r} of {definition} in the dataset", str(root))
        sol = chosen[0]
    elif not pick:
        sol = None
    else:
        usable = []
        for s in sols:
            try:
                check_solution(s, d)
                usable.append(s)
            except InteropError:
                pass
        if len(usable) != 1:
            names = ", ".join(s.name for s in usable[:10]) + (" ..." if len(usable) > 10 else "")
            raise InteropError("--solution", f"{len(usable)} importable solutions of {definition}"
                               + (f" ({names}); name one" if usable else
                                  ": a destination-passing single-file Triton solution is needed"), str(root))
        sol = usable[0]
    return d, ds.workloads.get(definition, []), sol


@trace_app.command("import")
def import_(
    path: Annotated[Path, typer.Argument(help="A Definition .json file, or a dataset folder.")],
    ops: Annotated[Path, typer.Option(help="Folder to write the op folder into.")],
    definition: Annotated[Optional[str], typer.Option(help="Definition name, when PATH is a dataset folder.")] = None,
    workloads: Annotated[Optional[Path], typer.Option(
        help="Workloads (.jsonl of workload entries or Workloads); default in a dataset: its workloads.")] = None,
    solution: Annotated[Optional[str], typer.Option(
        help="The Solution that becomes the template: a .json file, or a solution name in the dataset.")] = None,
    name: Annotated[Optional[str], typer.Option(help="Op name (default: the definition's name).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing op folder of that name.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was written as JSON.")] = False,
) -> None:
    """Write an op folder (spec.toml, reference.py, the solution as its template, workloads.toml) from a Definition."""
    from ..deliver.interop import InteropError, import_definition
    from ..deliver.interop import flashinfer_trace as fi
    from ..deliver.interop.errors import read_json
    console = common.console(stderr=as_json, soft_wrap=True)
    try:
        sol = None
        if solution is not None and (solution.endswith(".json") or Path(solution).is_file()):
            sol = read_json(fi.Solution, solution)
        if path.is_dir():
            d, wls, ds_sol = _from_dataset(path, definition, None if sol is not None else solution,
                                           pick=sol is None)
            sol = sol or ds_sol
        else:
            if solution is not None and sol is None:
                raise InteropError("--solution", f"{solution!r} is not a file (names are looked up in a dataset)")
            d, wls = read_json(fi.Definition, path), []
        if workloads is not None:
            wls = _read_workloads(workloads)
        bundle, notes = import_definition(d, ops, workloads=wls, solution=sol, name=name, overwrite=force)
    except InteropError as e:
        console.print(f"[red]cannot import:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    folder = bundle.folder
    files = sorted(str(p) for p in folder.iterdir() if p.is_file())   # what import wrote (not a bytecode cache)
    if as_json:
        print(json.dumps({"op": bundle.spec.name, "folder": str(folder), "files": files, "notes": notes}, indent=2))
        return
    console.print(f"wrote {esc(folder)}: {', '.join(Path(f).name for f in files)}")
    for n in notes:
        console.print(f"[yellow]note[/yellow] {esc(n)}")
