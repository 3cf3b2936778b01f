"""The HTML report's plots: matplotlib figures rendered to inline SVG text (no files, no network, no JavaScript).

Every function takes plain data (lists of dicts built by `report.html`) and returns an `<svg>` element as a
string. Text stays text (`svg.fonttype = none`), so the page is searchable and small; the SVG ids are salted
with a fixed string so that the same archive renders to the same bytes.

Layout rules, checked in a browser by tests/report/test_report_layout.py: legends sit outside the data area
(below or beside the axes, inside the figure); an axis whose plotted values span more than a decade is
logarithmic; evaluation counts get integer ticks; only major ticks of a log axis are labelled, in plain numbers.
Each figure names its parts with stable ids (`KEY-ax-N`, `KEY-ax-N-data`, `KEY-ax-N-xaxis`/`-yaxis`, their
`-label`/`-offset` texts, `KEY-legend`) so that a page script can find axes, tick labels and legends.
"""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, no GUI toolkit
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "kernelloop-report", "font.size": 9,
          "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False}
MAX_PANELS = 6   # more workloads than this: one normalised panel instead of one panel each
DECADE = 10.0    # a plotted range wider than this ratio gets a log axis


def to_svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]        # drop the XML prolog and DOCTYPE: the element is inlined in HTML


def _plain(v: float, _pos=None) -> str:
    """A log axis's tick label as a plain number (1,000 rather than 10³; 0.001 and 1e-08 below one)."""
    return f"{v:,.0f}" if v >= 1 else f"{v:.2g}"


def spans_decades(values) -> bool:
    vs = [v for v in values if v is not None and v > 0]
    return bool(vs) and max(vs) / min(vs) > DECADE


def _log(axis, values) -> None:
    """Logarithmic `axis` (ax.xaxis or ax.yaxis) for `values`: major ticks at 1, 2, 5 × 10^k over up to two
    decades, at 10^k over more, labelled in plain numbers; minor ticks unlabelled (matplotlib labels the minor
    ticks of short log ranges, which then overlap)."""
    vs = [v for v in values if v is not None and v > 0]
    decades = math.log10(max(vs) / min(vs)) if vs else 1.0
    (axis.axes.set_xscale if axis is axis.axes.xaxis else axis.axes.set_yscale)("log")
    subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(_plain))
    axis.set_minor_formatter(NullFormatter())


def _log_if_decades(axis, values) -> None:
    if spans_decades(values):
        _log(axis, values)


def name_parts(fig, key: str, legend=None) -> None:
    """Stable ids on the figure's axes, data areas, axis groups, axis labels and legend (see the module doc)."""
    fig.set_gid(key)
    for i, ax in enumerate(fig.axes):
        base = f"{key}-ax-{i}"
        ax.set_gid(base)
        ax.patch.set_gid(f"{base}-data")
        for name, axis in (("xaxis", ax.xaxis), ("yaxis", ax.yaxis)):
            axis.set_gid(f"{base}-{name}")
            axis.label.set_gid(f"{base}-{name}-label")
            axis.offsetText.set_gid(f"{base}-{name}-offset")
    if legend is not None:
        legend.set_gid(f"{key}-legend")


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
    Up to MAX_PANELS workloads share two panels in µs, with a legend below them; more are drawn relative to each
    one's final best. Evaluations are counted in whole numbers; a log y axis where the times span decades."""
    normalise = len(series) > MAX_PANELS
    with plt.rc_context(_STYLE):
        fig, (ax_e, ax_t) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
        plotted = []
        for s in series:
            pts = s["points"]
            for ax, key in ((ax_e, "evaluation"), (ax_t, "wall_s")):
                xs, ys = _steps([(p[key], p["kernel_us"]) for p in pts])
                if not ys:
                    continue
                if normalise:
                    ys = [y / ys[-1] for y in ys]
                plotted += ys
                ax.step(xs, ys, where="post", marker=".", label=s["label"] if ax is ax_e else None, lw=1.2)
        ylabel = "best so far / final best" if normalise else "best kernel time so far (µs)"
        ax_e.set(xlabel="evaluations of the workload", ylabel=ylabel, title="against evaluations")
        ax_t.set(xlabel="wall time since the run started (s)", title="against wall time")
        ax_e.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in (ax_e, ax_t):
            _log_if_decades(ax.yaxis, plotted)
        legend = None
        if not normalise and series:
            legend = fig.legend(loc="outside lower center", ncols=min(3, len(series)), fontsize=7)
        name_parts(fig, "progress", legend)
        return to_svg(fig)


def front(points: list[dict], front_ids: set[str], title: str, key: str = "front") -> str:
    """Every passing candidate of a workload by kernel time and registers; the Pareto front joined and marked.

    Two objectives must have been measured: a build without registers (the interpreter builds nothing) has no
    front to draw, and `report.html` shows the front's table alone (ValueError here)."""
    if not any(p["registers"] is not None for p in points):
        raise ValueError("no build reported registers: a Pareto plot needs two measured objectives")
    points = [p for p in points if p["registers"] is not None]
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(5, 3.4), layout="constrained")
        other = [p for p in points if p["candidate"] not in front_ids]
        on = sorted((p for p in points if p["candidate"] in front_ids), key=lambda p: p["kernel_us"])
        ax.scatter([p["kernel_us"] for p in other], [p["registers"] for p in other], s=14, c="#9aa7b8",
                   label="passed")
        ax.scatter([p["kernel_us"] for p in on], [p["registers"] for p in on], s=30, c="#c0392b", marker="D",
                   label="Pareto front (over time, registers, shared memory, compile s)")
        ax.set(xlabel="kernel time (µs)", title=title, ylabel="registers per thread")
        _log_if_decades(ax.xaxis, [p["kernel_us"] for p in points])
        legend = fig.legend(loc="outside lower center", ncols=2, fontsize=7)
        name_parts(fig, key, legend)
        return to_svg(fig)


def roofline(points: list[dict], baselines: list[dict], roofs: dict, y_label: str) -> str:
    """Achieved throughput of every measured candidate (and baseline) against arithmetic intensity.

    `points`/`baselines`: {'ai', 'y', 'label'}; `roofs`: {'bandwidth_gbps', 'peak', 'source'} (either may be None).
    The memory roof is a line y = bandwidth * ai (GFLOP/s per GB/s: TFLOP/s = GB/s * ai / 1000). Each baseline has
    its own marker in the legend (beside the axes; names written next to close points overlapped); the roof's
    source is said in the page's text above the figure."""
    markers = "xP*^vs<>hdp"
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
        ais = [p["ai"] for p in points + baselines if p["ai"] > 0]
        if ais:
            lo, hi = min(ais) / 4, max(ais) * 4
            bw, peak = roofs.get("bandwidth_gbps"), roofs.get("peak")
            roof_ys = []
            if bw:
                xs = [lo * (hi / lo) ** (i / 50) for i in range(51)]
                roof_ys = ys = [bw * x / 1000 for x in xs]
                if peak:
                    roof_ys = ys = [min(y, peak) for y in ys]
                ax.plot(xs, ys, "k--", lw=1, label="memory roof" + (" and compute roof" if peak else ""))
            elif peak:
                ax.axhline(peak, color="k", ls="--", lw=1, label="compute roof")
                roof_ys = [peak]
            ax.set_xlim(lo, hi)
            _log(ax.xaxis, [lo, hi])
            _log(ax.yaxis, [p["y"] for p in points + baselines] + roof_ys)
        ax.scatter([p["ai"] for p in points], [p["y"] for p in points], s=12, c="#2e86c1", alpha=0.7,
                   label=f"candidates ({len(points)})")
        names = list(dict.fromkeys(b["label"] for b in baselines))   # one marker and legend entry per baseline
        for i, name in enumerate(names):
            bs = [b for b in baselines if b["label"] == name]
            ax.scatter([b["ai"] for b in bs], [b["y"] for b in bs], marker=markers[i % len(markers)], s=30,
                       label=name)
        ax.set(xlabel="arithmetic intensity (FLOP/byte, from the spec's formulas)", ylabel=y_label,
               title="roofline: every measured candidate")
        legend = fig.legend(loc="outside right upper", fontsize=7)
        name_parts(fig, "roofline", legend)
        return to_svg(fig)


def bandwidth(points: list[dict], copy_gbps: dict[str, float]) -> str:
    """For ops whose spec counts no FLOPs: achieved GB/s per workload, beside the device copy of the same bytes.
    Workload names stand upright under their column (the figure widens with their number, so they never touch)."""
    labels = sorted({p["workload"] for p in points})
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * len(labels)), 3.6), layout="constrained")
        for i, w in enumerate(labels):
            ys = [p["y"] for p in points if p["workload"] == w]
            ax.scatter([i] * len(ys), ys, s=12, c="#2e86c1", alpha=0.7)
            if w in copy_gbps:
                ax.hlines(copy_gbps[w], i - 0.3, i + 0.3, colors="k", linestyles="--")
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        _log_if_decades(ax.yaxis, [p["y"] for p in points] + list(copy_gbps.values()))
        ax.set(ylabel="achieved GB/s (formula bytes / kernel time)", title="bandwidth of every measured candidate "
               "(dashed: device copy)")
        name_parts(fig, "bandwidth")
        return to_svg(fig)
