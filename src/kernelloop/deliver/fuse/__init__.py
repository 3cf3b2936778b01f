"""Fusion from the model's graph: discover patterns, realise them as verified ops, keep a pattern table, compose.

    report = discover(model, example_inputs)      # DiscoveryReport: ranked candidates, or .error
    result = fuse(model, [example_inputs], out="fused", budget=2)   # FuseResult: .report, .model

`discover` exports the model with torch.export (strict=False) and searches its ATen graph for fusion candidates
(patterns.py). `fuse` goes on: each candidate becomes an op whose reference is the model's own subgraph (opgen,
emit), realised through the ordinary loop or re-verified from the pattern table (realise, table), composed back
into the exported graph (compose) and checked end to end (endtoend). See docs/fusion.md.
"""

from .discover import discover
from .pipeline import FuseError, FuseReport, FuseResult, PatternReport, fuse
from .records import Candidate, DiscoveryError, DiscoveryReport, Occurrence, Signature, Step
from .table import PatternEntry, PatternTable

__all__ = ["Candidate", "DiscoveryError", "DiscoveryReport", "FuseError", "FuseReport", "FuseResult", "Occurrence",
           "PatternEntry", "PatternReport", "PatternTable", "Signature", "Step", "discover", "fuse"]
