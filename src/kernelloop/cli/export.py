"""`kernelloop export RUN [RUN ...] --out DIR`: package runs' PASSED winners behind a verified dispatcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ..core.archive import ArchiveError
from ..deliver.package.build import ExportError
from ..deliver.package.guards import describe
from ..deliver.package.signing import SigningError
from . import common
from .common import esc


def export(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (one per op).")],
    out: Annotated[Path, typer.Option(help="Package folder to write (new or empty).")],
    name: Annotated[str, typer.Option(help="Package name.")] = "kernelloop-package",
    version: Annotated[str, typer.Option(help="Package version.")] = "0.1.0",
    ops: Annotated[Optional[Path], typer.Option(
        help="Folder of the runs' op folders (checked against the runs' manifests); default: ./ops/<op> when there, "
             "else the built-in op.")] = None,
    extend: Annotated[Optional[list[str]], typer.Option(
        help="Widen the guards along an axis to LO:HI: 'M=1:4096' for every op with an axis M, 'gemm_nt.M=1:512' "
             "for one op; repeat it for more axes (one range per axis of an op: 'M=1:4096' plus 'N=64:8192'). "
             "Every guard is verified along each widened axis at its edges and tile boundaries, at its corners and "
             "on seeded interior points before it is kept.")] = None,
    exact: Annotated[bool, typer.Option("--exact", help="Exact guards at the measured shapes only (no ranges, no "
                                                        "export-time verification).")] = False,
    interior: Annotated[int, typer.Option(min=0, help="Seeded interior points verified per range.")] = 3,
    keep_slower: Annotated[bool, typer.Option("--keep-slower", help="On a GPU, also package winners whose "
                                                                    "measurement was SLOWER than eager PyTorch "
                                                                    "(left out by default: eager serves them).")
                           ] = False,
    against: Annotated[Optional[list[str]], typer.Option(
        help="On a GPU, also leave out winners whose confirmation was SLOWER than this baseline, or that were never "
             "confirmed against it (repeatable; applies to the ops that have it, e.g. sdpa-cudnn, cublas, liger).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the interior points.")] = 0,
    sanitize: Annotated[bool, typer.Option(
        "--sanitize/--no-sanitize", help="Run compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over "
                                         "each winner's kernel on a small shape: findings leave it out, the report "
                                         "in audit/<op>.json; without the tool or CUDA the audit says why it did "
                                         "not run.")] = True,
    allow_unauthenticated: Annotated[bool, typer.Option(
        "--allow-unauthenticated", help="Export a run whose archive rows carry no MACs (written before them or "
                                        "without a key) or whose run key is not here; the manifest records it. A "
                                        "run whose rows were edited is refused whatever this says.")] = False,
    sign: Annotated[bool, typer.Option("--sign/--no-sign", help="Sign the package with your key (`kernelloop "
                                                               "keys`; generated on first use).")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest and tables as JSON.")] = False,
) -> None:
    """Write a self-contained package: kernels, dispatch tables with proved guards, hashes, the audit trail."""
    from ..deliver.package.export import ExportOptions, export_package
    console = common.console(stderr=as_json)
    opts = ExportOptions(out=out, name=name, version=version, ops_root=ops, extend=list(extend or []), ranges=not exact,
                         interior=interior, seed=seed, keep_slower=keep_slower,
                         against=list(against or []), sanitize=sanitize,
                         allow_unauthenticated=allow_unauthenticated, sign=sign)
    try:
        result = export_package(runs, opts, on_note=lambda t: console.print(f"[dim]{esc(t)}[/dim]"))
    except ExportError as e:
        console.print(f"[red]cannot export:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    except ArchiveError as e:
        console.print(f"[red]cannot read the archive:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    except SigningError as e:
        console.print(f"[red]cannot sign:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    except RuntimeError as e:   # the verification worker could not start
        console.print(f"[red]export stopped:[/red] {esc(e)}")
        raise typer.Exit(common.STOPPED)
    if as_json:
        print(json.dumps({"path": str(result.path), "manifest": result.manifest.model_dump(mode="json"),
                          "tables": {op: b.table.model_dump(mode="json") for op, b in result.builds.items()},
                          "export_checks": {op: [n.__dict__ for n in b.notes] for op, b in result.builds.items()}},
                         indent=1))
        return
    for op, b in result.builds.items():
        t = Table(title=f"{op}: {len(b.table.entries)} entries", show_lines=False)
        for col in ("entry", "guard", "template", "timed", "verified only"):
            t.add_column(col)
        for e in b.table.entries:
            timed = len(e.timed)
            t.add_row(e.id, describe(e.guard, b.table.axes), e.template, str(timed), str(len(e.shapes) - timed))
        console.print(t)
        for why in b.left_out:
            console.print(f"[yellow]left out:[/yellow] {esc(why)}")
        failed = [n for n in b.notes if n.status != "PASSED"]
        for n in failed:
            console.print(f"[yellow]range {esc(n.entry_range)} shrank to exact guards:[/yellow] {esc(n.status)} at "
                          f"{esc(n.axes)}: {esc(n.message)}")
    console.print(f"package: {esc(result.path)}")
