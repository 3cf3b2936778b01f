"""The HTML report's plots: matplotlib figures rendered to inline SVG text (no files, no network, no JavaScript).

Every function takes plain data (lists of dicts built by `report.html`) and returns an `<svg>` element as a
string. Text stays text (`svg.fonttype = none`), so the page is searchable and small; the SVG ids are salted
with a fixed string so that the same archive renders to the same bytes.
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402

_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "kernelloop-report", "font.size": 9,
          "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}
MAX_PANELS = 6   # more workloads than this: one normalised panel instead of one panel each


def to_svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]        # drop the XML prolog and DOCTYPE: the element is inlined in HTML


def _steps(points: list[tuple[float, float | None]]) -> tuple[list[float], list[float]]:
    """Best-so-far of (x, value-or-None) points in x order: the running minimum, from the first value on."""
    xs, ys, best = [], [], math.inf
    for x, v in sorted(points, key=lambda p: p[0]):
        if v is not None and v < best:
            best = v
        if best < math.inf:
            xs.append(x)
            ys.append(best)
    return xs, ys


def progress(series: list[dict]) -> str:
    """Best-so-far kernel time against evaluations (left) and against the run's wall time (right).

    `series`: one dict per workload, {'label', 'points': [{'evaluation', 'wall_s', 'kernel_us' or None}]}.
    Up to MAX_PANELS workloads share two panels in µs; more are drawn relative to each one's final best."""
    normalise = len(series) > MAX_PANELS
    with plt.rc_context(_STYLE):
        fig, (ax_e, ax_t) = plt.subplots(1, 2, figsize=(10, 3.6))
        for s in series:
            pts = s["points"]
            for ax, key in ((ax_e, "evaluation"), (ax_t, "wall_s")):
                xs, ys = _steps([(p[key], p["kernel_us"]) for p in pts])
                if not ys:
                    continue
                if normalise:
                    ys = [y / ys[-1] for y in ys]
                ax.step(xs, ys, where="post", marker=".", label=s["label"] if ax is ax_e else None, lw=1.2)
        ylabel = "best so far / final best" if normalise else "best kernel time so far (µs)"
        ax_e.set(xlabel="evaluations of the workload", ylabel=ylabel, title="against evaluations")
        ax_t.set(xlabel="wall time since the run started (s)", title="against wall time")
        if not normalise and series:
            ax_e.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        return to_svg(fig)


def front(points: list[dict], front_ids: set[str], title: str) -> str:
    """Every passing candidate of a workload by kernel time and registers; the Pareto front joined and marked.
    Where no build reported registers (the interpreter builds nothing), the candidates lie on one line of kernel
    time and the axis says registers were not measured (they were drawn at 0 registers)."""
    measured = any(p["registers"] is not None for p in points)
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(5, 3.4))
        other = [p for p in points if p["candidate"] not in front_ids]
        on = sorted((p for p in points if p["candidate"] in front_ids), key=lambda p: p["kernel_us"])

        def ys(ps):
            return [p["registers"] if measured else 0 for p in ps]
        ax.scatter([p["kernel_us"] for p in other], ys(other), s=14, c="#9aa7b8", label="passed")
        ax.scatter([p["kernel_us"] for p in on], ys(on), s=30, c="#c0392b", marker="D",
                   label="Pareto front (over time, registers, shared memory, compile s)")
        ax.set(xlabel="kernel time (µs)", title=title,
               ylabel="registers per thread" if measured else "registers: not measured")
        if not measured:
            ax.set_yticks([])
        ax.legend(fontsize=7)
        fig.tight_layout()
        return to_svg(fig)


def roofline(points: list[dict], baselines: list[dict], roofs: dict, y_label: str) -> str:
    """Achieved throughput of every measured candidate (and baseline) against arithmetic intensity.

    `points`/`baselines`: {'ai', 'y', 'label'}; `roofs`: {'bandwidth_gbps', 'peak', 'source'} (either may be None).
    The memory roof is a line y = bandwidth * ai (GFLOP/s per GB/s: TFLOP/s = GB/s * ai / 1000)."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(6, 3.8))
        ais = [p["ai"] for p in points + baselines if p["ai"] > 0]
        if ais:
            lo, hi = min(ais) / 4, max(ais) * 4
            bw, peak = roofs.get("bandwidth_gbps"), roofs.get("peak")
            if bw:
                xs = [lo * (hi / lo) ** (i / 50) for i in range(51)]
                ys = [bw * x / 1000 for x in xs]
                if peak:
                    ys = [min(y, peak) for y in ys]
                ax.plot(xs, ys, "k--", lw=1, label=f"roof ({roofs.get('source', '')})"[:70])
            elif peak:
                ax.axhline(peak, color="k", ls="--", lw=1, label="compute roof")
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.scatter([p["ai"] for p in points], [p["y"] for p in points], s=12, c="#2e86c1", alpha=0.7,
                   label=f"candidates ({len(points)})")
        for b in baselines:
            ax.scatter([b["ai"]], [b["y"]], marker="x", s=30, c="#d35400")
            ax.annotate(b["label"], (b["ai"], b["y"]), fontsize=7, xytext=(4, -2), textcoords="offset points")
        ax.set(xlabel="arithmetic intensity (FLOP/byte, from the spec's formulas)", ylabel=y_label,
               title="roofline: every measured candidate")
        ax.legend(fontsize=7, loc="lower right")
        fig.tight_layout()
        return to_svg(fig)


def bandwidth(points: list[dict], copy_gbps: dict[str, float]) -> str:
    """For ops whose spec counts no FLOPs: achieved GB/s per workload, beside the device copy of the same bytes."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(6, 3.6))
        labels = sorted({p["workload"] for p in points})
        for i, w in enumerate(labels):
            ys = [p["y"] for p in points if p["workload"] == w]
            ax.scatter([i] * len(ys), ys, s=12, c="#2e86c1", alpha=0.7)
            if w in copy_gbps:
                ax.hlines(copy_gbps[w], i - 0.3, i + 0.3, colors="k", linestyles="--")
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=7)
        ax.set(ylabel="achieved GB/s (formula bytes / kernel time)", title="bandwidth of every measured candidate "
               "(dashed: device copy)")
        fig.tight_layout()
        return to_svg(fig)
