"""`kernelloop report RUN`: one self-contained HTML file of a run, read from its archive (never written to).

Sections, listed in a contents bar that stays at the top of the window: the run's provenance; best-so-far against evaluations and wall time per workload; verdict counts with
every failure's reason; the per-workload table (medians, confidence intervals, every baseline); the Pareto front;
a roofline with every measured candidate; the lineage tree; the optimisation log, in which each trial stands with
the strategy's last decision for its workload (the rationale), the proposer's hypothesis and what the
measurement made of it. A run on the Triton interpreter gets no speed verdicts: its baseline rows say "not a speed
claim" and its log gives ratios without faster/slower. Plots are matplotlib SVG inlined in the page (layout rules in
`figures`); CSS is inline; there is no script and no network reference, so the file opens offline and can be
mailed or archived as it is.
"""

from __future__ import annotations

import datetime as _dt
import json
from importlib import resources
from pathlib import Path

from ...core.archive import Archive
from ...core.bench.stats import ratio_verdict
from ...base.records.summary import RunSummary
from ...base.records import OpSpec, Workload
from . import figures
from .summary import run_summary



def _fmt_cfg(cfg: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "template")


def rationale(payload: dict) -> str:
    """One line for a strategy's `search` event: what it decided and why."""
    p = dict(payload)
    head = p.pop("action", None) or p.pop("kind", "")
    p.pop("kind", None)
    p.pop("strategy", None)
    p.pop("workload", None)
    parts = [str(head)]
    if p.get("reason"):
        parts.append(str(p.pop("reason")))
    if isinstance(p.get("parent"), dict):
        parts.append("from " + _fmt_cfg(p.pop("parent")))
    if isinstance(p.get("config"), dict):
        parts.append("→ " + _fmt_cfg(p.pop("config")))
    for k in ("fired", "advice", "not_evaluable"):
        if p.get(k):
            parts.append(f"{k.replace('_', ' ')}: {', '.join(map(str, p.pop(k)))}")
        else:
            p.pop(k, None)
    rest = {k: v for k, v in p.items() if v not in (None, "", [], {})}
    if rest:
        parts.append(json.dumps(rest, sort_keys=True, default=str)[:240])
    return "; ".join(parts)


def _hypotheses(cand, report) -> tuple[list[str], list[str]]:
    """(stated hypotheses, their outcomes) of a trial: the candidate's own text and the profiled report's."""
    stated = [cand.hypothesis] if cand is not None and cand.hypothesis else []
    outcomes = []
    if report is not None:
        for h in report.hypotheses:
            mag = f" {h.magnitude:+.0%}" if h.magnitude is not None else ""
            stated.append(f"{h.metric} {h.direction.value}{mag}" + (f" ({h.note})" if h.note else ""))
        for o in report.outcomes:
            ch = f" ({o.change:+.1%})" if o.change is not None else ""
            outcomes.append(f"{o.hypothesis.metric} {o.hypothesis.direction.value}: {o.status}{ch}")
    return stated, outcomes


def _measured_verdict(t, parents_us: list[float], best_before: float | None, interpreter: bool = False) -> str:
    """What the measurement says of the step, against its parent (when measured on this workload) and the best.
    Interpreter timings get the ratio without a faster/slower word: they are not kernel performance."""
    if t.measurement is None:
        return f"not measured ({t.verdict.status.value})"
    us = t.measurement.kernel.median_us
    words = []
    if parents_us:
        r = min(parents_us) / us
        word = {"FASTER": "faster than", "SLOWER": "slower than"}.get(ratio_verdict(r).value, "same as")
        words.append(f"{r:.3f}× its parent" + (" (interpreter timing)" if interpreter else f" ({word})"))
    if best_before is None:
        words.append("first measured")
    elif us < best_before:
        words.append(f"new best ({best_before / us:.3f}× the best before)")
    else:
        words.append(f"{best_before / us:.3f}× the best so far")
    return "; ".join(words)


def build_context(archive: Archive, run_id: str | None = None, *, source: str = "") -> dict:
    """Everything the template shows: the `RunSummary` record, plain data and SVG strings."""
    summary = run_summary(archive, run_id)
    rid = summary.run
    run = archive.get_run(rid)
    spec = OpSpec.model_validate(run["spec"])
    workloads = [Workload.model_validate(w) for w in run["options"].get("workloads", [])]
    labels = {w.id: w.label for w in workloads}
    trials = sorted(archive.trials(rid), key=lambda t: t.index)
    cands = {}
    for t in trials:
        if t.candidate_id not in cands:
            cands[t.candidate_id] = archive.get_candidate(t.candidate_id)
    per_w: dict[str, list] = {}
    for t in trials:
        per_w.setdefault(t.workload_id, []).append(t)
    t0 = run["created"]
    series = [{"label": w.label,
               "points": [{"evaluation": i + 1, "wall_s": t.finished - t0,
                           "kernel_us": t.measurement.kernel.median_us if t.measurement is not None else None}
                          for i, t in enumerate(per_w.get(w.id, []))]}
              for w in workloads]   # best so far
    lineage, with_parents = _lineage(trials, cands)
    return {
        "title": f"kernelloop report: {summary.op} ({rid})", "summary": summary, "spec": spec,
        "source": source, "environment": run["environment"], "options": run["options"],
        "created": _dt.datetime.fromtimestamp(t0, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "progress_svg": figures.progress(series[:64]),
        **_fronts_and_roofline(archive, rid, spec, workloads, per_w, cands),
        "lineage": lineage, "with_parents": with_parents, "candidates": len(cands),
        "log": _optimisation_log(archive, rid, trials, cands, labels, summary.interpreter),
        "workload_labels": labels,
        "baseline_names": _baseline_names(summary),
        "integrity_line": summary.integrity.line() if summary.integrity is not None else "",
        "max_panels": figures.MAX_PANELS,
    }


def _fronts_and_roofline(archive: Archive, rid: str, spec: OpSpec, workloads: list[Workload], per_w: dict,
                         cands: dict) -> dict:
    """Each workload's Pareto front (figure and rows), and the roofline (by FLOPs) or bandwidth figure with the
    ceilings it is drawn under: the first archived profile's, else the device copy's memory roof."""
    fronts, roof_pts, roof_base, bw_pts, copy_gbps = [], [], [], [], {}
    roofs = {"bandwidth_gbps": None, "peak": None, "source": ""}
    by_flops = any(spec.flops(w.axes, w.dtype) > 0 for w in workloads)
    for w in workloads:
        nbytes, flops = spec.bytes_moved(w.axes, w.dtype), spec.flops(w.axes, w.dtype)
        ai = flops / nbytes if nbytes > 0 else 0.0
        passed = [t for t in per_w.get(w.id, []) if t.measurement is not None]
        for t in passed:
            us = t.measurement.kernel.median_us
            y = flops / (us * 1e-6) / 1e12 if by_flops else nbytes / (us * 1e-6) / 1e9
            (roof_pts if by_flops else bw_pts).append({"ai": ai, "y": y, "label": t.candidate_id,
                                                       "workload": w.label})
            rep = archive.profile(rid, t.id)
            if rep is not None and rep.roofline is not None and roofs["bandwidth_gbps"] is None:
                r = rep.roofline
                if r.bandwidth_gbps or r.peak_tflops:
                    roofs = {"bandwidth_gbps": r.bandwidth_gbps, "peak": r.peak_tflops, "source": r.ceiling_source}
        for name, (bm, _note) in archive.baselines(rid, w.id).items():
            if bm is None:
                continue
            gbps = nbytes / (bm.kernel.median_us * 1e-6) / 1e9
            if name == "copy":
                copy_gbps[w.label] = gbps
                if roofs["bandwidth_gbps"] is None:
                    roofs = {"bandwidth_gbps": gbps, "peak": None,
                             "source": f"memory roof from the device copy of {w.label}; no compute ceiling archived"}
            elif by_flops and len(workloads) <= 3:
                roof_base.append({"ai": ai, "y": flops / (bm.kernel.median_us * 1e-6) / 1e12, "label": name})
        if passed:
            drawn = sum(1 for f in fronts if f["svg"])
            fronts.append(_front(archive.front(rid, w.id), passed, cands, w.label, index=len(fronts),
                                 draw=drawn < figures.MAX_PANELS))
    if by_flops:
        roof_svg = figures.roofline(roof_pts, roof_base, roofs, "achieved TFLOP/s (formula FLOPs / kernel time)")
    else:
        roof_svg = figures.bandwidth(bw_pts, copy_gbps)
    return {"fronts": fronts, "roofline_svg": roof_svg, "roofs": roofs, "by_flops": by_flops}


def _front(entries: list, passed: list, cands: dict, label: str, index: int, draw: bool) -> dict:
    """One workload's Pareto front: its figure (when `draw` and two objectives were measured) and its rows."""
    regs = {t.candidate_id: getattr(t.build, "registers", None) for t in passed}
    pts = [{"candidate": t.candidate_id, "kernel_us": t.measurement.kernel.median_us,
            "registers": regs[t.candidate_id]} for t in passed]
    # a plot needs two measured objectives: without registers (the interpreter's builds) the table alone
    has_regs = any(p["registers"] is not None for p in pts)
    svg = figures.front(pts, {c for c, _ in entries}, label, key=f"front-{index}") if has_regs and draw else ""
    return {"label": label, "svg": svg, "registers_measured": has_regs, "anchor": f"pareto-{index}",
            "rows": [{"candidate": c, "label": cands[c].label if cands.get(c) else c, **obj} for c, obj in entries]}


def _lineage(trials: list, cands: dict) -> tuple[list[dict], int]:
    """Every candidate of the run under its parents (parents outside the run are named, not expanded), and how
    many candidates have parents."""
    best_us: dict[str, float] = {}
    for t in trials:
        if t.measurement is not None:
            best_us[t.candidate_id] = min(best_us.get(t.candidate_id, float("inf")), t.measurement.kernel.median_us)
    children: dict[str | None, list[str]] = {}
    for cid, c in cands.items():
        ps = [p for p in (c.parent_ids if c else []) if p in cands]
        for p in ps or [None]:
            children.setdefault(p, []).append(cid)

    def node(cid: str, seen: frozenset) -> dict:
        c = cands[cid]
        kids = [node(k, seen | {cid}) for k in children.get(cid, []) if k not in seen]
        return {"id": cid, "label": c.label if c else cid, "proposer": c.proposer if c else "",
                "best_us": best_us.get(cid), "outside": [p for p in (c.parent_ids if c else []) if p not in cands],
                "children": kids}
    lineage = [node(cid, frozenset()) for cid in children.get(None, [])]
    return lineage, sum(1 for c in cands.values() if c and c.parent_ids)


def _optimisation_log(archive: Archive, rid: str, trials: list, cands: dict, labels: dict,
                      interpreter: bool = False) -> list[dict]:
    """Each trial with the strategy's last decision for its workload before it started, its hypotheses and what
    its measurement says of them."""
    decisions = [e for e in archive.events(rid) if e["kind"] == "search"]
    log, best_before, measured_by = [], {}, {}
    di = 0
    last: dict[str, str] = {}
    for t in trials:
        while di < len(decisions) and decisions[di]["t"] <= t.started:
            p = decisions[di]["payload"]
            last[p.get("workload") or "*"] = rationale(p)
            di += 1
        c = cands.get(t.candidate_id)
        rep = archive.profile(rid, t.id)
        stated, outcomes = _hypotheses(c, rep)
        parents_us = [measured_by[(p, t.workload_id)] for p in (c.parent_ids if c else [])
                      if (p, t.workload_id) in measured_by]
        measured = _measured_verdict(t, parents_us, best_before.get(t.workload_id), interpreter)
        if t.measurement is not None:
            us = t.measurement.kernel.median_us
            measured_by[(t.candidate_id, t.workload_id)] = us
            best_before[t.workload_id] = min(best_before.get(t.workload_id, us), us)
        log.append({"index": t.index, "workload": labels.get(t.workload_id, t.workload_id),
                    "proposer": c.proposer if c else "", "candidate": c.label if c else t.candidate_id,
                    "parents": ", ".join(p[:12] for p in (c.parent_ids if c else [])),
                    "rationale": last.get(t.workload_id) or last.get("*", ""),
                    "hypotheses": stated, "outcomes": outcomes, "measured": measured,
                    "status": t.verdict.status.value,
                    "kernel_us": t.measurement.kernel.median_us if t.measurement is not None else None})
    return log


def _baseline_names(summary: RunSummary) -> list[str]:
    names = {b for w in summary.workloads if w.confirmed is not None for b in w.confirmed.baselines}
    return sorted(names, key=lambda b: (b != "eager", b != "torch.compile", b != "copy", b))


def render(context: dict) -> str:
    import jinja2
    text = resources.files("kernelloop.deliver.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.filters["us"] = lambda v: "–" if v is None else f"{v:.2f}"
    env.filters["ci"] = lambda v: "–" if not v or v[0] is None else f"[{v[0]:.2f}, {v[1]:.2f}]"
    return env.from_string(text).render(**context, markup=jinja2.utils.markupsafe.Markup)


def write_report(archive_path: Path, out: Path, run_id: str | None = None) -> Path:
    """Read `archive_path` (plain or compressed: .xz, .gz; never modified) and write the HTML report to `out`."""
    with Archive(archive_path, readonly=True) as archive:
        ctx = build_context(archive, run_id, source=str(archive_path))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(ctx), encoding="utf-8")
    return out
