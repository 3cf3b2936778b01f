"""The proposal schema: what an LLM or an outside agent submits, validated locally before anything runs.

A `KernelProposal` carries kernel code (a full source, or a unified diff against a parent's source), a
configuration (one config, or a small space of values per parameter), the parents it derives from, a
rationale and a falsifiable hypothesis: which metrics move which way, and the expected latency change.

Nothing a provider promises is trusted (a JSON-schema-constrained response can still be wrong): every
proposal goes through `parse_proposal` (JSON text -> schema) and `materialize` (patch applied, source parsed,
`launch` signature checked against the op, configurations expanded, citations checked). Both raise
`ProposalInvalid` with a message meant to be sent back to the proposer verbatim.

    proposal = parse_proposal(reply_text)
    candidates = materialize(proposal, spec, parents={cid: candidate}, op=..., proposer="llm:...")

The schema's JSON Schema (`proposal_json_schema()`) is what prompts, `kernelloop agent init` and the MCP
server hand out. (The name `KernelProposal` keeps it apart from `propose.base.Proposal`, the rule planner's
configuration-only proposal.)
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..profile.hypothesis import LATENCY, format_hypotheses
from ...base.records import Candidate, Direction, Hypothesis, OpSpec
from ...base.records.llm import LatencyHypothesis
from ..schedule.patch import ScheduleEdit
from ...base import pyast

Scalar = int | float | str | bool
MAX_CONFIGS = 16
"""Most configurations one proposal may expand to."""
MAX_SOURCE_CHARS = 100_000


class ProposalInvalid(ValueError):
    """A proposal failed local validation; the message says what to fix."""


class ScheduleRefused(ProposalInvalid):
    """A schedule edit that cannot become a candidate: the patch, the schedule record, the lowering or the static
    gate refused it (`check`), at `field`."""

    def __init__(self, message: str, field: str, check: str):
        super().__init__(message)
        self.field = field
        self.check = check


class ProposalHypothesis(LatencyHypothesis):
    """A falsifiable expectation: metric moves, and the kernel-latency change relative to the first parent
    (without a parent: relative to the eager PyTorch baseline)."""

    def all(self) -> list[Hypothesis]:
        """The metric expectations plus the latency one (added when the metrics do not name latency)."""
        out = list(self.metrics)
        if not any(h.metric == LATENCY for h in out):
            pct = self.latency_change_pct
            direction = Direction.SAME if pct == 0 else (Direction.DOWN if pct < 0 else Direction.UP)
            out.append(Hypothesis(metric=LATENCY, direction=direction,
                                  magnitude=None if pct == 0 else pct / 100.0))
        return out

    def text(self) -> str:
        """The text form `Candidate.hypothesis` holds (see kernelloop.tune.profile.hypothesis)."""
        return format_hypotheses(self.all())


class KernelProposal(BaseModel):
    """One proposal: code (full source or a patch), configuration(s), lineage, rationale and hypothesis."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    language: Literal["triton"] = Field("triton", description="Kernel language.")
    source: str | None = Field(None, max_length=MAX_SOURCE_CHARS, description=(
        "Full Python module defining `launch(<inputs>, <outputs>, *, <scalars>, **config)` (plus the keyword "
        "`scratch` when the op declares a workspace) and its Triton kernels. Exactly one of `source` and `patch`."))
    patch: str | None = Field(None, max_length=MAX_SOURCE_CHARS, description=(
        "Unified diff against the source of parent_ids[0] (hunks '@@ -a,b +c,d @@'; file headers optional)."))
    schedule: ScheduleEdit | None = Field(None, description=(
        "A JSON Patch of a typed Hopper GEMM schedule (a source with a SCHEDULE constant was lowered from one): "
        "the edited schedule is checked by the static gate (barrier protocol, registers, shared memory) and "
        "lowered to Gluon; its numbers are the config (no 'config' or 'space' then). Exactly one of 'source', "
        "'patch' and 'schedule'."))
    parent_ids: list[str] = Field(default_factory=list, description=(
        "Candidate ids this proposal derives from; the first is the base of a patch and of the latency "
        "expectation."))
    config: dict[str, Scalar] | None = Field(None, description="One configuration: keyword arguments of `launch`.")
    space: dict[str, list[Scalar]] | None = Field(None, description=(
        f"A configuration space: parameter -> values; every combination is tried (at most {MAX_CONFIGS})."))
    rationale: str = Field(min_length=1, max_length=4000, description="Why this should be faster, in a few lines.")
    hypothesis: ProposalHypothesis = Field(description="What moves, which way, and the expected latency change.")
    cites: list[str] = Field(default_factory=list, description="Knowledge-base entry ids the proposal relies on.")

    @model_validator(mode="after")
    def _shape(self) -> "KernelProposal":
        if [self.source, self.patch, self.schedule].count(None) != 2:
            raise ValueError("give exactly one of 'source', 'patch' and 'schedule'")
        if self.schedule is not None and (self.config is not None or self.space is not None):
            raise ValueError("a 'schedule' edit carries its own numbers: no 'config' or 'space'")
        if self.patch is not None and not self.parent_ids:
            raise ValueError("a 'patch' needs parent_ids[0], the candidate it applies to")
        if self.config is not None and self.space is not None:
            raise ValueError("give 'config' or 'space', not both")
        for name, values in (self.space or {}).items():
            if not values:
                raise ValueError(f"space[{name!r}] is empty")
        for name, v in [*(self.config or {}).items(), *((k, x) for k, vs in (self.space or {}).items() for x in vs)]:
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{name}={v}: configuration values must be finite numbers")
        return self

    def configs(self) -> list[dict[str, Scalar]]:
        """Every configuration the proposal names, in order (one empty config when it names none)."""
        if self.space:
            keys = list(self.space)
            combos = [dict(zip(keys, vals)) for vals in itertools.product(*(self.space[k] for k in keys))]
        else:
            combos = [dict(self.config or {})]
        if len(combos) > MAX_CONFIGS:
            raise ProposalInvalid(f"the space expands to {len(combos)} configurations; at most {MAX_CONFIGS}")
        return combos


def proposal_json_schema() -> dict:
    """The JSON Schema of KernelProposal (what prompts, workspaces and the MCP server hand out)."""
    return KernelProposal.model_json_schema()


# -- parsing ------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced ```json block, or the outermost {...}."""
    t = text.strip()
    candidates = [t, *(m.group(1) for m in _FENCE.finditer(t))]
    if "{" in t and "}" in t:
        candidates.append(t[t.index("{"): t.rindex("}") + 1])
    first_error = None
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError as e:
            first_error = first_error or e
    raise ProposalInvalid(f"the reply is not valid JSON ({first_error}); answer with one JSON object only")


def format_validation_error(err: ValidationError) -> str:
    """Pydantic errors as short lines 'field.path: message'."""
    lines = []
    for e in err.errors()[:10]:
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"{loc}: {e['msg']}")
    more = len(err.errors()) - 10
    return "\n".join(lines + ([f"... and {more} more"] if more > 0 else []))


def parse_proposal(text_or_value: str | dict) -> KernelProposal:
    """A KernelProposal from reply text (or an already decoded JSON object); ProposalInvalid otherwise."""
    value = extract_json(text_or_value) if isinstance(text_or_value, str) else text_or_value
    if not isinstance(value, dict):
        raise ProposalInvalid("expected one JSON object (a KernelProposal)")
    try:
        return KernelProposal.model_validate(value)
    except ValidationError as e:
        raise ProposalInvalid("the proposal does not match the schema:\n" + format_validation_error(e)) from None


# -- unified diffs ------------------------------------------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_unified_diff(original: str, patch: str) -> str:
    """Apply a single-file unified diff. Hunks must match their context exactly; a hunk may sit at another line
    than stated (the nearest match wins), as with `patch`. ProposalInvalid says which hunk failed and why."""
    src = original.splitlines()
    lines = patch.splitlines()
    hunks: list[tuple[int, list[str], list[str]]] = []
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            if lines[i].startswith(("---", "+++", "diff ", "index ")) or not lines[i].strip():
                i += 1
                continue
            raise ProposalInvalid(f"patch line {i + 1} is outside any hunk: {lines[i][:80]!r}")
        start = int(m.group(1))
        old, new = [], []
        i += 1
        while i < len(lines) and not _HUNK.match(lines[i]):
            line = lines[i]
            if line.startswith("\\"):
                pass  # '\ No newline at end of file'
            elif line.startswith(("--- ", "+++ ")) and i + 1 < len(lines) and lines[i + 1].startswith(("+++", "@@")):
                break
            elif line.startswith(" ") or line == "":
                old.append(line[1:])
                new.append(line[1:])
            elif line.startswith("-"):
                old.append(line[1:])
            elif line.startswith("+"):
                new.append(line[1:])
            else:
                raise ProposalInvalid(f"patch line {i + 1} starts with neither ' ', '-' nor '+': {line[:80]!r}")
            i += 1
        hunks.append((start, old, new))
    if not hunks:
        raise ProposalInvalid("the patch has no hunk ('@@ -a,b +c,d @@')")
    out: list[str] = []
    pos = 0
    for k, (start, old, new) in enumerate(hunks, 1):
        want = max(start - 1, pos)
        at = _find(src, old, want, pos)
        if at is None:
            first = old[0] if old else ""
            raise ProposalInvalid(f"hunk {k} (at line {start}) does not apply: its context/removed lines are not in "
                                  f"the parent's source after line {pos} (first expected line: {first!r})")
        out.extend(src[pos:at])
        out.extend(new)
        pos = at + len(old)
    out.extend(src[pos:])
    return "\n".join(out) + ("\n" if original.endswith("\n") or not original else "")


def _find(src: list[str], block: list[str], want: int, lo: int) -> int | None:
    n = len(block)
    if n == 0:
        return min(max(want, lo), len(src))
    spots = [j for j in range(lo, len(src) - n + 1) if src[j:j + n] == block]
    return min(spots, key=lambda j: abs(j - want)) if spots else None


# -- the interface check ------------------------------------------------------------------------------------

def check_interface(source: str, spec: OpSpec, config_keys: set[str]) -> None:
    """The source parses and its `launch` accepts the op's tensors positionally, its scalars, the config and (when
    the op declares one) the workspace `scratch` by keyword, with every required argument supplied. ProposalInvalid
    otherwise."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        raise ProposalInvalid(f"the source does not parse: line {e.lineno}: {e.msg}") from None
    launch = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch"), None)
    if launch is None:
        raise ProposalInvalid("the source defines no top-level function `launch`")
    a = launch.args
    tensors = [t.name for t in [*spec.inputs, *spec.outputs]]
    positional = [p.arg for p in [*a.posonlyargs, *a.args]]
    if a.vararg is None and len(positional) < len(tensors):
        raise ProposalInvalid(f"launch must take the tensors {tensors} positionally (in this order); it takes "
                              f"{positional}")
    extra_positional = positional[len(tensors):]
    n_defaults = len(a.defaults)
    required_extra = extra_positional[:len(extra_positional) - n_defaults] if n_defaults else extra_positional
    keyword = set(extra_positional) | {p.arg for p in a.kwonlyargs}
    given = set(spec.scalars) | config_keys
    if spec.scratch is not None:  # the harness passes the op's workspace by keyword
        given.add("scratch")
    if a.kwarg is None:
        unknown = sorted(given - keyword)
        if unknown:
            raise ProposalInvalid(f"launch does not accept keyword(s) {unknown} (scalars {sorted(spec.scalars)} "
                                  f"and the config are passed by keyword)")
    required = set(required_extra) | {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None}
    missing = sorted(required - given)
    if missing:
        raise ProposalInvalid(f"launch requires {missing} but neither the op's scalars nor the config supply them")


# -- materialization ----------------------------------------------------------------------------------------

def materialize(proposal: KernelProposal, spec: OpSpec, parents: dict[str, Candidate], *, proposer: str,
                known_cites: set[str] | None = None) -> list[Candidate]:
    """The candidates a proposal stands for: one per configuration, lineage and hypothesis attached.

    `parents`: the candidates the proposer may name (id -> candidate). `known_cites`: ids a citation must be
    among (None = not checked)."""
    unknown = [p for p in proposal.parent_ids if p not in parents]
    if unknown:
        raise ProposalInvalid(f"unknown parent id(s) {unknown}; known: {sorted(parents)[:20]}")
    if known_cites is not None:
        bad = [c for c in proposal.cites if c not in known_cites]
        if bad:
            raise ProposalInvalid(f"unknown knowledge id(s) {bad}")
    if proposal.schedule is not None:
        return [_schedule_candidate(proposal, spec, parents, proposer)]
    if proposal.patch is not None:
        source = apply_unified_diff(parents[proposal.parent_ids[0]].source, proposal.patch)
    else:
        source = proposal.source or ""
    configs = proposal.configs()
    keys = set().union(*configs) if configs else set()
    check_interface(source, spec, keys)
    base = parents[proposal.parent_ids[0]] if proposal.parent_ids else None
    template = base.template if base is not None and base.source == source else "custom"
    return [Candidate(op=spec.name, template=template, language=proposal.language, source=source, config=cfg,
                      parent_ids=list(proposal.parent_ids), proposer=proposer, hypothesis=proposal.hypothesis.text())
            for cfg in configs]


def _schedule_candidate(proposal: KernelProposal, spec: OpSpec, parents: dict[str, Candidate],
                        proposer: str) -> Candidate:
    from ..gate.edit import materialize_edit
    from ..schedule.patch import EditInvalid
    try:
        _, cand = materialize_edit(proposal.schedule, spec, sources={k: c.source for k, c in parents.items()},
                                   proposer=proposer, parent_ids=list(proposal.parent_ids),
                                   hypothesis=proposal.hypothesis.text())
    except EditInvalid as e:
        raise ScheduleRefused(f"the schedule edit is refused: {e}", e.field, e.check) from None
    return cand


__all__ = ["KernelProposal", "MAX_CONFIGS", "ProposalHypothesis", "ProposalInvalid", "apply_unified_diff",
           "check_interface", "extract_json", "format_validation_error", "materialize", "parse_proposal",
           "proposal_json_schema", "ScheduleRefused"]
