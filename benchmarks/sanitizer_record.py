"""Run every compute-sanitizer tool over an honest rmsnorm kernel and the deliberately out-of-bounds one
(tests/fixtures/sanitizer/oob_read_rmsnorm.py) on a small shape; write each tool's raw output and the parsed report.

    python3 benchmarks/sanitizer_record.py OUT_DIR        (on a GPU host with compute-sanitizer)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from kernelloop.base.records import Workload
    from kernelloop.core.spec import load_op
    from kernelloop.core.verify.sanitizer import find_sanitizer, sanitize
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "sanitizer-out")
    out.mkdir(parents=True, exist_ok=True)
    print("compute-sanitizer:", find_sanitizer(), flush=True)
    bundle = load_op(ops_dir() / "rmsnorm")
    w = Workload(op="rmsnorm", axes={"M": 5, "N": 256}, dtype="fp16")
    cases = {"honest": (bundle.template_sources["rowwise"],
                        {"BLOCK_N": 256, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0}),
             "oob": ((ROOT / "tests/fixtures/sanitizer/oob_read_rmsnorm.py").read_text(), {"BLOCK_N": 512})}
    summary = {}
    for name, (src, cfg) in cases.items():
        rep = sanitize(src, cfg, bundle.spec, w, deadline_s=240)
        summary[name] = {"status": rep.status, "runs": [{"tool": r.tool, "status": r.status, "exit": r.exit_code,
                                                        "errors": r.error_count, "findings": len(r.findings),
                                                        "seconds": r.seconds, "reason": r.reason}
                                                       for r in rep.runs],
                         "verdict": (v.message if (v := rep.verdict()) else None)}
        (out / f"{name}-report.json").write_text(rep.to_json())
        (out / f"{name}-outputs.txt").write_text("\n\n".join(f"##### {r.tool} exit={r.exit_code}\n$ "
                                                            + " ".join(r.command) + "\n" + r.output for r in rep.runs))
        print(name, json.dumps(summary[name], indent=1), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
