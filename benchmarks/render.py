"""Render `kernelloop optimize --json` summaries as a markdown table (used for benchmarks/results/*.md).

    python benchmarks/render.py gpu-out/layernorm.json [more.json ...]
    python benchmarks/render.py --combine older.json newer.json ...

One column of kernel time and one of speed-up per baseline the run confirmed against (the device copy, eager,
torch.compile and the op's own, e.g. Liger-Kernel, cuBLAS or an SDPA backend), and under the table each
baseline's geometric-mean speed-up over the workloads that have it (plain, and weighted by the workloads' weights).

`--combine` makes one suite out of several runs of the same op: each workload (by id) keeps the confirmation of the
last file, in the order given, that confirmed it; a column names the run each row comes from, and the geometric
means say how many runs they combine (each speed-up is from its own run's same-run confirmation).
"""

from __future__ import annotations

import json
import math
import sys

OWN_ORDER = ("copy", "eager", "torch.compile")   # first, in this order; the op's baselines follow as the run has them


def fmt_ratio(s: dict | None) -> str:
    if not s:
        return "n/a"
    lo, hi = s["ci"]
    return f"{s['speedup']:.3f} [{lo:.3f}, {hi:.3f}] {s['verdict']}"


def baseline_us(conf: dict, name: str) -> str:
    b = conf.get("baselines", {}).get(name, {})
    return f"{b['kernel_us']:.1f}" if "kernel_us" in b else ("n/a: " + b.get("note", "")[:60] if b else "n/a")


def baseline_names(summary: dict) -> list[str]:
    """The baselines any workload was confirmed against: the device copy, eager, torch.compile, then the rest."""
    seen = {}
    for w in summary["workloads"]:
        for name in ((w.get("confirmed") or {}).get("baselines") or {}):
            seen.setdefault(name, None)
    return [n for n in OWN_ORDER if n in seen] + [n for n in seen if n not in OWN_ORDER]


def geomeans(summary: dict, name: str) -> tuple[float, float, int] | None:
    """(geometric mean, weighted geometric mean, workloads) of the speed-ups over baseline `name`."""
    pairs = [(s["speedup"], 1.0 if w.get("weight") is None else w["weight"]) for w in summary["workloads"]
             if (s := ((w.get("confirmed") or {}).get("speedups") or {}).get(name)) and s.get("speedup")]
    if not pairs:
        return None
    plain = math.exp(sum(math.log(x) for x, _ in pairs) / len(pairs))
    total = sum(wt for _, wt in pairs)
    weighted = math.exp(sum(wt * math.log(x) for x, wt in pairs) / total) if total > 0 else float("nan")
    return plain, weighted, len(pairs)


def render(summary: dict) -> str:
    names = baseline_names(summary)
    ratios = [n for n in names if n != "copy"]
    head = (["workload", "best config", "kernel µs [95% CI]", "call µs"] + [f"{n} µs" for n in names]
            + (["% of copy"] if "copy" in names else []) + [f"vs {n}" for n in ratios])
    lines = [f"### {summary['op']} — {summary.get('gpu') or summary['device']}, torch {summary['torch']}, "
             f"triton {summary['triton']}, run {summary['run']}",
             "",
             f"Trials by status: {summary['counts']}; search wall time {summary['costs']['wall_s']:.0f} s.",
             "",
             "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for w in summary["workloads"]:
        conf = w.get("confirmed")
        if not conf:
            search = (w.get("best") or {}).get("search")
            what = (f"{w['best']['label']} | {search['kernel_us']:.2f} (search; not confirmed)" if search
                    else "no passing candidate |")
            lines.append(f"| {w['label']} | {what} |" + " |" * (len(head) - 3))
            continue
        sp = conf["speedups"]
        lo, hi = conf["kernel_ci_us"]
        cells = [w["label"], w["best"]["label"], f"{conf['kernel_us']:.2f} [{lo:.2f}, {hi:.2f}]",
                 f"{conf['call_us']:.1f}"] + [baseline_us(conf, n) for n in names]
        if "copy" in names:
            cells.append(f"{100 * conf['roofline_fraction']:.1f}" if conf.get("roofline_fraction") else "n/a")
        cells += [fmt_ratio(sp.get(n)) for n in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    means = [(n, g) for n in ratios if (g := geomeans(summary, n))]
    if means:
        lines.append("")
        lines += [f"Geometric mean vs {n}: {p:.3f}× (weighted {wt:.3f}×) over {k} workload(s)." for n, (p, wt, k) in means]
    return "\n".join(lines) + "\n"


def combine(summaries: list[dict]) -> dict:
    """One summary of the workloads of several runs of one op: per workload id, the last confirmed one (its run id
    recorded in the workload's `run`); workloads no run confirmed keep their last appearance."""
    ops = {s["op"] for s in summaries}
    if len(ops) != 1:
        raise ValueError(f"--combine needs runs of one op, got {sorted(ops)}")
    rows: dict[str, dict] = {}
    for s in summaries:
        for w in s["workloads"]:
            if w.get("confirmed") or w["id"] not in rows or not rows[w["id"]].get("confirmed"):
                rows[w["id"]] = {**w, "run": s["run"]}
    runs = sorted({w["run"] for w in rows.values() if w.get("confirmed")})
    last = summaries[-1]
    counts: dict[str, int] = {}
    for s in summaries:
        for k, v in s["counts"].items():
            counts[k] = counts.get(k, 0) + v
    return {**last, "run": " + ".join(runs), "runs": runs, "counts": counts,
            "costs": {"wall_s": sum(s["costs"]["wall_s"] for s in summaries)}, "workloads": list(rows.values())}


def render_combined(summary: dict) -> str:
    """render() with a column naming each row's run, and the number of runs under the geometric means."""
    text = render(summary)
    out = []
    for line in text.splitlines():
        if line.startswith("| workload"):
            line = "| run " + line
        elif line.startswith("|---"):
            line = "|---" + line
        elif line.startswith("| "):
            label = line[2:].split(" | ")[0]
            run = next((w["run"] for w in summary["workloads"] if w["label"] == label), "")
            line = f"| {run} " + line
        elif line.startswith("Geometric mean"):
            line += f" Combines {len(summary['runs'])} run(s); each speed-up is from its own run."
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--combine":
        docs = []
        for path in args[1:]:
            with open(path) as f:
                docs.append(json.load(f))
        print(render_combined(combine(docs)))
    else:
        for path in args:
            with open(path) as f:
                print(render(json.load(f)))
