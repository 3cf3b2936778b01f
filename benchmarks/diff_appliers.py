"""The proposal diff applier (kernelloop.tune.propose.proposal.apply_unified_diff) beside a library that applies unified
diffs (whatthepatch) and GNU patch, on the kinds of diff an LLM proposer writes: exact, a hunk at another line
than stated, several hunks with file headers, wrong hunk line counts, and context that is not in the source (which
must be refused). Prints a markdown table; `pip install whatthepatch` for its column.

    python benchmarks/diff_appliers.py > OUT.md
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelloop.tune.propose.proposal import ProposalInvalid, apply_unified_diff

SOURCE = "a\nb\nc\nd\ne\n"
CASES = [   # (name, patch, the expected result; None = must be refused)
    ("exact", "@@ -2,2 +2,2 @@\n b\n-c\n+C\n", "a\nb\nC\nd\ne\n"),
    ("hunk two lines off", "@@ -1,1 +1,2 @@\n d\n+d2\n", "a\nb\nc\nd\nd2\ne\n"),
    ("two hunks, file headers", "--- a/k.py\n+++ b/k.py\n@@ -1,1 +1,1 @@\n-a\n+A\n@@ -5,1 +5,1 @@\n-e\n+E\n",
     "A\nb\nc\nd\nE\n"),
    ("wrong hunk counts", "@@ -2,5 +2,9 @@\n b\n-c\n+C\n", "a\nb\nC\nd\ne\n"),
    ("context not in the source", "@@ -1,1 +1,1 @@\n-zzz\n+y\n", None),
]


def ours(patch: str) -> str | None:
    try:
        return apply_unified_diff(SOURCE, patch)
    except ProposalInvalid:
        return None


def whatthepatch_apply(patch: str) -> str | None:
    import whatthepatch
    try:
        diffs = list(whatthepatch.parse_patch(patch))
        return "\n".join(whatthepatch.apply_diff(diffs[0], SOURCE.splitlines())) + "\n" if diffs else None
    except Exception:   # noqa: BLE001 - the library's refusal
        return None


def gnu_patch(patch: str) -> str | None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "k.py"
        f.write_text(SOURCE)
        body = patch if patch.startswith("---") else f"--- a/k.py\n+++ b/k.py\n{patch}"
        r = subprocess.run(["patch", "--batch", str(f)], input=body, text=True, capture_output=True)
        return f.read_text() if r.returncode == 0 else None


def main() -> None:
    appliers = {"kernelloop": ours}
    try:
        import whatthepatch  # noqa: F401
        appliers["whatthepatch"] = whatthepatch_apply
    except ImportError:
        pass
    if shutil.which("patch"):
        appliers["GNU patch"] = gnu_patch
    print("| diff | " + " | ".join(appliers) + " |\n|---|" + "---|" * len(appliers))
    for name, patch, want in CASES:
        cells = []
        for fn in appliers.values():
            got = fn(patch)
            cells.append("refused (right)" if got is None and want is None else
                         "refused (wrong)" if got is None else "right" if got == want else "wrong result")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
