"""The pattern table: SQLite, durable across models and runs. Signature -> a verified realisation.

    table = PatternTable("patterns.sqlite")
    entry = table.find(key, kind)              # a usable PatternEntry or None
    why = entry.conditions.unmet(...)          # '' when this model's occurrence satisfies its conditions

An entry holds the pattern (key, kind, the op sequence), the realisation (template, its kernel source, the
configuration: what a package's dispatch entry launches), the conditions under which it was verified (dtypes,
scalar values, every axis value it passed on, the alignment facts that held, the template source's sha256) and the
evidence (each run behind it: verdicts, kernel times, speed-ups over the unfused sequence with intervals).

Admission: only a realisation that PASSED and, on a GPU, was FASTER than the unfused eager sequence on every
workload enters (status `admitted`). In Triton's interpreter a realisation that PASSED enters on verification
alone, status `unmeasured` ("speed not measured"); the first GPU measurement then confirms it (`admitted`) or
evicts it (`evicted`: no longer offered). Every decision is a row of the `log` table.

The key (`pattern_key`) is the pattern's structure without its sizes: the op sequence with operands and
constants (a scalar the op takes, such as a norm's eps, written as its name; the model's dtype as 'op'; sizes, such
as shape symbols and a slice's split point, left out), so an isomorphic subgraph of another model or size maps to
the same key.
"""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Literal

from pydantic import Field

from ...base.records import Record, canonical_json, content_hash, evaluate_expression
from .evidence import Evidence
from .emit import BIG
from .opgen import heldout_axes
from .plans import OpPlan
from .records import Signature

Status = Literal["admitted", "unmeasured", "evicted"]
SCHEMA = """
CREATE TABLE IF NOT EXISTS patterns (
    key TEXT NOT NULL, kind TEXT NOT NULL, status TEXT NOT NULL, entry TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (key, kind));
CREATE TABLE IF NOT EXISTS log (
    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, kind TEXT NOT NULL, at REAL NOT NULL,
    event TEXT NOT NULL, detail TEXT NOT NULL);
"""
SYMBOL = re.compile(r"\bs\d+\b")


def pattern_key(sig: Signature, plan: OpPlan) -> str:
    """The table key of the plan's steps: structure without sizes (see the module's docstring)."""
    model = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
    named = {(k, ci): name for name, (k, ci) in plan.scalar_args.items()}
    steps = []
    for k in plan.steps:
        st = sig.steps[k]
        consts = [f"${named[(k, i)]}" if (k, i) in named else SYMBOL.sub("s", c) for i, c in enumerate(st.consts)]
        consts = ["op" if model.get(c) == plan.dtype.value else c for c in consts]
        if st.op == "aten.slice.Tensor":
            # a split point is a size (half the head dimension), which the reference computes from the shapes
            consts = [c if i == 0 or c in ("0", str(BIG)) else "size" for i, c in enumerate(consts)]
        steps.append([k, st.op, st.operands, consts, "op" if model.get(st.dtype) == plan.dtype.value else st.dtype])
    return "pat-" + content_hash({"family": sig.family, "kind": plan.kind, "steps": steps,
                                  "inputs": [p.operand for p in plan.inputs],
                                  "outputs": [p.operand for p in plan.outputs]})


class Conditions(Record):
    """Under what a realisation was verified."""

    dtypes: list[str] = Field(description="Workload dtypes it passed in.")
    scalars: dict[str, list[float]] = Field(default_factory=dict, description="Scalar values it was verified at.")
    axes: dict[str, list[int]] = Field(default_factory=dict, description="Every value of each axis it passed on.")
    facts: list[str] = Field(default_factory=list, description="Alignment facts over the op's axes that held on "
                                                               "every verified workload, e.g. 'N % 16 == 0'.")
    template_sha256: str = Field(description="sha256 of the template source (the candidate's kernel).")

    def unmet(self, dtype: str, scalars: dict[str, float], workloads: list[dict[str, int]], source_sha256: str
              ) -> str:
        """Why a new occurrence does not meet the conditions ('' when it does). New scalar values and axis values
        are allowed: the re-verification covers them."""
        if source_sha256 != self.template_sha256:
            return "the template source differs from the one verified"
        if dtype not in self.dtypes:
            return f"dtype {dtype} was never verified (verified: {', '.join(self.dtypes)})"
        if set(scalars) != set(self.scalars):
            return f"scalars {sorted(scalars)} differ from the verified {sorted(self.scalars)}"
        for w in workloads:
            if set(w) != set(self.axes):
                return f"axes {sorted(w)} differ from the verified {sorted(self.axes)}"
            for f in self.facts:
                if not evaluate_expression(f, w):
                    return f"{f} held on every verified shape but not on {w}"
        return ""


def facts_of(workloads: list[dict[str, int]], varied: list[str], align: int = 16) -> list[str]:
    """'A % 16 == 0' for each axis divisible by `align` on every workload, but the axes the verifier varies
    itself (its held-out axes: their alignment is never a condition of a pass)."""
    axes = sorted(set.intersection(*(set(w) for w in workloads)) - set(varied)) if workloads else []
    return [f"{a} % {align} == 0" for a in axes if all(w[a] % align == 0 for w in workloads)]


class PatternEntry(Record):
    key: str
    kind: str
    family: str
    ops: list[str] = Field(description="The ATen ops of the pattern, in order.")
    template: str
    source: str = Field(description="The kernel source the candidate is (the template, epilogue in place).")
    config: dict
    candidate_id: str
    status: Status
    conditions: Conditions
    evidence: list[Evidence] = Field(default_factory=list, description="Every run behind the entry, oldest first.")
    created: float
    updated: float

    @property
    def usable(self) -> bool:
        return self.status in ("admitted", "unmeasured")


class TableError(ValueError):
    """The file is not a pattern table (not SQLite, or a folder)."""


class PatternTable:
    """The SQLite file of patterns (created when missing); each method is one transaction. TableError when the
    file exists and is not a pattern table."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.is_dir():
            raise TableError(f"{self.path}: a folder, not a pattern table (an SQLite file)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, timeout=30.0)
        try:
            self._conn.executescript(SCHEMA)
            self._conn.commit()
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise TableError(f"{self.path}: not a pattern table (an SQLite file): {e}") from None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "PatternTable":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def get(self, key: str, kind: str) -> PatternEntry | None:
        row = self._conn.execute("SELECT entry FROM patterns WHERE key = ? AND kind = ?", (key, kind)).fetchone()
        return PatternEntry.model_validate_json(row[0]) if row else None

    def find(self, key: str, kind: str) -> PatternEntry | None:
        """The entry when it is usable (admitted, or admitted on verification alone), else None."""
        e = self.get(key, kind)
        return e if e is not None and e.usable else None

    def entries(self) -> list[PatternEntry]:
        return [PatternEntry.model_validate_json(r[0])
                for r in self._conn.execute("SELECT entry FROM patterns ORDER BY key, kind")]

    def log(self, key: str | None = None) -> list[dict]:
        q = "SELECT key, kind, at, event, detail FROM log" + (" WHERE key = ?" if key else "") + " ORDER BY id"
        return [dict(zip(("key", "kind", "at", "event", "detail"), r))
                for r in self._conn.execute(q, (key,) if key else ())]

    def _put(self, e: PatternEntry, event: str, detail: str) -> None:
        with self._conn:
            self._conn.execute("INSERT OR REPLACE INTO patterns (key, kind, status, entry, updated) VALUES "
                               "(?, ?, ?, ?, ?)", (e.key, e.kind, e.status, canonical_json(e.model_dump(mode="json")),
                                                   e.updated))
            self._conn.execute("INSERT INTO log (key, kind, at, event, detail) VALUES (?, ?, ?, ?, ?)",
                               (e.key, e.kind, time.time(), event, detail))

    def note(self, key: str, kind: str, event: str, detail: str) -> None:
        """A decision that changes no entry (a miss, a realisation not admitted)."""
        with self._conn:
            self._conn.execute("INSERT INTO log (key, kind, at, event, detail) VALUES (?, ?, ?, ?, ?)",
                               (key, kind, time.time(), event, detail))

    def admit(self, key: str, plan: OpPlan, ops: list[str], template: str, source: str, config: dict,
              candidate_id: str, evidence: Evidence, source_sha256: str) -> str:
        """Enter a searched realisation if it qualifies; returns what happened ('admitted', 'speed not
        measured' or 'not admitted: why')."""
        if not evidence.passed:
            why = "not admitted: it did not pass on every workload"
            self.note(key, plan.kind, "rejected", why)
            return why
        speed = evidence.speed
        if evidence.device.is_cuda and speed != "FASTER":
            why = f"not admitted: {speed} than the unfused eager sequence"
            self.note(key, plan.kind, "rejected", why)
            return why
        now = time.time()
        status: Status = "admitted" if speed == "FASTER" else "unmeasured"
        cond = Conditions(dtypes=[plan.dtype.value], scalars={k: [v] for k, v in plan.scalars.items()},
                          axes=_axes_of([w.axes for w in evidence.workloads]),
                          facts=facts_of([w.axes for w in evidence.workloads], heldout_axes(plan)),
                          template_sha256=source_sha256)
        e = PatternEntry(key=key, kind=plan.kind, family=plan.family, ops=ops, template=template, source=source,
                         config=config, candidate_id=candidate_id, status=status, conditions=cond,
                         evidence=[evidence], created=now, updated=now)
        self._put(e, "admitted" if status == "admitted" else "admitted-unmeasured",
                  f"run {evidence.run_id} on {evidence.device}: {speed}")
        return "admitted" if status == "admitted" else "speed not measured"

    def reverified(self, entry: PatternEntry, plan: OpPlan, evidence: Evidence) -> str:
        """Record a re-verification run of the entry's realisation on a new occurrence; returns what happened."""
        if not evidence.passed:
            self._put(entry.model_copy(update={"evidence": [*entry.evidence, evidence], "updated": time.time()}),
                      "reverify-failed", f"run {evidence.run_id}: did not pass on the new shapes")
            return "hit: re-verification failed on the new shapes"
        c = entry.conditions
        scalars = {k: sorted(set(c.scalars.get(k, [])) | {v}) for k, v in plan.scalars.items()}
        axes = _axes_of([w.axes for w in evidence.workloads], c.axes)
        cond = c.model_copy(update={"scalars": scalars, "axes": axes,
                                    "dtypes": sorted(set(c.dtypes) | {plan.dtype.value})})
        status, event = entry.status, "reverified"
        speed = evidence.speed
        if evidence.device.is_cuda:
            if speed == "FASTER":
                status, event = "admitted", ("confirmed" if entry.status == "unmeasured" else "reverified")
            else:
                status, event = "evicted", "evicted"
        e = entry.model_copy(update={"conditions": cond, "status": status, "evidence": [*entry.evidence, evidence],
                                     "updated": time.time()})
        self._put(e, event, f"run {evidence.run_id} on {evidence.device}: {speed}")
        if status == "evicted":
            return f"evicted: {speed} than the unfused eager sequence on {evidence.gpu or evidence.device}"
        return "hit" if event == "reverified" else "hit: confirmed on the GPU"


def _axes_of(workloads: list[dict[str, int]], start: dict[str, list[int]] | None = None) -> dict[str, list[int]]:
    out = {k: set(v) for k, v in (start or {}).items()}
    for w in workloads:
        for a, v in w.items():
            out.setdefault(a, set()).add(v)
    return {a: sorted(v) for a, v in sorted(out.items())}
