"""The process of one edit's proof on a GPU: `python -m kernelloop.tune.ptx.prove_child JOB REPORT WORKDIR`
(tune/ptx/gpu.py writes the job and reads the report)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path


def main() -> int:
    job = json.loads(Path(sys.argv[1]).read_text())
    from ...core.spec import load_op
    from .gpu import TritonOverrideExecutor
    from .prove import ProofCase, prove
    from .records import PtxCandidate
    from .roundtrip import sass
    from .tools import assemble
    bundle = load_op(Path(job["op_dir"]))
    cand = PtxCandidate.model_validate(job["candidate"])
    executor = TritonOverrideExecutor(bundle.spec, job["template_source"], job["config"], cand.kernel,
                                      cand.original_ptx_sha256, Path(sys.argv[3]))
    cubin = base64.b64decode(job["original_cubin_b64"]) if job["original_cubin_b64"] else None
    original_sass = sass(cubin) if cubin else None

    def changed(edited: str) -> bool | None:
        if original_sass is None:
            return None
        asm = assemble(edited, 90, job["metadata"])
        return sass(asm.cubin) != original_sass if asm.ok else None
    report = prove(cand, job["original_ptx"], bundle.spec, bundle.folder / bundle.spec.reference,
                   executor, [ProofCase.model_validate(c) for c in job["cases"]], metadata=job["metadata"],
                   time_it=job["time_it"], seed=job["seed"], sass_changed=changed)
    Path(sys.argv[2]).write_text(report.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
