// Inserted by tests/report/test_report_layout.py into a copy of a report: measures the page's own geometry
// (tick labels, legends, data areas of every matplotlib SVG; the contents' links; the verdict cells) and writes
// the result as JSON into <pre id="kl-layout">, which the test reads back from Chromium's --dump-dom.
(function () {
  function box(el) {
    const r = el.getBoundingClientRect();
    return {l: r.left, t: r.top, r: r.right, b: r.bottom, w: r.width, h: r.height};
  }
  function overlap(a, b) {     // area shared by two boxes, ignoring sub-pixel contact
    const w = Math.min(a.r, b.r) - Math.max(a.l, b.l), h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
    return (w > 0.5 && h > 0.5) ? w * h : 0;
  }
  function inside(a, outer) {
    return a.l >= outer.l - 1 && a.t >= outer.t - 1 && a.r <= outer.r + 1 && a.b <= outer.b + 1;
  }
  function measure() {
    const out = {figures: [], toc: {}, verdicts: []};
    for (const svg of document.querySelectorAll("svg")) {
      const fig = {box: box(svg), axes: [], legend: null, key: null};
      const top = svg.querySelector("g[id]");
      fig.key = top ? top.id : null;
      const datas = [];
      for (const ax of svg.querySelectorAll("g[id]")) {
        const m = /^(.*-ax-\d+)$/.exec(ax.id);
        if (!m) continue;
        const data = svg.querySelector('[id="' + ax.id + '-data"]');
        const entry = {id: ax.id, data: data ? box(data) : null, axes: {}};
        if (data) datas.push(entry.data);
        for (const name of ["xaxis", "yaxis"]) {
          const g = svg.querySelector('[id="' + ax.id + "-" + name + '"]');
          if (!g) continue;
          const skip = [g.querySelector('[id$="-label"]'), g.querySelector('[id$="-offset"]')];
          const ticks = [];
          for (const t of g.querySelectorAll("text")) {
            if (skip.some(s => s && s.contains(t))) continue;
            const b = box(t);
            if (b.w > 0 && b.h > 0 && t.textContent.trim()) ticks.push({text: t.textContent.trim(), box: b});
          }
          let overlaps = [];
          for (let i = 0; i < ticks.length; i++)
            for (let j = i + 1; j < ticks.length; j++)
              if (overlap(ticks[i].box, ticks[j].box) > 0) overlaps.push([ticks[i].text, ticks[j].text]);
          // the narrowest space between neighbouring labels along the axis (negative: they overlap)
          const along = name === "xaxis" ? ["l", "r"] : ["t", "b"];
          const sorted = ticks.map(t => t.box).sort((a, b) => a[along[0]] - b[along[0]]);
          let gap = null;
          for (let i = 1; i < sorted.length; i++) {
            const g = sorted[i][along[0]] - sorted[i - 1][along[1]];
            gap = gap === null ? g : Math.min(gap, g);
          }
          const off = skip[1] ? skip[1].textContent.trim() : "";
          entry.axes[name] = {ticks: ticks.map(t => t.text), overlaps: overlaps, offset: off, min_gap: gap};
        }
        fig.axes.push(entry);
      }
      const legend = svg.querySelector('g[id$="-legend"]');
      if (legend) {
        const b = box(legend);
        fig.legend = {box: b, inside_figure: inside(b, fig.box),
                      over_data: datas.reduce((s, d) => s + overlap(b, d), 0)};
      }
      out.figures.push(fig);
    }
    const nav = document.getElementById("toc");
    if (nav) {
      out.toc.links = [...nav.querySelectorAll("a")].map(a => {
        const id = decodeURIComponent(a.getAttribute("href").replace(/^#/, ""));
        return {href: a.getAttribute("href"), resolves: !!document.getElementById(id)};
      });
      const log = document.getElementById("log");
      if (log) {    // jump to the log as its link does: is the contents still in view, and not over the heading?
        log.scrollIntoView();
        const n = nav.getBoundingClientRect(), h = log.querySelector("h2").getBoundingClientRect();
        out.toc.scrolled_y = window.scrollY;
        out.toc.visible_at_log = n.top >= 0 && n.bottom <= window.innerHeight && n.height > 0;
        out.toc.heading_clear = h.top >= n.bottom - 0.5 && h.bottom <= window.innerHeight;
        window.scrollTo(0, 0);
      }
    }
    for (const td of document.querySelectorAll("#baselines tr > td:last-child"))
      out.verdicts.push({text: td.textContent.trim(), color: getComputedStyle(td).color});
    const pre = document.createElement("pre");
    pre.id = "kl-layout";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  window.addEventListener("load", measure);
})();
