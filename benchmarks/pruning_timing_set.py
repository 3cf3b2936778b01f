"""The configurations to time on a GPU for the second half of a pruning audit.

    python benchmarks/pruning_timing_set.py AUDIT.json --space RECORDED.space.json.gz [--top 10] --out CONFIGS.json

AUDIT.json is a `kernelloop audit-pruning` report; RECORDED is an earlier recording of the pruned space of the same
op (`kernelloop record`). Per audited workload the file lists the pruned configurations that build and run (one
per distinct launch) and the `--top` best kept configurations of the recording on the same shape and dtype, so
that both are timed in one session (`kernelloop record --configs CONFIGS.json`) and compared without drift
between sessions; then `kernelloop audit-pruning SPEC --builds AUDIT.json --timed TIMED.space.json` says whether
any pruned configuration is among the best 1 % of everything that runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kernelloop.replay.space_file import read_space_document  # noqa: E402


def timing_set(audit: dict, recorded: dict, top: int) -> dict:
    """{"op", "configs": {workload_id: [configs]}, "counts": {...}} for `record --configs`."""
    if audit["op"] != recorded.get("op"):
        raise ValueError(f"the audit is of {audit['op']!r}, the recording of {recorded.get('op')!r}")
    by_shape = {(json.dumps(w["axes"], sort_keys=True), w["dtype"]): w["id"] for w in recorded["workloads"]}
    out, counts = {}, {}
    for rep in audit["workloads"]:
        rows = rep["rows"]
        wid = rep["workload_id"]
        rid = by_shape.get((json.dumps(rep["axes"], sort_keys=True), rep["dtype"]))
        if rid is None:
            raise ValueError(f"the recording has no workload {rep['workload']}")
        measured = sorted((r for r in recorded["records"] if (r["results"].get(rid) or {}).get("value") is not None),
                          key=lambda r: r["results"][rid]["value"])
        best = [r["config"] for r in measured[:top]]
        # the recorded best first (the comparison needs them), then what the device-limit estimates removed (their
        # errors), then the semantic rules' removals: a recording cut by its time limit keeps the most telling part
        order = sorted(rep["pruned_runners"], key=lambda r: 0 if r["pruned"].startswith("device limit") else 1)
        runners = [{"template": r["template"], **r["config"]} for r in order]
        out[wid] = [c for c in best if c not in runners] + runners
        counts[wid] = {"pruned_runners": len(runners), "recorded_best": len(best), "rows": len(rows)}
    return {"op": audit["op"], "configs": out, "counts": counts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("audit", type=Path)
    ap.add_argument("--space", type=Path, required=True, help="an earlier recording of the pruned space")
    ap.add_argument("--top", type=int, default=10, help="best kept configurations to time again (default 10)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    doc = timing_set(json.loads(a.audit.read_text()), read_space_document(a.space), a.top)
    a.out.write_text(json.dumps(doc, indent=1))
    for wid, c in doc["counts"].items():
        print(f"{wid}: {c['pruned_runners']} pruned runners + {c['recorded_best']} recorded best -> "
              f"{len(doc['configs'][wid])} configurations")


if __name__ == "__main__":
    main()
