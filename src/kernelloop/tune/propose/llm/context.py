"""The structured input of the roles: spec and interface, workloads, hardware facts, knowledge, history, parents.

Everything here is derived from what a proposer may see: the spec, the workloads, the device's properties, the
knowledge base and the trials the controller told it about (verdict, measurement, build). Evidence is
filtered to the few numbers that matter for a memory-bound row-wise op: kernel and call time, speed-up over
eager with its interval, bandwidth, share of a device copy, registers and spills.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..interface import op_interface, template_params
from ....base.records import Candidate, OpSpec, Status, Trial, Workload
from ....base.records.device import DeviceProperties

LOG_CHARS = 3000     # compiler/runtime log kept for the debugger
SOURCE_CHARS = 20000  # longest parent source put in a prompt


@dataclass
class Outcome:
    """What became of one candidate on one workload (from the controller's `tell`)."""

    candidate: Candidate
    workload: Workload
    trial: Trial

    @property
    def status(self) -> Status:
        return self.trial.verdict.status

    def evidence(self) -> dict:
        """The filtered evidence of the trial."""
        t = self.trial
        out: dict = {"status": t.verdict.status.value}
        m = t.measurement
        if m is not None:
            out.update(kernel_us=round(m.kernel.median_us, 3),
                       kernel_ci_us=[round(m.kernel.ci_low_us, 3), round(m.kernel.ci_high_us, 3)],
                       call_us=round(m.call.median_us, 3), gbps=round(m.gbps, 1),
                       roofline_fraction=round(m.roofline_fraction, 3) if m.roofline_fraction else None)
            for r in m.ratios:
                if r.baseline == "eager":
                    out["speedup_vs_eager"] = {"speedup": round(r.speedup, 3), "ci": [round(r.ci_low, 3),
                                                                                round(r.ci_high, 3)],
                                               "verdict": r.verdict.value}
        b = t.build
        if b is not None and getattr(b, "kind", "") == "artifact":
            out.update({k: getattr(b, k) for k in ("registers", "spills", "shared_bytes")
                        if getattr(b, k) is not None})
        if t.verdict.status is not Status.PASSED:
            out["message"] = t.verdict.message[:300]
        return out

    def history_row(self) -> dict:
        c = self.candidate
        return {"candidate": c.id, "parents": c.parent_ids, "workload": self.workload.label,
                "config": c.config, "hypothesis": c.hypothesis, **self.evidence()}

    def failure_report(self) -> dict:
        """What the debugger gets: status, message, failing case, error metrics, log tail."""
        v = self.trial.verdict
        build = self.trial.build
        log = v.log or (build.log if build is not None and getattr(build, "kind", "") == "failure" else "")
        return {"candidate": self.candidate.id, "workload": self.workload.label, "status": v.status.value,
                "message": v.message, "failing_case": v.case,
                "error_metrics": [m.model_dump(mode="json") for m in v.metrics],
                "log_tail": log[-LOG_CHARS:]}


@dataclass
class Context:
    """Everything the roles are shown, kept by the proposer across asks."""

    spec: OpSpec
    workloads: list[Workload]
    hardware: DeviceProperties
    knowledge: list[dict] = field(default_factory=list)
    seeds: dict[str, Candidate] = field(default_factory=dict)     # starting templates, by candidate id
    outcomes: list[Outcome] = field(default_factory=list)

    # -- known candidates ------------------------------------------------------------------------------------
    def candidates(self) -> dict[str, Candidate]:
        """Every candidate a proposal may name as a parent: the seeds and everything told so far."""
        out = dict(self.seeds)
        for o in self.outcomes:
            out.setdefault(o.candidate.id, o.candidate)
        return out

    def best(self, workload: Workload, n: int = 3) -> list[Outcome]:
        """The fastest passing outcomes on a workload."""
        ok = [o for o in self.outcomes if o.workload.id == workload.id and o.status is Status.PASSED
              and o.trial.measurement is not None]
        return sorted(ok, key=lambda o: o.trial.measurement.kernel.median_us)[:n]

    # -- rendered pieces -------------------------------------------------------------------------------------
    def interface_json(self) -> str:
        """The interface, one top-level field per line; the rules as a list."""
        iface = op_interface(self.spec, self.workloads)
        rules = iface.pop("rules")
        return compact(iface) + "\nrules:\n" + "\n".join(f"- {r}" for r in rules)

    def hardware_json(self) -> str:
        return compact(self.hardware.model_dump(mode="json"))

    def knowledge_text(self) -> str:
        if not self.knowledge:
            return "(no knowledge base loaded)"
        return "\n".join(f"- {e['id']} [{e.get('confidence', 'fact')}]: {e['statement']}" for e in self.knowledge)

    def history_text(self, limit: int = 40) -> str:
        rows = [o.history_row() for o in self.outcomes[-limit:]]
        return "\n".join(json.dumps(r, sort_keys=True) for r in rows) if rows else "(nothing tried yet)"

    def parents_text(self, ids: list[str], workload: Workload) -> str:
        """Code, configuration, measurements and evidence of the named parents."""
        known = self.candidates()
        parts = []
        for cid in ids:
            c = known.get(cid)
            if c is None:
                continue
            seen = [o.evidence() for o in self.outcomes if o.candidate.id == cid and o.workload.id == workload.id]
            params = template_params(self.spec).get(c.template) if cid in self.seeds else None
            head = {"candidate": cid, "template": c.template, "config": c.config,
                    "measured": seen[-1] if seen else "not measured on this workload"}
            if params:
                head["template_params"] = params
            parts.append(f"### parent {cid}\n{json.dumps(head, sort_keys=True)}\n```python\n"
                         f"{c.source[:SOURCE_CHARS]}\n```")
        return "\n\n".join(parts) if parts else "(no parent: write a kernel from scratch)"

    def candidates_text(self, workload: Workload) -> str:
        """The ids a plan may start from: seeds and the best passing candidates on the workload."""
        lines = [f"- {cid}: starting template '{c.template}' (not measured)" for cid, c in self.seeds.items()]
        for o in self.best(workload):
            e = o.evidence()
            lines.append(f"- {o.candidate.id}: {o.candidate.label} kernel {e.get('kernel_us')} us, "
                         f"{e.get('speedup_vs_eager', {}).get('speedup', '?')}x eager")
        return "\n".join(lines) or "(none)"


def compact(d: dict) -> str:
    """'key: <compact JSON>' per top-level field."""
    return "\n".join(f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in d.items())


def hardware_facts(device: str, kb) -> tuple[DeviceProperties, list[dict]]:
    """(device properties, knowledge entries applicable to it) for the prompts."""
    from ....core.device import device_properties
    props = device_properties(device)
    entries: list[dict] = []
    if kb is not None:
        from ...knowledge.loader import applies
        for f in kb.facts.values():
            if applies(f.applies_to, props):
                entries.append({"id": f.id, "statement": f.statement})
        for e in kb.experience.values():
            entries.append({"id": e.id, "statement": e.statement, "confidence": e.confidence})
    return props, entries


__all__ = ["Context", "Outcome", "compact", "hardware_facts"]
