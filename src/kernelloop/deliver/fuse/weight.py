"""Time shares from a capture report (kernelloop.deliver.capture): how much of the measured run an occurrence's ops are.

Each step of an occurrence is charged what the capture measured where it ran: a step inside a module that has
a card (a Linear, a norm, a softmax/attention call site) is charged the card's time per module path, once per
path; any other step is charged its ATen overload's census entry per call (matched on the overload and the
innermost module's class). On CUDA that is device time over the run's device time; on CPU (no times) it is ATen
calls over the run's ATen calls, a proxy.
"""

from __future__ import annotations

import torch.fx as fx

from ..capture.records import CaptureReport
from . import graph as G


def share(report: CaptureReport, nodes: list[fx.Node]) -> float:
    timed = report.profiled and report.device_time_us
    total = report.device_time_us if timed else max(report.aten_calls, 1)
    charged_paths: set[str] = set()
    amount = 0.0
    for n in nodes:
        if G.is_view(n):
            continue
        path, cls = G.module_of(n)
        cards = report.card_for(path) if path else []
        if cards:
            if path not in charged_paths:
                charged_paths.add(path)
                for c in cards:
                    cost = (c.device_time_us or 0.0) if timed else sum(v.count for v in c.aten)
                    amount += cost / len(c.paths)
            continue
        entry = next((e for e in report.census if e.overload == G.target(n) and cls in e.module_classes), None)
        if entry is not None:
            amount += ((entry.device_time_us or 0.0) / entry.count) if timed else 1.0
    return min(amount / total, 1.0) if total else 0.0
