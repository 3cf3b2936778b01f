"""`kernelloop audit-pruning SPEC`: check pruning against ahead-of-time builds of the whole unpruned space.

No GPU is needed: every configuration is compiled for the target (sm_90 by default) on this machine. The report
says what share of the configurations that would fail (not compile, or not launch) pruning removes, which failing
ones it keeps, and which configurations it removes although they build and launch cleanly; those can be timed on
a GPU with `kernelloop record --configs` (the file `--configs-out` writes), and `--timed` then checks that none of
them is among the best 1 % of everything measured; with `--screen`, the summary of benchmarks/pruning_screen.py
vouches for the pruned configurations the recording did not measure (those it screened beyond its margin).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer
from rich.table import Table

from ..base.records.device import DeviceProperties
from ..core.device import VIRTUAL_HOPPER, cuda_available, device_properties
from ..tune.replay.space_file import read_space_document
from ..core.spec import SpecError, load_op, load_workloads
from ..core.build.aot import build_configs
from ..tune.search.encoding import config_key
from ..tune.search.prune_audit import audit, outcomes_of, top_share
from ..core.spec.space import expand
from . import common
from .common import esc


_TemplateOpt = Annotated[Optional[list[str]], typer.Option(
    help="Audit only this template (repeatable; default: every template).")]
_ConfigsOutOpt = Annotated[Optional[Path], typer.Option(
    help="Write the configurations pruning removes although they build and launch (per workload) as a file "
         "for `kernelloop record --configs`.")]
_BuildsOpt = Annotated[Optional[Path], typer.Option(
    help="Reuse the builds of an earlier report of this op (--out of a previous audit) instead of building; "
         "for auditing changed constraints or adding --timed.")]
_TimedOpt = Annotated[Optional[Path], typer.Option(
    help="A space file recorded on a GPU with the pruned space and those configurations (same session): "
         "report whether any of them is among the top 1 % (by workload id).")]
_ScreenOpt = Annotated[Optional[Path], typer.Option(
    help="With --timed: the summary of benchmarks/pruning_screen.py (--summary), whose screened pruned "
         "configurations count as checked when they are beyond its margin; the flagged ones must be in --timed.")]
_AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print the summary rows as JSON (progress to stderr); "
                                                         "--out holds every configuration.")]


def audit_pruning(
    spec: Annotated[str, typer.Argument(help=common.SPEC_HELP)],
    out: Annotated[Path, typer.Option(help="JSON report to write (every configuration's build and verdict).")],
    workloads: Annotated[Optional[Path], typer.Option(help="Workload file (default: the op's workloads.toml).")] = None,
    template: _TemplateOpt = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="Only the first N configurations of each template.")] = None,
    jobs: Annotated[int, typer.Option(min=0, help="Build processes at once (0: the CPU count).")] = 0,
    arch: Annotated[int, typer.Option(help="Target compute capability, e.g. 90 for sm_90 (H100/H200).")] = 90,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds one configuration's build may take.")] = 300.0,
    configs_out: _ConfigsOutOpt = None,
    builds: _BuildsOpt = None,
    timed: _TimedOpt = None,
    screen: _ScreenOpt = None,
    as_json: _AsJsonOpt = False,
) -> None:
    """Build every configuration of the unpruned space ahead of time and audit pruning against the builds."""
    console = common.console(stderr=as_json)
    try:
        bundle = load_op(common.resolve_op(spec))
        wls = load_workloads(common.resolve_path(workloads) or bundle.folder / "workloads.toml", bundle.spec)
    except SpecError as e:
        common.spec_error(console, e, spec)
    common.require_templates(bundle, template, console)
    op = bundle.spec.name
    prev, earlier = _read_builds(builds, op, arch, console) if builds is not None else (None, {})
    space_doc = _read_timed(timed, op, console) if timed is not None else None
    screen_doc = _read_screen(screen, timed, op, console) if screen is not None else None
    props = _target_limits(arch, console)
    templates = {t.name: t for t in bundle.spec.templates if not template or t.name in template}
    files = {n: bundle.folder / t.file for n, t in templates.items()}
    configs = [{"template": t.name, **c} for t in templates.values() for c in expand(t)[:limit]]
    import triton
    # which Triton built them (from --builds: the earlier report's); the report is written after every workload
    toolchain = prev.get("triton") if prev is not None else triton.__version__

    def write_report(done: list[dict]) -> None:
        doc = {"op": op, "arch": arch, "triton": toolchain, "device": props.model_dump(mode="json"),
               "templates": sorted(templates), "limit": limit, "workloads": done}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str))

    reports, runners = [], {}
    for w in wls:
        console.print(f"{esc(w.label)}: {'auditing the builds of' if builds else 'building'} {len(configs)} "
                      f"configurations for sm_{esc(arch)} ({len(templates)} template(s))")
        if builds is not None:
            outcomes = _earlier_outcomes(earlier.get(w.id, []), configs, builds, w.label, console)
        else:
            outcomes = build_configs(bundle.spec, files, w, configs, arch=arch, sm_count=props.sm_count,
                                     jobs=jobs or os.cpu_count() or 1, timeout_s=timeout,
                                     progress=_progress(console, len(configs)))
        rep = audit(templates, w, props, outcomes)
        rep.update(workload_id=w.id, axes=w.axes, dtype=w.dtype.value)
        if space_doc is not None:
            runs = rep["classes"].get("runs", 0) + rep["classes"].get("spills", 0)
            rep["top_share"] = top_share(rep["pruned_runners"], space_doc, w.id, population=runs,
                                         screen=screen_doc["workloads"].get(w.id, {}) if screen_doc else None)
        reports.append(rep)
        write_report(reports)
        runners[w.id] = [{"template": r["template"], **r["config"]} for r in rep["pruned_runners"]]
    write_report(reports)
    if configs_out is not None:
        configs_out.parent.mkdir(parents=True, exist_ok=True)
        configs_out.write_text(json.dumps({"op": op, "configs": runners}, indent=1))
    _render(reports, op, arch, out, configs_out, console, as_json)


def _bad_input(console, markup: str) -> NoReturn:
    """Print `markup` (rich text whose user parts the caller escaped) as a bad input and exit."""
    console.print(f"[red]bad input:[/red] {markup}")
    raise typer.Exit(common.BAD_INPUT)


def _read_builds(builds: Path, op: str, arch: int, console) -> tuple[dict, dict]:
    """The earlier report --builds names (checked to audit the same op for the same target) and its build outcomes
    by workload id."""
    try:
        prev = json.loads(builds.read_text())
        if prev.get("op") != op:
            raise ValueError(f"it audits {prev.get('op')!r}, not {op!r}")
        if prev.get("arch", arch) != arch:
            raise ValueError(f"its builds are for sm_{prev.get('arch')}, not sm_{arch}")
        return prev, {w["workload_id"]: outcomes_of(w["rows"]) for w in prev["workloads"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        _bad_input(console, f"--builds {esc(builds)}: {esc(e)}")


def _read_timed(timed: Path, op: str, console) -> dict:
    """The space file --timed names (a recording of this op)."""
    try:
        space_doc = read_space_document(timed)
    except (ValueError, OSError) as e:
        _bad_input(console, f"--timed: {esc(timed)} is not a space file: {esc(e)}")
    if space_doc.get("op") not in (None, op):
        _bad_input(console, f"--timed {esc(timed)}: it records {esc(space_doc.get('op'))!r}, not {esc(op)!r}")
    return space_doc


def _read_screen(screen: Path, timed: Path | None, op: str, console) -> dict:
    """The pruning screen's summary --screen names (of this op; it needs --timed)."""
    try:
        if timed is None:
            raise ValueError("it needs --timed (the recording of what the screen flagged)")
        screen_doc = json.loads(screen.read_text())
        if screen_doc.get("op") != op:
            raise ValueError(f"it screens {screen_doc.get('op')!r}, not {op!r}")
        screen_doc["workloads"].items()
    except (OSError, ValueError, KeyError, AttributeError) as e:
        _bad_input(console, f"--screen {esc(screen)}: {esc(e)}")
    return screen_doc


def _target_limits(arch: int, console) -> DeviceProperties:
    """The device limits pruning is audited against: this host's GPU when it is an sm_<arch>, else the sm_90
    limits (the target a CUDA run would prune for, not the interpreter's view of the space)."""
    local = device_properties("cuda") if cuda_available() else None
    if local is not None and local.capability[0] * 10 + local.capability[1] == arch:
        return local
    if arch == 90:
        return VIRTUAL_HOPPER.with_(virtual=False, name="sm_90 limits (ahead-of-time audit, no sm_90 GPU here)")
    console.print(f"[red]bad argument:[/red] --arch {esc(arch)}: its device limits are known here only for 90 "
                  f"(or on a host with that GPU)")
    raise typer.Exit(common.BAD_INPUT)


def _progress(console, total: int):
    done = [0]

    def progress(n: int, secs: float) -> None:
        done[0] += n
        console.print(f"  {esc(done[0])}/{total} built ({secs:.0f} s for the last {n})")

    return progress


def _earlier_outcomes(earlier: list, configs: list[dict], builds: Path, label: str, console) -> list:
    """The earlier report's build outcome of every configuration, in order; refused when one is missing."""
    have = {config_key({"template": o.template, **o.config}): o for o in earlier}
    missing = [c for c in configs if config_key(c) not in have]
    if missing:
        _bad_input(console, f"--builds {esc(builds)}: {len(missing)} configuration(s) of {esc(label)} are not in "
                            f"it (e.g. {esc(missing[0])})")
    return [have[config_key(c)] for c in configs]


def _render(reports: list[dict], op: str, arch: int, out: Path, configs_out: Path | None, console,
            as_json: bool) -> None:
    """The audit's summary: one table row per workload, or the JSON summary."""
    if as_json:
        print(json.dumps({"op": op, "arch": arch, "out": str(out),
                          "configs_out": str(configs_out) if configs_out else None,
                          "workloads": [{"workload": r["workload"], "workload_id": r["workload_id"],
                                         "configurations": r["configurations"], "pruned": r["pruned"],
                                         "would_fail": r["fails"], "would_fail_pruned": r["fails_pruned"],
                                         "recall": r["recall"], "kept_failures": len(r["kept_failures"]),
                                         "pruned_runners": len(r["pruned_runners"]),
                                         "top_share": r.get("top_share")} for r in reports]}, indent=2, default=str))
        return
    table = Table(title=f"pruning audit: {op}, sm_{arch}")
    for col in ("workload", "configs", "pruned", "would fail", "of them pruned", "recall", "kept failures",
                "pruned, run (distinct)", "top 1 %"):
        table.add_column(col)
    for r in reports:
        recall = "n/a (none fail)" if r["recall"] is None else f"{r['recall']:.1%}"
        top = r.get("top_share", {}).get("verdict", "not timed")
        table.add_row(r["workload"], str(r["configurations"]), str(r["pruned"]), str(r["fails"]),
                      str(r["fails_pruned"]), recall, str(len(r["kept_failures"])), str(len(r["pruned_runners"])),
                      top)
    console.print(table)
    console.print(f"wrote {esc(out)}" + (f" and {esc(configs_out)}" if configs_out else ""))
