"""PTX-level winners in a package: each dispatch entry whose candidate has an edit the run proved FASTER gets that
edit as its overlay (deliver/package/table.py `PtxOverlay`) with its provenance -- the source-level kernel (the entry's
candidate), the edit (the edited PTX and its unified diff), the evidence (the proof report: cases, verifier,
timing) -- written under `ops/<op>/ptx/`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ...core.archive import Archive
from ...tune.ptx.archive import best_winner
from ...tune.ptx.patch import edited_ptx, unified
from .table import DispatchTable, PtxOverlay


def attach(archive: Archive, run: dict, table: DispatchTable, op_root: Path, write: Callable[[Path, str], None],
           on_note=lambda text: None) -> DispatchTable:
    """`table` with the overlays of the run's proved PTX winners (files written through `write`)."""
    entries = []
    for e in table.entries:
        found = best_winner(archive, run["id"], e.candidate_id)
        if found is None:
            entries.append(e)
            continue
        cand, report, original = found
        env = report.environment
        if not original or env.get("arch") != e.guard.arch:
            on_note(f"{table.op} {e.id}: PTX edit {cand.id} left out (proved on {env.get('arch') or '?'}, the entry "
                    f"serves {e.guard.arch})" if original else f"{table.op} {e.id}: the PTX {cand.id} edits is not "
                    f"in the archive")
            entries.append(e)
            continue
        edited = edited_ptx(cand, original)
        base = op_root / "ptx" / cand.id
        write(base.with_suffix(".ptx"), edited)
        write(base.with_suffix(".diff"), unified(original, edited, f"{cand.kernel}.ptx"))
        write(base.with_suffix(".proof.json"), report.model_dump_json(indent=1))
        rel = f"ptx/{cand.id}"
        t = report.timing
        overlay = PtxOverlay(kernel=cand.kernel, original_ptx_sha256=cand.original_ptx_sha256, file=f"{rel}.ptx",
                             diff=f"{rel}.diff", proof=f"{rel}.proof.json", edit_id=cand.id, rule=cand.rule,
                             hypothesis=cand.hypothesis, speedup=t.speedup, ci=(t.ci_low, t.ci_high),
                             cases=sum(c.status in ("identical", "within_tolerance") for c in report.cases),
                             triton=env.get("triton", ""), arch=env["arch"])
        on_note(f"{table.op} {e.id}: PTX edit {cand.id} ({cand.rule}) attached, {t.speedup:.3f}x its source-level "
                f"kernel [{t.ci_low:.3f}, {t.ci_high:.3f}]")
        entries.append(e.model_copy(update={"ptx": overlay}))
    return table.model_copy(update={"entries": entries})
