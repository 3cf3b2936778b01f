"""discover(model, example_inputs) -> DiscoveryReport: export, match, group by signature, estimate, rank."""

from __future__ import annotations

import torch

from ..capture.records import CaptureReport
from . import graph as G
from . import patterns, signature
from . import weight as W
from .records import Candidate, DiscoveryError, DiscoveryReport


def _error(model, stage: str, e: BaseException, message: str | None = None) -> DiscoveryReport:
    cls = type(model)
    return DiscoveryReport(model_class=f"{cls.__module__}.{cls.__qualname__}", torch_version=torch.__version__,
                           graph_nodes=0, error=DiscoveryError(stage=stage, error_type=type(e).__name__,
                                                               message=message or str(e) or type(e).__name__))


def discover(model: torch.nn.Module, example_inputs, *, capture_report: CaptureReport | None = None,
             example_kwargs: dict | None = None) -> DiscoveryReport:
    """The fusion candidates of `model` on `example_inputs` (a tensor or a tuple of them), ranked best first.

    Never raises for a model that does not export or bad input: the report's `error` says what went wrong.
    With `capture_report` (kernelloop.deliver.capture of the same model) each occurrence carries its time share and the
    ranking sorts by saved bytes x share; without, by saved bytes."""
    if not isinstance(model, torch.nn.Module):
        return _error(model, "input", TypeError(), f"model is a {type(model).__name__}, not a torch.nn.Module")
    try:
        g = G.export_graph(model, example_inputs, example_kwargs)
    except G.ExportFailed as e:
        return _error(model, "export", e.__cause__ or e, str(e))
    return discover_graph(model, g, capture_report=capture_report)


def discover_graph(model: torch.nn.Module, g, *, capture_report: CaptureReport | None = None) -> DiscoveryReport:
    """Discovery on the model's already exported ATen graph `g` (what `discover` does after exporting)."""
    try:
        matches = patterns.find(g)
        params = G.param_names(g)
        groups: dict[str, tuple] = {}
        for m in matches:
            sig, occ, rels = signature.canonical(m, params)
            if capture_report is not None:
                occ = occ.model_copy(update={"share": W.share(capture_report, m.nodes)})
            entry = groups.setdefault(sig.key, (sig, [], []))
            entry[1].append(occ)
            entry[2].append(rels | signature.alignment(occ.bindings))
    except Exception as e:  # noqa: BLE001 - a graph the matchers do not expect is reported, not raised
        return _error(model, "discover", e, f"{type(e).__name__}: {e}")
    cands = []
    for sig, occs, rels in groups.values():
        held = set.intersection(*rels)
        total = sum(o.saved_bytes for o in occs)
        sh = sum(o.share or 0.0 for o in occs) if capture_report is not None else None
        cands.append(dict(signature=sig, constraints=sorted(held), occurrences=occs,
                          saved_bytes_per_occurrence=max(o.saved_bytes for o in occs), saved_bytes_total=total,
                          share=sh, score=float(total) * (sh if sh is not None else 1.0)))
    cands.sort(key=lambda c: (-c["score"], -c["saved_bytes_total"], c["signature"].family))
    cls = type(model)
    return DiscoveryReport(model_class=f"{cls.__module__}.{cls.__qualname__}", torch_version=torch.__version__,
                           graph_nodes=sum(1 for n in g.nodes if n.op == "call_function"),
                           weighted=capture_report is not None,
                           candidates=[Candidate(rank=i + 1, **c) for i, c in enumerate(cands)])
