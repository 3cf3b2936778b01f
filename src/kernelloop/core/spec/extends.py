"""`extends = "<op>"` in a spec.toml: the spec is another op's spec with overrides.

The rule (docs/writing-an-op.md, "Extending another op's spec"):
- the base is found among the extending op folder's siblings (`<folder>/../<op>/spec.toml`), else among the
  built-in ops; a base may itself extend another op;
- tables merge key by key, recursively; a key the extension sets replaces the base's value;
- an array of tables whose entries all carry `name` (templates, params, inputs, outputs) merges entry by entry on
  `name`, one whose entries all carry `expr` (constraints) on `expr`: an entry with the base's key merges into the
  base's entry at its place, a new key is appended in the extension's order, and an entry with `remove = true`
  deletes the base's entry of that key;
- every other array (values, dtypes, shapes, arrays of other tables) replaces the base's array whole.
The merged data is validated as any spec; file paths in it are relative to the extending op's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

KEYS = ("name", "expr")   # the fields that identify an entry of an array of tables, in order of preference
REMOVE = "remove"


def _key_of(entries: list) -> str | None:
    """The identity key shared by every entry of an array of tables; None for other arrays."""
    if not entries or not all(isinstance(e, dict) for e in entries):
        return None
    return next((k for k in KEYS if all(k in e for e in entries)), None)


def _merge_array(base: list, over: list, where: str, fail: Callable[[str, str], Exception]) -> list:
    key = _key_of(base) if base else None
    if key is None or _key_of(over) != key:
        if any(isinstance(e, dict) and e.get(REMOVE) for e in over):
            raise fail(where, f"`{REMOVE}` only applies to entries of an array merged by {' or '.join(KEYS)}")
        return over
    out = [dict(e) for e in base]
    index = {e[key]: i for i, e in enumerate(out)}
    dropped: set[int] = set()
    for j, entry in enumerate(over):
        entry = dict(entry)
        remove = entry.pop(REMOVE, False)
        i = index.get(entry[key])
        if remove is not True and remove is not False:
            raise fail(f"{where}.{j}.{REMOVE}", "expected true or false")
        if remove:
            if i is None or i in dropped:
                raise fail(f"{where}.{j}", f"removes {key} {entry[key]!r}, which the base does not have")
            dropped.add(i)
        elif i is None:
            index[entry[key]] = len(out)
            out.append(entry)
        else:
            out[i] = merge(out[i], entry, f"{where}.{i}", fail)
    return [e for i, e in enumerate(out) if i not in dropped]


def merge(base: dict, over: dict, where: str, fail: Callable[[str, str], Exception]) -> dict:
    """`over` laid over `base` by the module's rule; neither is changed."""
    out = dict(base)
    for k, v in over.items():
        at = f"{where}.{k}" if where else k
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v, at, fail)
        elif isinstance(v, list) and isinstance(out.get(k), list):
            out[k] = _merge_array(out[k], v, at, fail)
        else:
            out[k] = v
    return out


def base_file(folder: Path, name: str) -> Path | None:
    """The spec.toml of the op `name` that an op in `folder` extends: a sibling folder's, else a built-in op's."""
    from ...base.builtin import BuiltinError, ops_dir
    sibling = folder.parent / name / "spec.toml"
    if sibling.is_file():
        return sibling
    try:
        builtin = ops_dir() / name / "spec.toml"
    except BuiltinError:
        return None
    return builtin if builtin.is_file() else None


def resolve(spec_file: Path, read: Callable[[Path], dict], fail: Callable[[Path, str, str], Exception]
            ) -> tuple[dict, tuple[Path, ...]]:
    """The spec's data with its `extends` chain merged in (without `extends`), and the chain's spec files, the
    op's own first. A base that is missing, the spec itself or a cycle is `fail(file, "extends", message)` naming
    the chain."""
    chain = [spec_file]
    layers = [read(spec_file)]
    names = [spec_file.parent.name]
    while "extends" in layers[-1]:
        name, here = layers[-1].pop("extends"), chain[-1]
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise fail(here, "extends", f"expected the name of an op folder, got {name!r}")
        shown = " -> ".join([*names, name])
        found = base_file(here.parent, name)
        if found is None:
            raise fail(here, "extends", f"no op {name!r} among the siblings of {here.parent} or the built-in ops "
                                        f"(chain: {shown})")
        if any(found.resolve() == f.resolve() for f in chain):
            raise fail(here, "extends", f"extends itself through the chain {shown}")
        chain.append(found)
        names.append(name)
        layers.append(read(found))
    data = layers[-1]
    for layer, file in zip(reversed(layers[:-1]), reversed(chain[:-1])):
        data = merge(data, layer, "", lambda field, msg, file=file: fail(file, field, msg))
    return data, tuple(chain)
