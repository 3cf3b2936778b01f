"""Terminal rendering of a run summary record (`RunSummary`) with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ...base.records import ordered_axes
from ...base.records.integrity import RunIntegrity
from ...base.records.run import Throughput
from ...base.records.summary import FailureGroup, RunSummary, SpeedupSummary, WorkloadSummary

INTERPRETER_BANNER = ("No CUDA device: running the Triton interpreter on CPU tensors. Verdicts are real; "
                      "timings are CPU-interpreter timings, not kernel performance.")
INTERPRETER_TIMING = "not a speed claim (interpreter timing)"   # for FASTER/SAME/SLOWER there, as the report


def _word(verdict, interpreter: bool) -> str:
    """A speed-up's verdict as printed: FASTER/SAME/SLOWER on a GPU; in the interpreter, that it is none."""
    return INTERPRETER_TIMING if interpreter else verdict.value


def _speedup(s: SpeedupSummary | None, interpreter: bool) -> str:
    if not s:
        return "-"
    lo, hi = s.ci
    return f"{s.speedup:.2f}x [{lo:.2f},{hi:.2f}] {_word(s.verdict, interpreter)}"


def _plain(label: str) -> str:
    return label.replace("[", "(").replace("]", ")")   # no rich markup from a configuration label


def render(summary: RunSummary, console: Console | None = None) -> None:
    """The run summary record as rich tables: header, trials by status, best per workload, and the sections below."""
    c = console or Console(emoji=False)
    c.print(f"[bold]run[/bold] {escape(summary.run)}  op={escape(summary.op)}  status={summary.status.value}  "
            f"device={escape(summary.device or '')} {escape(summary.gpu or '')}  torch {summary.torch}  triton {summary.triton}")
    if summary.interpreter:
        c.print(f"[yellow]{INTERPRETER_BANNER}[/yellow]")
    if summary.integrity is not None:
        render_integrity(summary.integrity, c)
    if summary.prior:
        files = ", ".join(f"{f.path} (sha256 {f.sha256[:12]})" for f in summary.prior.files)
        c.print(f"search warm-started from {escape(files)}: {summary.prior.configurations} configurations")
    counts = Table(title="trials by status")
    counts.add_column("status")
    counts.add_column("count", justify="right")
    for k, v in sorted(summary.counts.items()):
        counts.add_row(k, str(v))
    c.print(counts)
    render_best(summary, c)
    render_throughput(summary.throughput, c)
    render_processes(summary.workloads, c, summary.interpreter)
    render_sanitizer(summary.workloads, c)
    render_failures(summary.failures, c)
    render_hypotheses(summary, c)
    if summary.llm:
        from ...tune.propose.llm.costs import render_llm
        render_llm(summary.llm, c)


def render_best(summary: RunSummary, c: Console) -> None:
    """Best per workload (confirmed beside the baselines when it was), and in the interpreter the unresolved ties."""
    rows = summary.workloads
    measured = [w.confirmed or (w.best.search if w.best else None) for w in rows]
    baselines = sorted({b for m in measured if m for b in m.speedups if b != "copy"},
                       key=lambda b: (b != "eager", b != "torch.compile", b))
    t = Table(title="best per workload (confirmed beside the baselines when available)")
    for col in ("workload", "passed", "config", "kernel µs", "call µs", "GB/s", "% copy",
                *[f"vs {b}" for b in baselines]):
        t.add_column(col, overflow="fold")
    for w, m in zip(rows, measured):
        if not m:
            t.add_row(w.label, f"{w.passed}/{w.trials}", "no passing candidate", *["-"] * (4 + len(baselines)))
            continue
        roof = f"{100 * m.roofline_fraction:.1f}" if m.roofline_fraction else "-"
        config = (w.best.label if w.best else "").replace("(", " ").replace(")", "").replace(",", " ")
        second = w.best.runner_up if w.best else None
        if summary.interpreter and second and second.overlaps:
            config = f"tie (intervals overlap): {config}"
        t.add_row(w.label, f"{w.passed}/{w.trials}", config, f"{m.kernel_us:.2f}", f"{m.call_us:.2f}",
                  f"{m.gbps:.0f}", roof, *[_speedup(m.speedups.get(b), summary.interpreter) for b in baselines])
    c.print(t)
    if not summary.interpreter:
        return
    for w in rows:
        second = w.best.runner_up if w.best else None
        if second and second.overlaps:
            lo, hi = w.best.search.kernel_ci_us
            slo, shi = second.kernel_ci_us
            c.print(f"[yellow]{escape(w.label)}: no winner — {_plain(w.best.label)} [{lo:.2f}, {hi:.2f}] µs "
                    f"and {_plain(second.label)} [{slo:.2f}, {shi:.2f}] µs overlap (interpreter timings); "
                    f"the row above is the lower median only[/yellow]")


def render_hypotheses(summary: RunSummary, c: Console) -> None:
    """How the planner's hypotheses fared per workload, and the profiling time (not part of any kernel time)."""
    hyp = [(w.label, w.hypotheses) for w in summary.workloads if w.hypotheses is not None]
    if not hyp:
        return
    h = Table(title="planner hypotheses (outcome against the parent)")
    for col in ("workload", "with hypotheses", "confirmed", "refuted", "inconclusive", "hit rate",
                "Nsight Compute profiles"):
        h.add_column(col)
    for label, r in hyp:
        rate = f"{100 * r.hit_rate:.0f} %" if r.hit_rate is not None else "-"
        h.add_row(label, str(r.trials), str(r.confirmed), str(r.refuted), str(r.inconclusive), rate,
                  f"{r.profiled}/{r.reports}")
    c.print(h)
    if summary.costs.profile_s is not None:
        c.print(f"[dim]evidence (profiling) time: {summary.costs.profile_s:.1f} s, not part of any "
                f"kernel time[/dim]")


def _share(x: float | None) -> str:
    return f"{100 * x:.0f} %" if x is not None else "-"


def render_integrity(integrity: RunIntegrity, c: Console) -> None:
    """The archive's integrity (kernelloop.core.archive.integrity): red when rows were edited, yellow when
    unauthenticated."""
    style = {"authenticated": "green", "tampered": "bold red"}.get(integrity.state, "yellow")
    c.print(f"[{style}]{escape(integrity.line())}[/{style}]")


def render_throughput(tp: Throughput | None, c: Console) -> None:
    """Trials per minute, each device's busy share of the search's wall time, the time lost waiting for builds."""
    if not tp:
        return
    rate = f"{tp.trials_per_minute:.1f} trials/min" if tp.trials_per_minute is not None else "- trials/min"
    c.print(f"throughput: {rate} ({tp.trials} trials in {tp.wall_s:.1f} s of search); build wait "
            f"{tp.build_wait_s:.1f} s ({_share(tp.build_wait_fraction)} of wall, devices waiting for builds)")
    for d in tp.devices:
        model = f" ({d.model})" if d.model and d.model != d.device else ""
        c.print(f"  {escape(d.device)}{escape(model)}: {d.trials} trials, busy {_share(d.busy_fraction)} of wall "
                f"(verifying {d.verify_s:.1f} s, timing {d.bench_s:.1f} s)")


def render_processes(rows: list[WorkloadSummary], c: Console, interpreter: bool = False) -> None:
    """The confirmation in fresh worker processes: each process's median, the spread between them, and the stated
    interval that covers it (docs/timing.md); in the interpreter its speed-ups carry no FASTER/SLOWER verdict."""
    confirmed = [(w.label, w.confirmed.across_processes) for w in rows
                 if w.confirmed is not None and w.confirmed.across_processes is not None]
    if not confirmed:
        return
    t = Table(title="confirmed across fresh processes (the stated interval covers the spread between them)")
    for col in ("workload", "processes", "kernel µs per process", "spread", "within", "stated µs", "speed-ups"):
        t.add_column(col, overflow="fold")
    for label, x in confirmed:
        per = ", ".join(f"{p.kernel_us['candidate']:.2f}" for p in x.processes)
        lo, hi = x.interval_us
        ups = "; ".join(f"{b} {s.speedup:.2f}x [{s.interval[0]:.2f}, {s.interval[1]:.2f}] "
                        f"{_word(s.verdict, interpreter)}" for b, s in x.speedups.items())
        stated = f"{x.kernel_us:.2f} [{lo:.2f}, {hi:.2f}] (±{100 * x.half_width:.1f} %)"
        t.add_row(label, str(len(x.processes)), per, f"{100 * x.spread['candidate']:.1f} %",
                  f"±{100 * x.within:.1f} %", stated, ups)
    c.print(t)


def render_sanitizer(rows: list[WorkloadSummary], c: Console) -> None:
    """compute-sanitizer over the winners before confirmation (tune/select/sanitize.py): REJECTED with the tool and its
    first finding, clean, or why it did not run (never a pass)."""
    checks = [(w.label, x) for w in rows for x in w.sanitizer]
    if not checks:
        return
    t = Table(title="compute-sanitizer before confirmation (a finding is REJECTED; not run is no pass)")
    for col in ("workload", "candidate", "small shape", "outcome", "tools", "verdict / reason"):
        t.add_column(col, overflow="fold")
    for label, x in checks:
        outcome = {"findings": "[red]REJECTED[/red]", "clean": "clean", "not_run": "[yellow]not run[/yellow]",
                   "error": "[yellow]error[/yellow]", "off": "off (--no-sanitize)"}.get(x.status, x.status)
        tools = ", ".join(f"{r.tool} {r.status}" for r in x.tools) or "-"
        shape = "x".join(str(v) for v in ordered_axes(x.workload or {}).values()) or "-"
        why = x.verdict or x.reason or "-"
        t.add_row(label, _plain(x.candidate_label or x.candidate), shape, outcome, tools, _plain(why[:400]))
    c.print(t)


def render_failures(groups: list[FailureGroup], c: Console, examples: int = 2) -> None:
    """Failed trials grouped by reason: count, status, and the first trials' cases and messages."""
    if not groups:
        return
    t = Table(title="failures by reason")
    for col in ("reason", "status", "trials", "stage", "failed on (case)", "message"):
        t.add_column(col, overflow="fold")
    for g in groups:
        for i, e in enumerate(g.trials[:examples]):
            stage = (e.stage or "-") + (f" ({e.at})" if e.at else "") + (f", {e.signal}" if e.signal else "")
            t.add_row(g.reason if i == 0 else "", g.status if i == 0 else "",
                      str(g.count) if i == 0 else "", stage, e.case_label or "-", e.message[:240])
        if g.count > examples:
            t.add_row("", "", "", "", f"... and {g.count - examples} more", "")
    c.print(t)
