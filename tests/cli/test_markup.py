"""User text prints verbatim everywhere the commands print through rich: paths, op and model names, factory strings
(`file.py:factory:`), devices. Each command is given such text holding `[bold]`, `[report]` and `:factory:`; and a scan
of the source finds every rich `print` whose f-string puts a text-like value (a path, a name, a message) in
unescaped -- `esc`/`escape` it, or name a parameter that already holds rich text `markup`."""

import ast
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kernelloop.base.records.summary import RunSummary
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.core.archive import Archive
from kernelloop.deliver.report.summary import run_summary
from kernelloop.deliver.report.terminal import render

SRC = Path(__file__).resolve().parents[2] / "src" / "kernelloop"
ARCHIVE = Path(__file__).resolve().parents[1] / "fixtures" / "archives" / "cpu-rmsnorm-interpreter.sqlite.xz"
MARKUP = "x[bold]y[report]z:factory:"
runner = CliRunner()

# ---- the source scan ---------------------------------------------------------------------------------------------
ESCAPES = {"esc", "escape", "_plain"}
# the last name of an interpolated value that says it holds text from outside (a user, a file, an exception)
TEXT = re.compile(r"(^|_)(out|path|paths|root|dir|folder|file|files|message|msg|e|err|error|exc|reason|why|problems|"
                  r"name|label|op|model|spec|factory|text|detail|gpu|device|where|what|kind)$")


def _func(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _leaf(v: ast.AST) -> str | None:
    """The name a value is known by: `x`, `a.x`, `a['x']`, `x / 'f'`, `x or y`, `str(x)`, `', '.join(x)`."""
    if isinstance(v, ast.Name):
        return v.id
    if isinstance(v, ast.Attribute):
        return v.attr
    if isinstance(v, ast.Subscript):
        k = v.slice
        return k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else _leaf(v.value)
    if isinstance(v, ast.BinOp):
        return _leaf(v.left)
    if isinstance(v, ast.BoolOp):
        return next((name for name in map(_leaf, v.values) if name), None)
    if isinstance(v, ast.Call) and _func(v) in ("str", "repr", "join") and v.args:
        return _leaf(v.args[0])
    return None


def _texty(v: ast.AST) -> bool:
    if isinstance(v, ast.IfExp):
        return _texty(v.body) or _texty(v.orelse)
    name = _leaf(v)
    return bool(name and TEXT.search(name))


def _walk(node: ast.AST):
    """ast.walk, not into an escaping call's arguments."""
    if isinstance(node, ast.Call) and _func(node) in ESCAPES:
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _walk(child)


def unescaped(source: str) -> list[tuple[int, str]]:
    """(line, value) of each text-like value a rich `.print(...)` call interpolates unescaped in `source`."""
    found = []
    for n in ast.walk(ast.parse(source)):
        if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "print"):
            continue
        if any(k.arg == "markup" for k in n.keywords):
            continue
        for arg in n.args:
            found += [(x.lineno, ast.unparse(x.value)) for x in _walk(arg)
                      if isinstance(x, ast.FormattedValue) and _texty(x.value)]
            if isinstance(arg, ast.BinOp):   # "[red]...[/red] " + text
                found += [(arg.lineno, ast.unparse(side)) for side in (arg.left, arg.right)
                          if not isinstance(side, (ast.Constant, ast.JoinedStr, ast.BinOp)) and _texty(side)]
    return found


def test_the_scan_finds_unescaped_text_and_passes_escaped_text_and_numbers():
    bad = ('c.print(f"[red]bad:[/red] {message}")\nc.print(f"report {out / \'r.json\'}")\n'
           'c.print("[red]x:[/red] " + "; ".join(problems))\nc.print(f"on {s[\'gpu\'] or s[\'device\']}")\n')
    assert [line for line, _ in unescaped(bad)] == [1, 2, 3, 4]
    good = ('c.print(f"[red]bad:[/red] {esc(message)} {n} trials, {x.kernel_us:.2f} us {len(paths)}")\n'
            'c.print(escape(f"{name}: {e}"))\nc.print(f"{markup}")\nc.print(f"{label}", markup=False)\n'
            'print(f"{path}")\n')
    assert unescaped(good) == []


def test_no_rich_print_in_the_source_interpolates_unescaped_text():
    found = [f"{p.relative_to(SRC)}:{line}: {{{value}}}" for p in sorted(SRC.rglob("*.py"))
             for line, value in unescaped(p.read_text())]
    assert found == []


# ---- the commands ------------------------------------------------------------------------------------------------
def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("args, says", [
    (["optimize", MARKUP, "--device", "interpret"], f"unknown op: '{MARKUP}'"),
    (["capture", f"m{MARKUP}.py:make"], f"m{MARKUP}.py"),
    (["e2e", f"m{MARKUP}.py:make", f"pkg{MARKUP}"], f"package refused: pkg{MARKUP}"),
    (["accelerate", f"m{MARKUP}.py:make", "--device", "cpu", "--out", "o[report]"], f"m{MARKUP}.py"),
    (["show", f"run{MARKUP}"], f"run{MARKUP}"),
    (["report", f"run{MARKUP}"], f"run{MARKUP}"),
])
def test_a_bad_argument_with_markup_prints_verbatim(tmp_path, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, args, env={"COLUMNS": "400"})
    assert res.exit_code == common.BAD_INPUT, res.output
    assert says in _flat(res.output), res.output


def test_an_agent_workspace_path_with_markup_prints_verbatim(tmp_path):
    ws = tmp_path / f"ws{MARKUP}"
    res = runner.invoke(app, ["agent", "init", "rmsnorm", "--out", str(ws), "--device", "interpret"],
                        env={"COLUMNS": "1000"})
    assert res.exit_code == 0, res.output
    assert f"read {ws / 'README.md'}" in res.output


def test_a_run_summary_with_markup_in_its_device_names_prints_verbatim():
    with Archive(ARCHIVE, readonly=True) as a:
        s = run_summary(a)
    busy = s.throughput.devices[0].model_copy(update={"device": f"interpret{MARKUP}", "model": f"cpu{MARKUP}"})
    tp = s.throughput.model_copy(update={"devices": [busy]})
    s = s.model_copy(update={"device": f"interpret{MARKUP}", "gpu": f"[bold]{MARKUP}", "throughput": tp})
    c = Console(record=True, width=400, emoji=False)   # as the commands' console (common.console)
    render(RunSummary.model_validate(s.model_dump()), c)
    text = c.export_text()
    assert f"device=interpret{MARKUP} [bold]{MARKUP}" in text
    assert f"  interpret{MARKUP} (cpu{MARKUP}): " in text
