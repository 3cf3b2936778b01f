"""Render `kernelloop optimize --json` summaries as a markdown table (used for benchmarks/results/*.md).

    python benchmarks/render.py gpu-out/layernorm.json [more.json ...]
"""

from __future__ import annotations

import json
import sys


def fmt_ratio(s: dict | None) -> str:
    if not s:
        return "n/a"
    lo, hi = s["ci"]
    return f"{s['speedup']:.3f} [{lo:.3f}, {hi:.3f}] {s['verdict']}"


def baseline_us(conf: dict, name: str) -> str:
    b = conf.get("baselines", {}).get(name, {})
    return f"{b['kernel_us']:.1f}" if "kernel_us" in b else ("n/a: " + b.get("note", "")[:60] if b else "n/a")


def render(summary: dict) -> str:
    lines = [f"### {summary['op']} — {summary.get('gpu') or summary['device']}, torch {summary['torch']}, "
             f"triton {summary['triton']}, run {summary['run']}",
             "",
             f"Trials by status: {summary['counts']}; search wall time {summary['costs']['wall_s']:.0f} s.",
             "",
             "| workload | best config | kernel µs [95% CI] | call µs | copy µs | eager µs | torch.compile µs | liger µs "
             "| % of copy | vs eager | vs torch.compile | vs liger |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for w in summary["workloads"]:
        conf = w.get("confirmed")
        if not conf:
            lines.append(f"| {w['label']} | no passing candidate | | | | | | | | | | |")
            continue
        sp = conf["speedups"]
        roof = f"{100 * conf['roofline_fraction']:.1f}" if conf.get("roofline_fraction") else "n/a"
        lo, hi = conf["kernel_ci_us"]
        lines.append(
            f"| {w['label']} | {w['best']['label']} | {conf['kernel_us']:.2f} [{lo:.2f}, {hi:.2f}] | "
            f"{conf['call_us']:.1f} | {baseline_us(conf, 'copy')} | {baseline_us(conf, 'eager')} | "
            f"{baseline_us(conf, 'torch.compile')} | {baseline_us(conf, 'liger')} | {roof} | "
            f"{fmt_ratio(sp.get('eager'))} | {fmt_ratio(sp.get('torch.compile'))} | {fmt_ratio(sp.get('liger'))} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as f:
            print(render(json.load(f)))
