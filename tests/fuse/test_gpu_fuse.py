"""`fuse` on a CUDA GPU: llama-tiny's patterns realised (budget 1, the templates' TMA paths in the space),
composed and checked end to end with the timing variants (the GPU tier runs it)."""

import pytest
import torch

pytest.importorskip("transformers")
pytestmark = pytest.mark.gpu


def test_fuse_llama_tiny_on_cuda(tmp_path):
    from kernelloop.deliver.capture import models
    from kernelloop.deliver.fuse import fuse
    model, inputs = models.build("llama-tiny", device="cuda")
    r = fuse(model, [inputs], out=tmp_path, budget=1, confirm=False, sanitize=False, rounds=3, calls=2,
             liger=False).report
    assert all(p.passed for p in r.patterns), [(p.op, p.note) for p in r.patterns]
    assert all(p.speed != "not measured" for p in r.patterns)          # timed beside the unfused sequence
    (e,) = r.e2e
    assert e.outputs_ok and {t.variant for t in e.times} >= {"eager", "torch.compile", "exported", "fused",
                                                             "compile(fused)"}
    composed = {s.op for s in r.sites if s.replaced}
    assert all(e.counts[op]["hits"] > 0 for op in composed)
    assert r.kept == (e.speedups[0].verdict.value != "SLOWER")
