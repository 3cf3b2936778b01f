"""Versioned prompt templates: `prompts/<version>/*.md` (package data, `kernelloop.base.builtin`), hashed as one set.

Each file is a `string.Template` (`$name` / `${name}` placeholders; `$$` is a literal dollar). The set's hash
(sha256 over every file name and content, sorted) identifies the prompts a trial was proposed with; it goes
into the candidate's `proposer` field and every archived LLM call. A missing placeholder value is an error,
not an empty string.

The folder is `$KERNELLOOP_PROMPTS` when set, else the built-in prompts shipped in the package.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path

from ....base.records import sha256_hex

ROLES = ("system", "planner", "coder", "debugger", "repair")
DEFAULT_VERSION = "v1"


def prompts_root() -> Path:
    """Where prompt sets live."""
    env = os.environ.get("KERNELLOOP_PROMPTS")
    if env:
        return Path(env)
    from ....base.builtin import prompts_dir
    return prompts_dir()


@dataclass(frozen=True)
class PromptSet:
    """One version of the templates."""

    version: str
    folder: Path
    templates: dict[str, str]

    @property
    def hash(self) -> str:
        """sha256 over (name, content) of every template, sorted by name."""
        return sha256_hex("".join(f"{n}\0{sha256_hex(t)}\0" for n, t in sorted(self.templates.items())))

    @property
    def tag(self) -> str:
        """'v1@<first 12 hex of the hash>': short form stored in candidates."""
        return f"{self.version}@{self.hash[:12]}"

    def render(self, name: str, **values: object) -> str:
        """The template `name` with every placeholder filled; KeyError names a missing one."""
        try:
            text = self.templates[name]
        except KeyError:
            raise KeyError(f"prompt set {self.version} has no template {name!r}") from None
        try:
            return string.Template(text).substitute({k: str(v) for k, v in values.items()})
        except KeyError as e:
            raise KeyError(f"template {self.version}/{name}.md needs a value for {e.args[0]!r}") from None


def load_prompts(version: str = DEFAULT_VERSION, root: str | Path | None = None) -> PromptSet:
    """Read `<root>/<version>/*.md`; every role template must exist."""
    folder = Path(root or prompts_root()) / version
    if not folder.is_dir():
        raise FileNotFoundError(f"no prompt set at {folder}")
    templates = {p.stem: p.read_text() for p in sorted(folder.glob("*.md"))}
    missing = [r for r in ROLES if r not in templates]
    if missing:
        raise FileNotFoundError(f"prompt set {folder} lacks {', '.join(m + '.md' for m in missing)}")
    return PromptSet(version=version, folder=folder, templates=templates)


__all__ = ["DEFAULT_VERSION", "PromptSet", "ROLES", "load_prompts", "prompts_root"]
