"""The honest row-wise LayerNorm kernel of tests/fixtures/candidates/honest_layernorm.py, for the tests that build
candidates around it (a launch that misbehaves, caches, hangs or over-fits a shape)."""

from pathlib import Path

HONEST = (Path(__file__).resolve().parents[1] / "fixtures" / "candidates" / "honest_layernorm.py").read_text()
LN_KERNEL = HONEST[:HONEST.index("\n\ndef launch(")] + "\n"   # its imports and the @triton.jit kernel `_ln`
