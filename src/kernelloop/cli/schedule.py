"""`kernelloop schedule ...`: typed Hopper GEMM schedules (show, lower, write, check, compare)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ..base.records import DType
from . import common

schedule_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                           help="Typed Hopper GEMM schedules lowered to Gluon (docs/schedules.md).")


def _load(name_or_file: str, config: str | None = None):
    from ..tune.schedule.lower import schedule_of
    from ..tune.schedule.patch import EditInvalid, base_schedule
    from ..tune.schedule.records import Schedule
    path = Path(name_or_file)
    if path.is_file():
        text = path.read_text()
        sched = schedule_of(text) if path.suffix == ".py" else Schedule.model_validate_json(text)
        if sched is None:
            raise ValueError(f"{path} embeds no SCHEDULE (not lowered from a schedule)")
    else:
        try:
            sched = base_schedule(name_or_file)
        except EditInvalid as e:
            raise ValueError(str(e)) from None
    if config:
        sched = sched.bind(_parameters(sched, config))
    return sched


def _parameters(sched, text: str) -> dict[str, int | str]:
    """--config 'NAME=VALUE,...' as the parameters `Schedule.bind` sets: integers for its numbers, text for EPILOGUE;
    ValueError naming the known parameters for any other name."""
    from ..core.spec.start import StartError, parse_assignments
    try:
        pairs = parse_assignments(text)
    except StartError as e:
        raise ValueError(str(e).replace("--start", "--config").replace("expected NAME=VALUE", "use NAME=VALUE")) \
            from None
    numbers, known = sched.config(), sched.parameters()
    out: dict[str, int | str] = {}
    for name, value in pairs.items():
        if name not in known:
            raise ValueError(f"--config {name}: not a parameter of a schedule; use {', '.join(known)}")
        if name in numbers:
            try:
                out[name] = int(value)
            except ValueError:
                raise ValueError(f"--config {name}={value}: {name} takes an integer") from None
        else:
            out[name] = value
    return out


def _fail(console, what: str, e: Exception) -> None:
    console.print(f"[red]{escape(what)}:[/red] {escape(common.error_text(e))}")
    raise typer.Exit(common.BAD_INPUT)


Name = Annotated[str, typer.Argument(help="A library schedule ('gluon_ws', 'schedule_pingpong', ...), a schedule "
                                          "JSON file, or a generated template (.py).")]
Config = Annotated[Optional[str], typer.Option(help="Template parameters binding its numbers and epilogue, e.g. "
                                                    "'BLOCK_M=64,num_stages=4,EPILOGUE=bias_gelu'.")]


@schedule_app.command("show")
def show(name: Name, config: Config = None) -> None:
    """Print the schedule as JSON."""
    console = common.console(stderr=True, emoji=False)
    try:
        print(_load(name, config).model_dump_json(indent=2))
    except ValueError as e:
        _fail(console, "bad schedule", e)


@schedule_app.command("lower")
def lower_cmd(name: Name, config: Config = None,
              out: Annotated[Optional[Path], typer.Option(help="Write the source here (default: print).")] = None
              ) -> None:
    """Lower the schedule to a Gluon template module."""
    from ..tune.schedule.lower import NotLowerable, lower
    console = common.console(stderr=True, emoji=False)
    try:
        text = lower(_load(name, config))
    except (ValueError, NotLowerable) as e:
        _fail(console, "cannot lower", e)
    if out is None:
        print(text, end="")
    else:
        out.write_text(text)
        console.print(f"wrote {escape(str(out))}")


@schedule_app.command("write")
def write(check: Annotated[bool, typer.Option("--check", help="Only say whether the files are up to date.")] = False,
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """(Re)generate ops/gemm's schedule_*.py from the library's schedules."""
    from ..base.builtin import ops_dir
    from ..tune.schedule.library import GENERATED_FILES, LIBRARY
    from ..tune.schedule.lower import lower
    console = common.console(emoji=False)
    stale = []
    for name, make in LIBRARY.items():
        path = ops_dir() / "gemm" / GENERATED_FILES[name]
        text = lower(make())
        if not path.is_file() or path.read_text() != text:
            stale.append(path.name)
            if not check:
                path.write_text(text)
    verb = "stale" if check else "written"
    if as_json:
        print(json.dumps({verb: stale, "up_to_date": not stale}))
    else:
        console.print(f"{verb}: {', '.join(stale)}" if stale else "up to date")
    raise typer.Exit(common.FAILED if check and stale else common.OK)


@schedule_app.command("check")
def check(name: Name, config: Config = None, dtype: Annotated[DType, typer.Option()] = DType.fp16,
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The static checks without a build: lowering, barrier protocol, footprint (exit 1 on a finding)."""
    from ..tune.gate.check import check_schedule
    from ..tune.schedule.resources import footprint
    console = common.console(stderr=as_json, emoji=False)
    try:
        sched = _load(name, config)
    except ValueError as e:
        _fail(console, "bad schedule", e)
    elem = dtype.itemsize
    found = check_schedule(sched, elem)
    if as_json:
        print(json.dumps({"schedule": sched.name, "findings": [f.model_dump() for f in found],
                          "footprint": footprint(sched, elem).__dict__}, indent=2))
    else:
        f = footprint(sched, elem)
        console.print(f"{escape(sched.name)}: {f.shared_bytes} bytes of shared memory, {f.threads} threads at "
                      f"{f.registers} registers, {f.ctas_per_sm} program(s) an SM")
        for g in found:
            console.print(f"  [red]{g.check}[/red] {escape(g.field)}: {escape(g.message)}")
        if not found:
            console.print("  [green]passes[/green]: lowers, its barrier protocol holds, it fits")
    raise typer.Exit(common.FAILED if found else common.OK)


@schedule_app.command("compare")
def compare_cmd(jobs: Annotated[int, typer.Option(help="Build processes.")] = 2,
                as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Build every hand-written Gluon template and the one generated from its schedule for sm_90 on this host, at the
    schedule's configuration, and compare their SASS (exit 1 on any difference)."""
    from ..base.builtin import ops_dir
    from ..base.records import Workload
    from ..tune.schedule.compare import compare, library_pairs
    from ..tune.schedule.library import LIBRARY
    from ..core.spec import load_op
    console = common.console(stderr=as_json, emoji=False)
    spec = load_op(ops_dir() / "gemm").spec
    files = {t.name: ops_dir() / "gemm" / t.file for t in spec.templates}
    w = Workload(op="gemm", axes={"M": 2048, "N": 4096, "K": 4096}, dtype="fp16")
    configs = {n: {**m().config(), "EPILOGUE": "none", "TRANS_B": 0} for n, m in LIBRARY.items()}
    found = compare(spec, files, w, library_pairs(configs), jobs=jobs)
    if as_json:
        print(json.dumps([m.model_dump(mode="json") for m in found], indent=2))
    for m in found:
        if not as_json:
            state = ("[green]identical SASS[/green]" if m.identical
                     else f"[red]differs[/red] {escape(m.first_difference)}")
            console.print(f"{escape(m.original)} vs {escape(m.generated)} {escape(str(m.config))}: {state} "
                          f"({m.instructions} instructions, registers {m.registers}, shared {m.shared_bytes}) "
                          f"{escape(m.error)}")
    raise typer.Exit(common.OK if all(m.identical for m in found) else common.FAILED)


__all__ = ["schedule_app"]
