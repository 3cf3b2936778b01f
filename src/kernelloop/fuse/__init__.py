"""Fusion from the model's graph, part 1: pattern discovery.

    report = discover(model, example_inputs)      # DiscoveryReport: ranked candidates, or .error
    for c in report.candidates: c.signature.family, c.signature.op_sequence, c.occurrences, c.saved_bytes_total

The model is exported with torch.export (strict=False) and its ATen graph searched for fusion candidates: GEMM
gating (SwiGLU), GEMM epilogues, residual add + norm, scale + mask + softmax, rotary embedding, and generic
elementwise chains next to a GEMM or norm (see patterns.py). Nothing here writes kernels yet (docs/fusion.md).
"""

from .discover import discover
from .records import Candidate, DiscoveryError, DiscoveryReport, Occurrence, Signature, Step

__all__ = ["Candidate", "DiscoveryError", "DiscoveryReport", "Occurrence", "Signature", "Step", "discover"]
