"""The HTML report judged in a browser: each report is rendered in headless Chromium and measured by a script
inserted into a copy of it (tests/report/layout_probe.js), which reads the page's own geometry — the bounding
boxes of every SVG tick label, legend and data area, the contents' links, the verdict cells — and writes JSON into
the DOM that `--dump-dom` returns.

One Chromium render for the module: a page of iframes holds the three fixture reports, figures no fixture draws
(a bandwidth plot of 30 workloads, normalised best-so-far) and a control figure (a legend over its data, tick
labels on top of each other) that the same checks must catch. The archives: an
interpreter RMSNorm run (three workloads whose kernel times span 7 ms to 4 s, confirmed against eager), the H200
attention run (a roofline with seven baselines) and the H200 LayerNorm planner run. The interpreter archive was
made with `kernelloop optimize rmsnorm --device interpret --budget 4 --baseline eager --checks 1` on the workloads
M×N = 1×64, 16×512, 256×1024 (fp32).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from kernelloop.deliver.report import figures
from kernelloop.deliver.report.html import write_report

HERE = Path(__file__).resolve().parent
ARCHIVES = HERE.parent / "fixtures" / "archives"
REPORTS = {"interp": "cpu-rmsnorm-interpreter", "attention": "h200-attention-exhaustive",
           "planner": "h200-layernorm-planner"}
MIN_GAP_PX = 8
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (.ci/run installs Debian's package)")


def _control_svg() -> str:
    """A figure that breaks both rules: legend in the middle of the data, long tick labels crammed together."""
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(range(12), range(12), label="data")
        ax.set_xticks(range(12), [f"label-{i:04d}" for i in range(12)])
        legend = ax.legend(loc="center")
        figures.name_parts(fig, "control", legend)
        return figures.to_svg(fig)


def _synthetic_svgs() -> str:
    """Figures no fixture archive draws: the bandwidth plot of 30 workloads whose GB/s span decades, and best-so-far
    of more workloads than MAX_PANELS (normalised, no legend)."""
    labels = [f"softmax[{2 ** (i % 12)}x{4096 + i}]:fp16" for i in range(30)]
    pts = [{"workload": w, "y": 3.0 * 1.3 ** i * (1 + k / 10)} for i, w in enumerate(labels) for k in range(3)]
    series = [{"label": f"w{i}", "points": [{"evaluation": e + 1, "wall_s": 5.0 * e + i, "kernel_us": 100.0 / (e + 1)}
                                            for e in range(9)]} for i in range(figures.MAX_PANELS + 2)]
    return figures.bandwidth(pts, {labels[0]: 5.0, labels[-1]: 9000.0}) + figures.progress(series)


def _with_probe(html: str) -> str:
    probe = (HERE / "layout_probe.js").read_text()
    assert "</body>" in html
    return html.replace("</body>", f"<script>{probe}</script>\n</body>")


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> dict:
    """{'interp' | 'attention' | 'planner' | 'control': the probe's JSON} and the reports' HTML, one render."""
    tmp = tmp_path_factory.mktemp("layout")
    pages, html = {}, {}
    for key, name in REPORTS.items():
        out = write_report(ARCHIVES / f"{name}.sqlite.xz", tmp / f"{name}.html")
        html[key] = out.read_text()
        pages[key] = tmp / f"{key}-probed.html"
        pages[key].write_text(_with_probe(html[key]))
    pages["control"] = tmp / "control-probed.html"
    pages["control"].write_text(_with_probe(f"<!DOCTYPE html><html><body>{_control_svg()}</body></html>"))
    pages["synthetic"] = tmp / "synthetic-probed.html"
    pages["synthetic"].write_text(_with_probe(f"<!DOCTYPE html><html><body>{_synthetic_svgs()}</body></html>"))
    frames = "\n".join(f'<iframe id="{k}" src="{p.name}" style="width:1280px;height:900px"></iframe>'
                       for k, p in pages.items())
    collect = ("window.addEventListener('load', () => { const r = {};"
               " for (const f of document.querySelectorAll('iframe')) {"
               "  const p = f.contentDocument && f.contentDocument.getElementById('kl-layout');"
               "  r[f.id] = p ? JSON.parse(p.textContent) : null; }"
               " const o = document.createElement('pre'); o.id = 'results'; o.textContent = JSON.stringify(r);"
               " document.body.appendChild(o); });")
    harness = tmp / "harness.html"
    harness.write_text(f"<!DOCTYPE html><html><body>{frames}<script>{collect}</script></body></html>")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
           "--allow-file-access-from-files", "--window-size=1300,1000", "--virtual-time-budget=10000",
           "--dump-dom", harness.as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-2000:]
    m = re.search(r'<pre id="results">(.*?)</pre>', res.stdout, re.S)
    assert m, res.stdout[-2000:]
    data = json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))
    assert set(data) == set(pages) and all(data.values()), data
    return {**data, "html": html}


def _figure(page: dict, key: str) -> dict:
    (fig,) = [f for f in page["figures"] if f["key"] == key]
    return fig


def _num(text: str) -> float:
    return float(text.replace(",", "").replace("\u2212", "-"))


def test_the_checks_catch_a_legend_over_data_and_overlapping_tick_labels(layout):
    fig = _figure(layout["control"], "control")
    (ax,) = fig["axes"]
    assert len(ax["axes"]["xaxis"]["ticks"]) == 12 and ax["axes"]["xaxis"]["overlaps"]
    assert ax["axes"]["xaxis"]["min_gap"] < 0 < MIN_GAP_PX <= ax["axes"]["yaxis"]["min_gap"]
    assert fig["legend"]["over_data"] > 0


@pytest.mark.parametrize("report", [*REPORTS, "synthetic"])
def test_no_tick_labels_overlap_and_every_legend_is_beside_the_data(layout, report):
    page = layout[report]
    keys = [f["key"] for f in page["figures"]]
    assert keys == ["bandwidth", "progress"] if report == "synthetic" else ("progress" in keys and "roofline" in keys)
    for fig in page["figures"]:
        assert fig["axes"], fig["key"]
        for ax in fig["axes"]:
            assert ax["data"] and ax["data"]["w"] > 50 and ax["data"]["h"] > 50, (fig["key"], ax)
            for name, axis in ax["axes"].items():
                assert len(axis["ticks"]) >= 2, (fig["key"], ax["id"], name, axis)
                assert axis["overlaps"] == [], (fig["key"], ax["id"], name, axis["overlaps"])
                # touching labels read as one ("3×10⁰4×10⁰"): at least about a character's width between them
                assert axis["min_gap"] >= MIN_GAP_PX, (fig["key"], ax["id"], name, axis)
        if fig["legend"] is not None:
            assert fig["legend"]["inside_figure"], (fig["key"], fig["legend"], fig["box"])
            assert fig["legend"]["over_data"] == 0, (fig["key"], fig["legend"])
    if report == "synthetic":
        (ax,) = _figure(page, "bandwidth")["axes"]
        assert len(ax["axes"]["xaxis"]["ticks"]) == 30 and ax["axes"]["yaxis"]["offset"] == ""
        assert _figure(page, "progress")["legend"] is None       # normalised: too many workloads to name
    else:
        assert _figure(page, "progress")["legend"] is not None and _figure(page, "roofline")["legend"] is not None


@pytest.mark.parametrize("report", list(REPORTS))
def test_evaluation_counts_have_integer_ticks(layout, report):
    ticks = _figure(layout[report], "progress")["axes"][0]["axes"]["xaxis"]["ticks"]
    assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks


def test_times_spanning_decades_get_a_log_axis_and_narrow_ranges_a_linear_one(layout):
    for ax in _figure(layout["interp"], "progress")["axes"]:       # 7 ms to 4 s
        y = ax["axes"]["yaxis"]
        vals = [_num(t) for t in y["ticks"]]
        assert not y["offset"] and len(vals) >= 3, y
        ratios = [b / a for a, b in zip(vals, vals[1:])]
        assert vals[-1] / vals[0] >= 100 and max(ratios) / min(ratios) < 1.01, vals   # evenly spaced decades
    ys = [_num(t) for t in _figure(layout["attention"], "progress")["axes"][0]["axes"]["yaxis"]["ticks"]]
    steps = [b - a for a, b in zip(ys, ys[1:])]   # 1055 to 1242 µs: one linear step
    assert max(steps) - min(steps) < 1e-6, ys


def test_pareto_plots_only_where_registers_were_measured(layout):
    interp = layout["interp"]
    assert not [f for f in interp["figures"] if f["key"].startswith("front-")]
    assert layout["html"]["interp"].count("Registers were not measured") == 3     # one per workload, with its table
    for report in ("attention", "planner"):
        (front,) = [f for f in layout[report]["figures"] if f["key"].startswith("front-")]
        regs = [_num(t) for t in front["axes"][0]["axes"]["yaxis"]["ticks"]]
        assert len(regs) >= 2 and regs[-1] > regs[0] > 0, regs


def test_the_roofline_names_every_baseline_once(layout):
    html = layout["html"]["attention"]
    legend = html[html.index('id="roofline-legend"'):html.index('<section id="lineage">')]
    names = re.findall(r"<text[^>]*>([^<]*)</text>", legend)
    assert names == ["memory roof", "candidates (11)", "eager", "sdpa-cudnn", "sdpa-efficient", "sdpa-flash",
                     "sdpa-math", "torch.compile"]     # the copy is the memory roof; no name written over a point
    roof = html[html.index('id="roofline"'):html.index('id="roofline-legend"')]
    assert not [t for t in re.findall(r"<text[^>]*>([^<]*)</text>", roof) if t in names]


def test_interpreter_timings_carry_no_speed_verdict(layout):
    cells = [v for v in layout["interp"]["verdicts"] if v["text"]]
    assert len(cells) == 3 and all(v["text"] == "not a speed claim (interpreter timing)" for v in cells), cells
    assert len({v["color"] for v in cells}) == 1 and cells[0]["color"] == "rgb(112, 123, 124)"
    body = layout["html"]["interp"].split("<body>", 1)[1]
    assert not re.search(r"FASTER|SLOWER|faster than|slower than", body)
    cuda = [v["text"] for v in layout["attention"]["verdicts"] if v["text"]]   # a GPU run keeps its verdicts
    assert sorted(set(cuda)) == ["FASTER", "SLOWER"]


@pytest.mark.parametrize("report", list(REPORTS))
def test_the_contents_reach_every_section_and_stay_in_view(layout, report):
    toc = layout[report]["toc"]
    hrefs = [lnk["href"] for lnk in toc["links"]]
    assert {"#lineage", "#log"} <= set(hrefs) and all(lnk["resolves"] for lnk in toc["links"]), toc
    assert toc["scrolled_y"] > 1000 and toc["visible_at_log"] and toc["heading_clear"], toc
