"""The knowledge base: versioned TOML files of typed entries, validated on load.

Two kinds of entries, kept apart:
- **facts**: checkable statements about a device ("H200: 228 KB shared memory per SM"), each with the check
  that confirms it: a device property (`kernelloop.core.device.device_properties` names) or a measured ceiling
  (`Ceilings` field) compared with a value. `check_fact` runs the check against a real device's numbers.
- **experience**: conditional heuristics ("bandwidth-bound with low DRAM % -> more bytes in flight"), each with
  its condition (an expression over evidence names), the configuration moves it suggests, what it expects to
  move (hypotheses), the evidence that supports it, the facts it relies on, and a confidence.

Proposers and reports cite entries by id (`F-...` for facts, `E-...` for experience). Every file states
`schema` (the entry format, checked) and `version` (the content's version, recorded in citations).

Default location: `$KERNELLOOP_KNOWLEDGE`, else the built-in knowledge base shipped in the package
(`kernelloop.base.builtin`).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ...base.records import Direction, Hypothesis, check_expression
from ...base.records.device import DeviceProperties
from ...base.records.spec import FORMULA_FUNCS
from ..profile.metrics import BY_KEY
from ...base import pyast

SCHEMA_VERSION = 1

# Names a condition or an expectation may use besides the canonical metric keys: the class, roofline and
# build-resource numbers, the kernel time, and the workload's element size in bytes.
DERIVED_NAMES: frozenset[str] = frozenset({
    "bottleneck", "latency_us", "roofline_fraction", "arithmetic_intensity", "dram_ratio", "achieved_gbps",
    "registers", "spills", "shared_bytes", "stack_bytes", "local_loads", "local_stores", "ldg128_fraction",
    "stg128_fraction", "instructions", "tensor_instructions", "elem",
})
EVIDENCE_NAMES: frozenset[str] = frozenset(BY_KEY) | DERIVED_NAMES


class KnowledgeError(ValueError):
    """A malformed knowledge file or entry; the message names the file and the entry."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AppliesTo(_Model):
    """Which devices an entry is about; every given field must match."""

    gpu: str | None = Field(None, description="Case-insensitive substring of the device name, e.g. 'H200'.")
    capability: list[int] | None = Field(None, description="Compute capability [major, minor].")


class FactCheck(_Model):
    """How to confirm a fact on a device."""

    source: Literal["device", "ceilings"] = Field("device", description="Device properties or measured ceilings.")
    property: str = Field(min_length=1, description="Property name, e.g. 'shared_per_sm' or 'copy_gbps'.")
    compare: Literal["eq", "ge", "le", "approx"] = Field("eq", description="How the value is compared.")
    value: float | int | str | bool | list[int] = Field(description="The stated value.")
    rel_tol: float = Field(0.05, ge=0, description="Relative tolerance of 'approx'.")


class Fact(_Model):
    """A checkable statement."""

    id: str = Field(pattern=r"^F-[A-Z0-9][A-Z0-9-]*$", description="Stable id, cited by proposers and reports.")
    statement: str = Field(min_length=1, description="The fact in words.")
    applies_to: AppliesTo = Field(default_factory=AppliesTo, description="Devices it is about.")
    check: FactCheck = Field(description="The check that confirms it.")
    source: str = Field(min_length=1, description="Where it comes from (document, measurement).")


class Move(_Model):
    """One parameter change an experience entry suggests."""

    param: str = Field(min_length=1, description="Template parameter.")
    step: Literal["up", "down", "max", "min", "other", "any"] = Field(
        description="up/down: a larger/smaller value; max/min: the largest/smallest value of the pruned space "
                    "(when the parent does not have it already); other: any different value; any: may change or "
                    "stay.")


class Expectation(_Model):
    """What the moves are expected to do to one metric (becomes a Hypothesis)."""

    metric: str = Field(description="Canonical metric key or a derived name such as 'latency_us'.")
    direction: Direction
    magnitude: float | None = Field(None, description="Signed relative change, e.g. -0.1.")

    def hypothesis(self, note: str = "") -> Hypothesis:
        return Hypothesis(metric=self.metric, direction=self.direction, magnitude=self.magnitude, note=note)


class Experience(_Model):
    """A conditional heuristic with its evidence."""

    id: str = Field(pattern=r"^E-[A-Z0-9][A-Z0-9-]*$", description="Stable id.")
    statement: str = Field(min_length=1, description="The heuristic in words.")
    when: str = Field(min_length=1, description="Condition: expression over evidence, config and axis names.")
    requires: list[str] = Field(default_factory=list,
                                description="Config parameters / workload axes the condition or moves need.")
    moves: list[Move] = Field(default_factory=list, description="Suggested changes; empty = advice only.")
    edit: list[dict[str, Any]] = Field(default_factory=list, description=(
        "A JSON Patch (RFC 6902) of the parent's typed schedule (kernelloop.tune.schedule), for parents lowered from "
        "one; checked by the static gate before it is proposed."))
    expect: list[Expectation] = Field(default_factory=list, description="Expected metric moves.")
    evidence: list[str] = Field(min_length=1, description="What supports it: measurements, documents.")
    cites: list[str] = Field(default_factory=list, description="Fact/experience ids it relies on.")
    applies_to: AppliesTo = Field(default_factory=AppliesTo, description="Devices it was established on.")
    confidence: Literal["low", "medium", "high"] = Field(description="How far the evidence carries.")
    priority: int = Field(0, description="Higher fires first when several apply.")
    prefer: str | None = Field(None, description="Optional expression over the moved-to configuration's parameters, "
                                                 "the workload's axes and 'elem': among the configurations the moves "
                                                 "reach, lower values are proposed first (then the nearest).")

    @field_validator("when")
    @classmethod
    def _parse(cls, v: str) -> str:
        check_expression(v)
        return v

    @model_validator(mode="after")
    def _names(self) -> "Experience":
        import ast
        names = {n.id for n in ast.walk(pyast.parse(self.when, mode="eval")) if isinstance(n, ast.Name)}
        unknown = names - EVIDENCE_NAMES - set(self.requires) - set(FORMULA_FUNCS)
        if unknown:
            raise ValueError(f"condition uses unknown name(s) {sorted(unknown)}; declare config parameters and "
                             f"axes in 'requires'")
        for m in self.moves:
            if m.param not in self.requires:
                raise ValueError(f"move of {m.param!r}: list it in 'requires'")
        if any(not {"op", "path"} <= set(op) for op in self.edit):
            raise ValueError("every 'edit' operation needs 'op' and 'path' (RFC 6902)")
        if self.moves and not any(m.step != "any" for m in self.moves):
            raise ValueError("moves must change at least one parameter (up, down, max, min or other)")
        if self.prefer is not None:
            check_expression(self.prefer)
            names = {n.id for n in ast.walk(pyast.parse(self.prefer, mode="eval")) if isinstance(n, ast.Name)}
            unknown = names - set(self.requires) - set(FORMULA_FUNCS) - {"elem"}
            if unknown:
                raise ValueError(f"'prefer' uses name(s) {sorted(unknown)} that are not in 'requires' (config "
                                 f"parameters and axes) or 'elem'")
        bad = [e.metric for e in self.expect if e.metric not in EVIDENCE_NAMES]
        if bad:
            raise ValueError(f"expectations name unknown metric(s) {bad}")
        for e in self.expect:
            e.hypothesis()  # direction/magnitude consistency
        return self


class KnowledgeFile(_Model):
    """One TOML file."""

    schema_: int = Field(alias="schema", description="Entry format version; must equal SCHEMA_VERSION.")
    version: str = Field(min_length=1, description="Content version, e.g. '2026.12.1'.")
    description: str = Field("", description="What the file covers.")
    fact: list[Fact] = Field(default_factory=list)
    experience: list[Experience] = Field(default_factory=list)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: int) -> int:
        if v != SCHEMA_VERSION:
            raise ValueError(f"schema {v} is not supported (this code reads schema {SCHEMA_VERSION})")
        return v


@dataclass(frozen=True)
class FactStatus:
    """The result of checking one fact against a device."""

    id: str
    status: Literal["holds", "violated", "not-applicable", "unknown"]
    observed: object = None
    note: str = ""


@dataclass
class KnowledgeBase:
    """All entries by id, with the file and version each came from."""

    facts: dict[str, Fact] = field(default_factory=dict)
    experience: dict[str, Experience] = field(default_factory=dict)
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (file, version)

    def __contains__(self, entry_id: str) -> bool:
        return entry_id in self.facts or entry_id in self.experience

    def get(self, entry_id: str) -> Fact | Experience:
        """The entry with this id; KeyError if none."""
        if entry_id in self.facts:
            return self.facts[entry_id]
        if entry_id in self.experience:
            return self.experience[entry_id]
        raise KeyError(f"no knowledge entry {entry_id!r}")

    def citation(self, entry_id: str) -> str:
        """'ID (file@version)': how reports cite an entry."""
        file, version = self.origin[entry_id]
        return f"{entry_id} ({file}@{version})"

    def check_citations(self, ids: list[str]) -> list[str]:
        """The ids that name no entry."""
        return [i for i in ids if i not in self]


def applies(a: AppliesTo, properties: DeviceProperties) -> bool:
    """Whether a device (its properties) is one an entry is about."""
    if a.gpu is not None and a.gpu.lower() not in properties.name.lower():
        return False
    if a.capability is not None and list(properties.capability) != list(a.capability):
        return False
    return True


def check_fact(fact: Fact, properties: DeviceProperties, ceilings: dict | None = None) -> FactStatus:
    """Confirm or refute a fact on a device: `properties` from device_properties() (a fact names one by its field
    name, compared on its JSON value), `ceilings` a Ceilings dump."""
    if properties.virtual:
        return FactStatus(fact.id, "unknown", note="virtual device (interpreter): nothing to check against")
    if not applies(fact.applies_to, properties):
        return FactStatus(fact.id, "not-applicable", note=f"device {properties.name!r}")
    c = fact.check
    table = properties.model_dump(mode="json") if c.source == "device" else (ceilings or {})
    if c.property not in table:
        return FactStatus(fact.id, "unknown", note=f"{c.source} has no {c.property!r}")
    got = table[c.property]
    want = c.value
    if c.compare == "eq":
        ok = (list(got) == list(want)) if isinstance(want, list) else got == want
    elif not isinstance(got, (int, float)) or not isinstance(want, (int, float)):
        return FactStatus(fact.id, "unknown", got, f"{c.compare} needs numbers")
    elif c.compare == "ge":
        ok = got >= want
    elif c.compare == "le":
        ok = got <= want
    else:
        ok = math.isclose(got, want, rel_tol=c.rel_tol)
    return FactStatus(fact.id, "holds" if ok else "violated", got,
                      f"{c.property} = {got!r}, stated {c.compare} {want!r}")


def default_dir() -> Path:
    """$KERNELLOOP_KNOWLEDGE, else the built-in knowledge base."""
    env = os.environ.get("KERNELLOOP_KNOWLEDGE")
    if env:
        return Path(env)
    from ...base.builtin import knowledge_dir
    return knowledge_dir()


def _error_path(err: ValidationError, data: dict) -> str:
    e = err.errors()[0]
    loc = list(e["loc"])
    where = ".".join(str(x) for x in loc)
    if len(loc) >= 2 and loc[0] in ("fact", "experience") and isinstance(loc[1], int):
        try:
            entry_id = data[loc[0]][loc[1]].get("id")
            if entry_id:
                where = ": ".join([entry_id, *([".".join(str(x) for x in loc[2:])] if loc[2:] else [])])
        except (KeyError, IndexError, AttributeError):
            pass
    return f"{where}: {e['msg'].removeprefix('Value error, ')}"


def load_file(path: str | Path) -> KnowledgeFile:
    """One knowledge file, validated; KnowledgeError names the file and the entry."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise KnowledgeError(f"{p}: {e}") from e
    try:
        return KnowledgeFile.model_validate(data)
    except ValidationError as e:
        raise KnowledgeError(f"{p}: {_error_path(e, data)}") from e


def load_knowledge(paths: list[str | Path] | str | Path | None = None) -> KnowledgeBase:
    """Load and cross-validate knowledge files (a folder = its *.toml, sorted); ids unique, citations resolved."""
    if paths is None:
        paths = [default_dir()]
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.toml"))
        elif p.is_file():
            files.append(p)
        else:
            raise KnowledgeError(f"{p}: no such knowledge file or folder")
    kb = KnowledgeBase()
    for f in files:
        kf = load_file(f)
        for entry in [*kf.fact, *kf.experience]:
            if entry.id in kb:
                first = kb.origin[entry.id][0]
                raise KnowledgeError(f"{f}: {entry.id}: duplicate id (first defined in {first})")
            (kb.facts if isinstance(entry, Fact) else kb.experience)[entry.id] = entry
            kb.origin[entry.id] = (f.name, kf.version)
    for e in kb.experience.values():
        missing = kb.check_citations(e.cites)
        if missing:
            noun = "entry" if len(missing) == 1 else "entries"
            raise KnowledgeError(f"{kb.origin[e.id][0]}: {e.id}: cites unknown {noun} {missing}")
    return kb


__all__ = ["AppliesTo", "DERIVED_NAMES", "EVIDENCE_NAMES", "Expectation", "Experience", "Fact", "FactCheck",
           "FactStatus", "KnowledgeBase", "KnowledgeError", "KnowledgeFile", "Move", "SCHEMA_VERSION", "applies",
           "check_fact", "default_dir", "load_file", "load_knowledge"]
