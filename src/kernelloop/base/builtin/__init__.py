"""What ships inside the package: the built-in ops, the knowledge base and the LLM's prompt sets.

    ops/<op>/      one folder per operator (spec.toml, reference.py, templates, workloads, baselines.py)
    knowledge/     the knowledge base the rule planner matches against (*.toml)
    prompts/<v>/   the LLM proposer's prompt templates, one folder per version

They are package data, found through importlib.resources, so a non-editable install carries them and every
command works from any directory. They must be real folders on disk (workers import an op's files by path), which
every installed wheel and editable install is; a zipped install is refused with a message.

Naming an op (`resolve_op`, what every command taking SPEC uses):
1. a path that exists (an op folder or its spec.toml) is used as given — user ops live in any folder;
2. a bare name with a folder `./ops/<name>` in the working directory is that folder (a project keeping its ops
   beside its runs);
3. a bare name of a built-in op is the built-in op;
4. a path `ops/<name>[/file]` that does not exist relative to the working directory is the built-in op's
   `<name>[/file]` (the path older commands and recorded results use).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["BuiltinError", "builtin_ops", "knowledge_dir", "op_folder", "ops_dir", "prompts_dir", "resolve_op",
           "resolve_path"]


class BuiltinError(RuntimeError):
    """The package data is not a folder on disk (a zipped install)."""


def _folder(name: str) -> Path:
    res = files(__name__) / name
    if not isinstance(res, Path) or not res.is_dir():
        raise BuiltinError(f"kernelloop's built-in {name}/ is not a folder on disk ({res!r}); install kernelloop "
                           f"unzipped (pip install does)")
    return res


def ops_dir() -> Path:
    """The folder of the built-in ops."""
    return _folder("ops")


def knowledge_dir() -> Path:
    """The folder of the built-in knowledge base."""
    return _folder("knowledge")


def prompts_dir() -> Path:
    """The folder of the built-in prompt sets (one subfolder per version)."""
    return _folder("prompts")


def builtin_ops() -> list[str]:
    """The names of the built-in ops (folders with a spec.toml), sorted."""
    return sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())


def resolve_path(text: str | Path) -> Path:
    """A path as given when it exists; else `ops/<name>[/rest]` is the built-in op's file; else the path as given
    (whose loader then reports it missing, naming it)."""
    p = Path(text)
    if p.exists() or p.is_absolute():
        return p
    parts = p.parts
    if len(parts) >= 2 and parts[0] == "ops" and (ops_dir() / parts[1] / "spec.toml").is_file():
        return ops_dir().joinpath(*parts[1:])
    return p


def resolve_op(spec: str | Path) -> Path:
    """An op folder or spec.toml (any path), a name under ./ops, or a built-in op's name (rules in the module
    docstring). A name that is none of these comes back as a path, so that `load_op` reports it missing."""
    p = Path(spec)
    if p.exists():
        return p
    if len(p.parts) == 1 and not p.is_absolute():
        if (Path("ops") / p).is_dir():
            return Path("ops") / p
        if (ops_dir() / p / "spec.toml").is_file():
            return ops_dir() / p
    return resolve_path(p)


def op_folder(name: str, ops_root: str | Path | None = None) -> Path:
    """The folder of the op a run names: `ops_root/<name>` when a root is given, else as `resolve_op(name)`."""
    if ops_root is not None:
        return Path(ops_root) / name
    return resolve_op(name)
