"""The layer contract (pyproject.toml [tool.importlinter], docs/architecture.md): the floor folders base, core, tune,
deliver under cli; ordered rows inside each floor, so no import runs upward and no two packages of a floor import each
other (function-level imports counted). The contract holds on this tree and breaks on a copy given one upward import or
one cycle. Import-linter cannot see private names: `private_imports` checks that no `_name` crosses a package."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PYPROJECT = ROOT / "pyproject.toml"

pytest.importorskip("importlinter")


def lint(src: Path, config: Path = PYPROJECT) -> subprocess.CompletedProcess:
    """`lint-imports` on the `kernelloop` package found under `src` (no cache: nothing written into the tree)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--config", str(config), "--no-cache"], env=env, cwd=src,
                          capture_output=True, text=True, timeout=120)


def copy_tree(tmp_path: Path) -> Path:
    """The package's Python files, copied: a tree to break."""
    dst = tmp_path / "src"
    shutil.copytree(SRC / "kernelloop", dst / "kernelloop",
                    ignore=lambda d, names: [n for n in names if n == "__pycache__" or
                                             (not n.endswith(".py") and not (Path(d) / n).is_dir())])
    return dst


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n\ndef _breaks_the_contract():\n    {line}\n")


FLOORS = ["cli", "deliver", "tune", "core", "base"]


def test_the_contracts_name_every_package_of_their_container():
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    assert [c["containers"] for c in contracts] == [["kernelloop"], *[[f"kernelloop.{f}"] for f in FLOORS[1:]]]
    for contract in contracts:
        folder = SRC.joinpath(*contract["containers"][0].split("."))
        packages = {p.stem for p in folder.iterdir()
                    if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
        named = {n.strip() for row in contract["layers"] for n in row.replace("|", ":").split(":")}
        assert named == packages, contract["id"]
    assert contracts[0]["layers"] == FLOORS


def test_the_layer_contract_holds():
    r = lint(SRC)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """records (base) reaching up for the CLI, inside a function: the floors contract names it, and every floor
    whose packages import records now reaches the CLI through it."""
    src = copy_tree(tmp_path)
    add_line(src / "kernelloop" / "base" / "records" / "base.py", "from ...cli import common")
    r = lint(src)
    assert r.returncode == 1, r.stdout
    assert "1 kept, 4 broken" in r.stdout
    assert "kernelloop.base is not allowed to import kernelloop.cli" in r.stdout
    assert "kernelloop.base.records.base -> kernelloop.cli.common" in r.stdout


def test_a_cycle_inside_a_floor_breaks_the_contract(tmp_path):
    """reference importing spec (both core, spec imports reference): the floors hold, core's rows do not."""
    src = copy_tree(tmp_path)
    add_line(src / "kernelloop" / "core" / "reference" / "inputs.py", "from ..spec import loader")
    r = lint(src)
    assert r.returncode == 1, r.stdout
    assert "4 kept, 1 broken" in r.stdout
    assert "kernelloop.core.reference is not allowed to import kernelloop.core.spec" in r.stdout


def module_cycles() -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (Tarjan over grimp's graph, function-
    level imports counted)."""
    import grimp
    graph = grimp.build_graph("kernelloop", cache_dir=None)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_no_module_imports_itself_through_others(monkeypatch):
    """Finer than the contract: no two modules, even of one package, import each other."""
    monkeypatch.syspath_prepend(str(SRC))
    assert module_cycles() == []


def private_imports(src: Path) -> list[str]:
    """`from kernelloop.X... import _name` (or a `_module`, or `module._name` of such an import) where X is not the
    importer's own package (kernelloop.<floor>.<package>, or cli)."""
    out = []
    for path in sorted((src / "kernelloop").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        package = parts if parts[-1] == "__init__" else parts[:-1]
        package = [p for p in package if p != "__init__"]
        depth = 3 if len(parts) > 1 and parts[1] in FLOORS[1:] else 2   # kernelloop.<floor>.<package>, or cli
        own = parts[1:depth] if len(parts) > depth or (len(parts) == depth and parts[-1] != "__init__") else []
        modules: dict[str, list[str]] = {}
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = base + (node.module.split(".") if node.module else [])
            if mod[:1] != ["kernelloop"] or len(mod) < depth or mod[1:depth] == own:
                continue
            for alias in node.names:
                names = mod[1:] + [alias.name]
                if any(n.startswith("_") and not n.startswith("__") for n in names):
                    out.append(f"{path.relative_to(src)}:{node.lineno}: {'.'.join(mod)}.{alias.name}")
                modules[alias.asname or alias.name] = mod + [alias.name]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                out.append(f"{path.relative_to(src)}:{node.lineno}: {'.'.join(modules[node.value.id])}.{node.attr}")
    return out


def test_no_private_name_crosses_a_top_level_package():
    assert private_imports(SRC) == []


def test_a_private_name_from_another_package_is_found(tmp_path):
    src = tmp_path / "src"
    (src / "kernelloop" / "deliver" / "fuse").mkdir(parents=True)
    (src / "kernelloop" / "deliver" / "integrate").mkdir(parents=True)
    (src / "kernelloop" / "deliver" / "fuse" / "compose.py").write_text(
        "from ..integrate.apply import _caller, caller\nfrom ..integrate import apply\n"
        "from . import _own\nx = apply._hidden\n")
    (src / "kernelloop" / "deliver" / "integrate" / "apply.py").write_text("from ._helpers import _x\n")
    assert private_imports(src) == ["kernelloop/deliver/fuse/compose.py:1: kernelloop.deliver.integrate.apply._caller",
                                    "kernelloop/deliver/fuse/compose.py:4: kernelloop.deliver.integrate.apply._hidden"]
