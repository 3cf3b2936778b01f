"""Shared CLI helpers: exit codes, op resolution (budgets: kernelloop.deliver.api.parse_budget)."""

from __future__ import annotations

import difflib
import os
from enum import IntEnum
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape


class ExitCode(IntEnum):
    """The commands' exit codes, one scheme for every command (the table in docs/architecture.md, "Exit codes")."""

    OK = 0              # the command did what was asked (captured, delivered, kept, done)
    FAILED = 1          # it ran to the end and the answer is no: no passing candidate, not delivered, not kept
    BAD_INPUT = 2       # refused before any work: arguments, spec, workloads, model factory or package (named)
    STOPPED = 3         # it could not go on: the model raised on its inputs, files not written, archive error
    INTERRUPTED = 130   # Ctrl-C; the archive is consistent and `--resume` continues


OK, FAILED, BAD_INPUT, STOPPED, INTERRUPTED = (ExitCode.OK, ExitCode.FAILED, ExitCode.BAD_INPUT, ExitCode.STOPPED,
                                               ExitCode.INTERRUPTED)

SPEC_HELP = "Op folder, its spec.toml, or an op name (./ops/NAME, else a built-in op: see `kernelloop ops`)."


GATE_HELP = ("The static gate before the GPU: on (rejects a broken schedule or an over-budget sm_90 build, naming "
             "the field), audit (records its decisions and rejects nothing, so its precision can be measured) or "
             "off. Default: on for a new run, the run's archived mode on --resume. `kernelloop gate precision RUN` "
             "reads its decisions back.")
WIDE = 200  # columns of output that is not a terminal (a pipe, a file, a capture) when $COLUMNS does not say


def console(*, stderr: bool = False, **options) -> Console:
    """The commands' rich Console: a terminal's own width; piped or redirected output at $COLUMNS, else WIDE
    columns, so tables are not squeezed into 80 (`--json` is the format for programs). Emoji codes are off: text
    such as `module:factory:` prints as written; interpolate user and exception text through `esc`."""
    options.setdefault("emoji", False)
    c = Console(stderr=stderr, **options)
    if not c.is_terminal and "COLUMNS" not in os.environ:
        c = Console(stderr=stderr, width=WIDE, **options)
    return c


def esc(value: object) -> str:
    """`value` as text that rich prints verbatim (its `[...]` parts are not taken for markup)."""
    return escape(str(value))


def resolve_op(spec: str) -> Path:
    """An op folder, a spec.toml, an op name under ./ops, or a built-in op's name (`kernelloop.base.builtin`)."""
    from ..base.builtin import resolve_op as _resolve
    return _resolve(spec)  # a name that is none of these: load_op reports 'file not found' naming it


def resolve_path(path: Path | None) -> Path | None:
    """A file argument (e.g. --workloads): as given, or `ops/<name>/FILE` of a built-in op when that path does not
    exist here."""
    from ..base.builtin import resolve_path as _resolve
    return None if path is None else _resolve(path)


def archive_path(run: Path, console) -> Path:
    """The archive of a run folder, of an agent workspace (its run on the workspace's device) or the file itself;
    exits with BAD_INPUT, saying so, when there is none."""
    path = run / "archive.sqlite" if run.is_dir() else run
    if run.is_dir() and not path.is_file():
        from ..deliver.agent.workspace import MANIFEST, Workspace, WorkspaceError
        try:
            if (run / MANIFEST).is_file():
                path = Workspace.load(run).run_dir() / "archive.sqlite"
        except WorkspaceError as e:
            console.print(f"[red]{esc(e)}[/red]")
            raise typer.Exit(BAD_INPUT)
    if not path.is_file():
        console.print(f"[red]no archive at {esc(path)}[/red]")
        raise typer.Exit(BAD_INPUT)
    return path


def fixed_parameters(text: str | None, bundle, templates: list[str] | None) -> dict[str, str] | None:
    """The parsed --fix of `optimize` and `record` (NAME: value text): `kernelloop.deliver.api.check_fixed` with the flag's
    name in its messages, as a BadParameter."""
    from ..deliver import api
    try:
        return api.check_fixed(text, bundle, templates, flag="--fix")
    except api.UsageError as e:
        raise typer.BadParameter(str(e)) from None


def error_text(e: Exception) -> str:
    """An exception as one line for a message: a pydantic ValidationError as its model, first field, the value
    given (when short) and the reason (and how many more), not pydantic's multi-line report with its links;
    anything else as its text."""
    from pydantic import ValidationError
    if not isinstance(e, ValidationError):
        return str(e)
    errors = e.errors()
    first = errors[0]
    field = ".".join(str(p) for p in first["loc"])
    reason = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]   # not "Value error, "
    value = first.get("input")
    given = f"{value!r}: " if (isinstance(value, (str, int, float)) and len(repr(value)) <= 60
                               and first["type"] != "value_error") else ""   # a validator's message names it
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{e.title}: {field + ': ' if field else ''}{given}{reason}{more}"


def bad_argument(console, msg: str) -> NoReturn:
    """Say that an argument is bad (the message names it; printed verbatim) and exit with BAD_INPUT."""
    console.print(f"[red]bad argument:[/red] {esc(msg)}")
    raise typer.Exit(BAD_INPUT)


def spec_error(console, e, spec: str) -> NoReturn:
    """Say that the op or a workload file is bad (a SpecError) and exit with BAD_INPUT; when SPEC itself is not
    found: a bare name is an unknown op, said with the close names (`unknown_op`); a path points at the list of
    built-in ops."""
    if e.message == "file not found" and e.file == str(spec):
        if len(Path(spec).parts) == 1 and not Path(spec).suffix:   # a bare name: no op has it
            console.print(f"[red]unknown op:[/red] {esc(unknown_op(str(spec)))}")
            raise typer.Exit(BAD_INPUT)
        console.print(f"[red]spec error:[/red] {esc(e)} (`kernelloop ops` lists the built-in ops)")
        raise typer.Exit(BAD_INPUT)
    console.print(f"[red]spec error:[/red] {esc(e)}")
    raise typer.Exit(BAD_INPUT)


def unknown_op(spec: str) -> str:
    """Why SPEC names no op, with the close names among the built-in ops and the folders under ./ops."""
    from ..base.builtin import builtin_ops
    local = sorted(p.name for p in Path("ops").glob("*") if (p / "spec.toml").is_file()) if Path("ops").is_dir() \
        else []
    names = sorted(set(builtin_ops()) | set(local))
    close = difflib.get_close_matches(Path(spec).name, names, n=5, cutoff=0.5)
    where = f"{spec!r} is no folder ./ops/{spec} and no built-in op"
    near = f"; close names: {', '.join(close)}" if close else ""
    return f"{where}{near} (`kernelloop ops` lists the built-in ops)"


def require_templates(bundle, templates: list[str] | None, console) -> None:
    """Exit with BAD_INPUT, naming the spec's templates, when a --template is not one of them."""
    names = [t.name for t in bundle.spec.templates]
    for t in templates or ():
        if t not in names:
            bad_argument(console, f"--template {t!r}: {bundle.spec.name} has {', '.join(names)}")
