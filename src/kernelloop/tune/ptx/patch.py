"""Patches of PTX text as typed hunks: made from an original and an edited text, applied back (refusing a patch
whose removed lines are not where it says), shown as a unified diff."""

from __future__ import annotations

import difflib

from ...base.records.base import sha256_hex
from .records import PtxCandidate, PtxHunk


class PatchError(ValueError):
    """The patch does not apply to this PTX."""


def hunks(original: str, edited: str) -> list[PtxHunk]:
    """The hunks that turn `original` into `edited` (by lines)."""
    a, b = original.split("\n"), edited.split("\n")
    out = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            out.append(PtxHunk(start=i1, remove=a[i1:i2], insert=b[j1:j2]))
    return out


def apply(original: str, patch: list[PtxHunk]) -> str:
    """`original` with every hunk applied (hunks in increasing `start`, not overlapping)."""
    lines = original.split("\n")
    out, at = [], 0
    for h in sorted(patch, key=lambda h: h.start):
        if h.start < at:
            raise PatchError(f"hunks overlap at line {h.start + 1}")
        if lines[h.start:h.start + len(h.remove)] != h.remove:
            raise PatchError(f"line {h.start + 1}: the hunk's removed lines are not there")
        out += lines[at:h.start] + h.insert
        at = h.start + len(h.remove)
    return "\n".join(out + lines[at:])


def edited_ptx(candidate: PtxCandidate, original: str) -> str:
    """The candidate's PTX, made from the original it names (its sha256 checked)."""
    if sha256_hex(original) != candidate.original_ptx_sha256:
        raise PatchError("the PTX is not the one the edit was made from (sha256 differs)")
    return apply(original, candidate.hunks)


def unified(original: str, edited: str, name: str = "kernel.ptx", context: int = 3) -> str:
    """A unified diff of the two texts."""
    return "".join(difflib.unified_diff(original.splitlines(True), edited.splitlines(True), f"a/{name}", f"b/{name}",
                                        n=context))
