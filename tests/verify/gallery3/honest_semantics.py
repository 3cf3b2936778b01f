"""Every built-in op's honest templates on its interpreter workloads, over seeds and every value distribution (the
op's own and `offset`): each case's verdict from the verifier's comparison, and how far its bias and ULP statistics
stay under their bounds. Run in a fresh interpreter (TRITON_INTERPRET=1) by test_gallery3_semantics.py, or by hand:
`python3 tests/verify/gallery3/honest_semantics.py layernorm,softmax 3` prints one JSON line per case (ops separated
by commas, one interpreter for all)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

from kernelloop.base.builtin import ops_dir  # noqa: E402
from kernelloop.core.device import VIRTUAL_HOPPER  # noqa: E402
from kernelloop.core.reference.inputs import alloc_outputs, alloc_scratch, make_inputs  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.spec import load_op  # noqa: E402
from kernelloop.core.spec.loader import load_workloads  # noqa: E402
from kernelloop.core.spec.space import prune  # noqa: E402
from kernelloop.core.verify.compare import check_outputs  # noqa: E402
from kernelloop.core.verify.semantics import bias_bound, signed_bias, ulp_bound, ulp_distances  # noqa: E402


def _module(path):
    s = importlib.util.spec_from_file_location(f"honest_{path.parent.name}_{path.stem}", path)
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    return m


def rows(op: str, seeds: int, configs: int = 1):
    root = ops_dir() / op
    bundle = load_op(root)
    spec = bundle.spec
    dists = sorted({*spec.inputs_policy.distributions, *spec.inputs_policy.always})
    for w in load_workloads(root / "workloads-interpret.toml", spec):
        for t in spec.templates:
            valid, _ = prune(t, w, VIRTUAL_HOPPER)
            for cfg in valid[:configs]:
                mod = _module(root / t.file)
                for seed in range(seeds):
                    for d in dists:
                        yield _case(spec, root, mod, t.name, cfg, w, seed, d)


def _case(spec, root, mod, template, cfg, w, seed, d):
    inputs = make_inputs(spec, w, 1000 + seed, "cpu", d)
    refs = truth(spec, root / spec.reference, inputs, w)
    outs = alloc_outputs(spec, w, "cpu")
    mod.launch(*inputs, *outs, **alloc_scratch(spec, w, "cpu"), **spec.scalars, **cfg)
    v = check_outputs(spec, w, outs, refs, inputs, inputs, "calibration")
    row = {"op": spec.name, "template": template, "workload": w.label, "seed": seed, "distribution": d,
           "status": v.status.value, "message": v.message[:200], "bias_ratio": 0.0, "ulp_ratio": 0.0}
    out, ref = outs[0], refs[0]
    if not out.dtype.is_floating_point:
        return row      # integer outputs (histogram counts) are compared exactly: no bias or ULP bound applies
    length = spec.reduction_length(w.axes)
    u = ulp_distances(out, ref)
    q = float(torch.kthvalue(u, max(1, math.ceil(0.5 * u.numel()))).values) if u.numel() else 0.0
    return {**row, "bias_ratio": abs(signed_bias(out, ref)) / bias_bound(out.dtype, length),
            "ulp_ratio": q / ulp_bound(out.dtype, length)}


if __name__ == "__main__":
    for name in sys.argv[1].split(","):
        for row in rows(name, int(sys.argv[2]) if len(sys.argv) > 2 else 2):
            print(json.dumps(row), flush=True)
