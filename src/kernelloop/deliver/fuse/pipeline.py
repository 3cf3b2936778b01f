"""`kernelloop.fuse(model, examples, out=DIR)`: discover -> realise -> pattern table -> compose -> end to end.

    result = fuse(model, [(ids_2x8,), (ids_1x16,)], out="fused", budget=2, table="patterns.sqlite")
    result.report            # FuseReport: each pattern with occurrences, local speed-ups, end-to-end contribution
    result.model             # the composed FusedModel when it is kept, else the model itself

1. Each example shape is exported and searched for candidates (`discover`); each candidate is planned onto kernel
   families (`plans`), and plans with the same pattern key merge their workloads across shapes.
2. Each plan becomes an op folder (`opgen`) and a loop run (`realise`): the pattern table's realisation
   re-verified when one applies, else a search within the budget; the table admits what qualifies.
3. The passing runs are exported as one package (exact guards), loaded and registered as torch ops.
4. Per shape the exported graph is rewritten with the non-overlapping sites (`compose.choose`) and kept in one
   `FusedModel` beside the original model.
5. End to end (`endtoend`): outputs against the original on fresh seeded inputs; on a GPU, times of eager,
   torch.compile, the exported graph unfused, the fused graph, torch.compile of it, Liger-Kernel's patched model
   where it applies, and the fused graph without each pattern (its end-to-end contribution). A composition whose
   outputs are off, or that is slower than eager, is reported and not kept.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from pydantic import Field

from ...base.records import Record, ordered_axes
from ...base.records.device import Device
from ...base.records.measurement import Ratio
from . import graph as G
from . import realise as R
from .compose import Choice, FusedModel, Site, choose, rewrite, shape_key
from .discover import discover_graph
from .endtoend import EndToEnd, end_to_end
from .evidence import Realisation, WorkloadEvidence
from .masks import MaskRewrite
from .plans import Refusal, check_families, plan_candidate
from .records import DiscoveryReport
from .table import PatternTable, pattern_key


class PatternReport(Record):
    """One realised pattern: where it occurs, what the loop and the table did, what it brought."""

    pattern: str
    family: str
    kind: str
    op: str
    ops: list[str] = Field(description="The model's ATen ops it replaces, in order.")
    occurrences: int = Field(description="Occurrences over all example shapes.")
    replaced: int = Field(0, description="Sites composed into the model.")
    passed: bool
    source: str = Field("", description="search or table (re-verified, no search).")
    table: str = ""
    speed: str = Field("not measured", description="Against the unfused eager sequence, every workload.")
    local: list[WorkloadEvidence] = Field(default_factory=list, description="Per workload: kernel time, the "
                                          "unfused sequence eager and under torch.compile, the speed-ups.")
    contribution: dict[str, Ratio] = Field(default_factory=dict, description="End-to-end contribution per shape: "
                                           "the fused model without this op over the fused model (a paired "
                                           "speed-up; above 1: the op makes the model faster).")
    note: str = ""


class FuseReport(Record):
    model: str
    device: str
    shapes: list[str]
    budget: str
    strategy: str
    discovery: list[DiscoveryReport]
    refused: list[Refusal] = Field(default_factory=list)
    patterns: list[PatternReport] = Field(default_factory=list)
    sites: list[Site] = Field(default_factory=list)
    masks: list[MaskRewrite] = Field(default_factory=list, description="SDPA calls whose explicit causal mask "
                                     "(made by export) went back to is_causal, or why not.")
    e2e: list[EndToEnd] = Field(default_factory=list)
    kept: bool = Field(description="Whether the composed model is what `fuse` returns.")
    verdict: str = Field(description="Why it is kept or not.")
    package: str = ""
    table: str = ""
    seconds: float = 0.0


@dataclass
class FuseResult:
    report: FuseReport
    model: torch.nn.Module          # the FusedModel when kept, else the original model
    fused: FusedModel | None        # the composition, kept or not
    package: object = None          # the loaded package


class FuseError(RuntimeError):
    """The pipeline cannot run (the interpreter cannot be chosen any more, every example failed to export)."""


def _interpreter(device: str) -> None:
    if Device.of(device).is_cuda:   # 'cuda', or one GPU of several ('cuda:1')
        return
    if os.environ.get("TRITON_INTERPRET") != "1":
        if "triton" in sys.modules:
            raise FuseError("the interpreter's kernels run in this process only with TRITON_INTERPRET=1 set "
                            "before triton is imported (set it first, or use device='cuda')")
        os.environ["TRITON_INTERPRET"] = "1"


def _examples(examples) -> list[tuple]:
    if isinstance(examples, torch.Tensor):
        return [(examples,)]
    if isinstance(examples, tuple):
        return [examples]
    return [e if isinstance(e, tuple) else (e,) for e in examples]


@dataclass
class _Group:
    plan: object
    signature: object
    members: list[tuple[int, object, object]]   # (shape index, candidate, its own plan: axes in its symbols)
    steps: list
    operands: dict
    op: str


def _model_dtype(model: torch.nn.Module) -> torch.dtype:
    return next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)


def fuse(model: torch.nn.Module, examples, *, out: str | Path, budget: int | str | None = 2,
         device: str | None = None, strategy: str = "staged", table: str | Path | None = None,
         families: list[str] | None = None, seed: int = 0, confirm: bool | None = None, sanitize: bool = True,
         jobs: int | None = None, fixed: dict[str, str] | None = None, seeds: tuple[int, ...] = (0, 1, 2),
         tolerance=None, rounds: int = 10,
         calls: int = 3, liger: bool = True, contributions: bool = True,
         on_note: Callable[[str], None] | None = None) -> FuseResult:
    """Fuse `model` on the example input tuples `examples` (several shapes allowed, positional arguments); everything
    is written under `out` (ops/, runs/, package/, report.json, and the pattern table unless `table` names another
    file; an `out` that already holds runs, an unknown family or a `table` that is not a pattern table is refused
    before any work: UsageError).
    `budget`: the loop's evaluations per workload (or a duration); `families`: only these discovery families;
    `confirm`: confirm winners beside the baselines (default: on a GPU); `jobs`: loop runs at once (default 2 in
    the interpreter, 1 on a GPU, where runs must not share it); `fixed`: per kernel family ('add_norm', 'dual_gemm',
    'gate_mul', 'gemm_epilogue', 'act_tail', 'rotary') parameters pinned in its search, 'NAME=V,NAME=V'."""
    from ..api import UsageError, check_strategy, resolve_device
    t0 = time.perf_counter()
    note = on_note or (lambda text: None)
    dev = resolve_device(device)
    check_strategy(strategy)
    try:
        check_families(families)
        PatternTable(table if table is not None else Path(out) / "patterns.sqlite").close()
    except (ValueError, OSError) as e:   # TableError is a ValueError
        raise UsageError(str(e)) from None
    out = Path(out)
    if (out / "runs").exists() and any((out / "runs").iterdir()):
        raise UsageError(f"{out} already holds loop runs: choose a new out folder (the pattern table can be shared: "
                         f"table=...)")
    _interpreter(dev)
    out.mkdir(parents=True, exist_ok=True)
    exs = _examples(examples)
    options = R.RealiseOptions(device=dev, budget=budget, strategy=strategy, seed=seed,
                               confirm=Device.of(dev).is_cuda if confirm is None else confirm, sanitize=sanitize,
                               fixed=dict(fixed) if fixed else None)
    mdtype = _model_dtype(model)
    programs, reports, shapes = _export_and_discover(model, exs, note)
    if all(p is None for p in programs):
        raise FuseError("no example exported: " + "; ".join(r.error.message for r in reports if r.error))
    groups, refused = _group_patterns(programs, reports, families)
    tbl = PatternTable(table if table is not None else out / "patterns.sqlite")
    try:
        realised = _realise(groups, tbl, out, options, mdtype, jobs or (1 if Device.of(dev).is_cuda else 2), note)
    finally:
        tbl.close()
    return _compose_and_check(model, exs, programs, shapes, groups, realised, reports, refused, out, dev, options,
                              budget, strategy, table, seeds, tolerance, rounds, calls, liger, contributions, note, t0)


def _export_and_discover(model: torch.nn.Module, exs: list[tuple], note
                         ) -> tuple[list, list[DiscoveryReport], list[str]]:
    """Each example's exported program (None when it did not export), discovery report and shape key."""
    cls = f"{type(model).__module__}.{type(model).__qualname__}"
    programs, reports, shapes = [], [], []
    for ex in exs:
        shapes.append(shape_key(ex))
        try:
            ep = G.export_program(model, ex)
        except G.ExportFailed as e:
            note(f"{shapes[-1]}: {e}")
            programs.append(None)
            reports.append(DiscoveryReport(model_class=cls, torch_version=torch.__version__, graph_nodes=0,
                                           error={"stage": "export", "error_type": "ExportFailed",
                                                  "message": str(e)}))
            continue
        programs.append(ep)
        reports.append(discover_graph(model, ep.graph))
        note(f"{shapes[-1]}: {len(reports[-1].candidates)} candidates")
    return programs, reports, shapes


def _group_patterns(programs: list, reports: list[DiscoveryReport], families: list[str] | None
                    ) -> tuple[dict[tuple[str, str], _Group], list[Refusal]]:
    """The discovered candidates' plans grouped by pattern key and kernel kind over every example (one op per
    group, its workloads those of every member), and the refusals of candidates no plan fits."""
    groups: dict[tuple[str, str], _Group] = {}
    refused: list[Refusal] = []
    for i, (ep, rep) in enumerate(zip(programs, reports)):
        if ep is None:
            continue
        params = G.param_names(ep.graph)
        for c in rep.candidates:
            if families and c.family not in families:
                continue
            plans, why = plan_candidate(c)
            refused += [r for r in why if r not in refused]
            for plan in plans:
                key = pattern_key(c.signature, plan)
                g = groups.get((key, plan.kind))
                if g is None:
                    steps = G.step_nodes(ep.graph, c.occurrences[0].nodes)
                    groups[(key, plan.kind)] = _Group(plan, c.signature, [(i, c, plan)], steps,
                                                      G.operand_nodes(steps, params), f"{plan.kind}_{key[4:14]}")
                else:
                    g.members.append((i, c, plan))
                    g.plan = g.plan.model_copy(update={"workloads": [*g.plan.workloads, *plan.workloads]})
    return groups, refused


def _realise(groups, tbl, out: Path, options, mdtype, jobs: int, note) -> dict[tuple[str, str], Realisation]:
    pending = {}
    done: dict[tuple[str, str], Realisation] = {}
    for key, g in groups.items():
        r = R.prepare(g.plan, g.signature, g.op, g.steps, g.operands, out / "ops", out / "runs", options, tbl, mdtype)
        (done if isinstance(r, Realisation) else pending)[key] = r
    while pending:
        note(f"loop runs: {', '.join(j.base['op'] + ' (' + j.source + ')' for j in pending.values())}")
        failed = R.run_all(list(pending.values()), options, jobs)
        nxt = {}
        for key, job in pending.items():
            if job.base["op"] in failed:
                done[key] = Realisation(**job.base, table=job.table_note, error=failed[job.base["op"]])
                continue
            r = R.finish(job, tbl)
            (done if isinstance(r, Realisation) else nxt)[key] = r
        pending = nxt
    return done


def _covered(package, r: Realisation, workload: dict[str, int]) -> str:
    """'' when the package's table has an entry for the site's shape, else why not."""
    if r.op not in package:
        return "not in the package"
    k = package[r.op]
    if k.disabled:
        return k.disabled
    for e in k.table.entries:
        if e.guard.dtype.value == r.plan.dtype.value and all(workload[a] in e.guard.axes[a] for a in workload):
            return ""
    return "no dispatch entry for this shape (the export left its winner out)"


def _compose_and_check(model, exs, programs, shapes, groups, realised, reports, refused, out, dev, options, budget,
                       strategy, table, seeds, tolerance, rounds, calls, liger, contributions, note, t0) -> FuseResult:
    passed = {k: r for k, r in realised.items() if r.passed}
    patterns = _pattern_reports(groups, realised, note)
    common = dict(model=f"{type(model).__module__}.{type(model).__qualname__}", device=dev, shapes=shapes,
                  budget=str(budget), strategy=strategy, discovery=reports, refused=refused,
                  table=str(table if table is not None else out / "patterns.sqlite"))
    if not passed:
        report = FuseReport(**common, patterns=patterns, kept=False, verdict="no pattern was realised",
                            seconds=time.perf_counter() - t0)
        (out / "report.json").write_text(report.model_dump_json(indent=1))
        return FuseResult(report=report, model=model, fused=None)
    pkg_dir, package = _package(passed, out, dev, options, note)
    fused = FusedModel(model)
    sites: list[Site] = []
    masks: list[MaskRewrite] = []
    site_choices: dict[str, list[Choice]] = {}
    for i, ep in enumerate(programs):
        if ep is None:
            continue
        chosen, left = choose(_choices(i, groups, passed, package, shapes[i], sites))
        for ch, why in left:
            sites.append(Site(shape=shapes[i], op=ch.realisation.op, kind=ch.realisation.plan.kind,
                              pattern=ch.realisation.pattern, nodes=sorted(ch.covered), module_paths=ch.module_paths,
                              gain_us=ch.gain_us(), replaced=False, reason=why))
        gm, done = rewrite(ep, chosen, package, shapes[i], masks)
        sites += done
        site_choices[shapes[i]] = [c for c, s in zip(chosen, done) if s.replaced]
        fused.add_graph(shapes[i], gm)
    for p in patterns:
        p_sites = [s for s in sites if s.op == p.op and s.replaced]
        patterns[patterns.index(p)] = p.model_copy(update={"replaced": len(p_sites)})
    checks = []
    for i, ep in enumerate(programs):
        if ep is not None:
            checks.append(_end_to_end(model, fused, exs[i], ep, package, shapes[i], site_choices[shapes[i]], note,
                                      seeds=seeds, tolerance=tolerance, rounds=rounds, calls=calls, liger=liger,
                                      contributions=contributions))
    for e in checks:
        for op, ratio in e.contributions.items():
            for j, p in enumerate(patterns):
                if p.op == op:
                    patterns[j] = p.model_copy(update={"contribution": {**p.contribution, e.shape: ratio}})
    verdict, kept = _verdict(checks)
    report = FuseReport(**common, patterns=patterns, sites=sites, masks=masks, e2e=checks, kept=kept, verdict=verdict,
                        package=str(pkg_dir), seconds=time.perf_counter() - t0)
    (out / "report.json").write_text(report.model_dump_json(indent=1))
    return FuseResult(report=report, model=fused if kept else model, fused=fused, package=package)


def _pattern_reports(groups, realised, note) -> list[PatternReport]:
    """One report per pattern group, each pattern's local figures noted as soon as they exist."""
    patterns = []
    for key, g in groups.items():
        r = realised[key]
        ev = r.evidence
        patterns.append(PatternReport(
            pattern=r.pattern, family=g.plan.family, kind=g.plan.kind, op=r.op,
            ops=[G.target(g.steps[k]) for k in g.plan.steps if not G.is_view(g.steps[k])],
            occurrences=sum(len(c.occurrences) for _, c, _ in g.members), passed=r.passed,
            source=ev.source if ev else "", table=r.table, speed=ev.speed if ev else "not measured",
            local=list(ev.workloads) if ev else [], note=r.error))
    for p in patterns:
        local = "; ".join(f"{'x'.join(map(str, ordered_axes(w.axes).values()))}: {w.status} "
                          f"{'' if w.kernel_us is None else f'{w.kernel_us:.2f} us'}"
                          f"{'' if w.vs_eager is None else f' vs eager {w.vs_eager.speedup:.3f}x {w.vs_eager.verdict.value}'}"
                          f"{'' if w.vs_compile is None else f' vs compile {w.vs_compile.speedup:.3f}x'}"
                          for w in p.local)
        note(f"pattern {p.op} ({p.family}): {'PASSED' if p.passed else 'not passed'}, {p.speed}; {local or p.note}")
    return patterns


def _package(passed: dict, out: Path, dev: str, options, note):
    """The passed patterns' runs exported as one package (OUT/package, replaced) and loaded, registered."""
    from ..package import load_package
    from ..package.export import ExportOptions, export_package
    pkg_dir = out / "package"
    if pkg_dir.exists():
        import shutil
        shutil.rmtree(pkg_dir)
    export_package([Path(r.evidence.run_dir) for r in passed.values()],
                   ExportOptions(out=pkg_dir, name="fused", ops_root=out / "ops", ranges=False,
                                 sanitize=options.sanitize), device=dev, on_note=note)
    return pkg_dir, load_package(pkg_dir).register()


def _choices(i: int, groups, passed: dict, package, shape: str, sites: list[Site]) -> list[Choice]:
    """The occurrences in example program `i` a passed pattern's package entry covers; those it does not cover go
    to `sites` as not replaced, with the reason."""
    choices = []
    for key, g in groups.items():
        r = passed.get(key)
        for si, c, own in g.members:
            if si != i or r is None:
                continue
            for oi, occ in enumerate(c.occurrences):
                wl = own.workloads[oi]
                ch = Choice(r, oi, occ.nodes, wl, occ.module_paths)
                why = _covered(package, r, wl)
                if why:
                    sites.append(Site(shape=shape, op=r.op, kind=r.plan.kind, pattern=r.pattern,
                                      nodes=sorted(ch.covered), module_paths=occ.module_paths, replaced=False,
                                      reason=why))
                else:
                    choices.append(ch)
    return choices


def _end_to_end(model, fused, ex, ep, package, shape: str, chosen: list[Choice], note, **kw):
    """`end_to_end` of one example shape, its outcome noted."""
    note(f"{shape}: end to end")
    e = end_to_end(model, fused, ex, ep, package, shape, chosen, **kw)
    note(f"{shape}: outputs {'within' if e.outputs_ok else 'OUTSIDE'} tolerance; "
         + ", ".join(f"{t.variant} {t.ms.median_us:.3f} ms" for t in e.times)
         + "".join(f"; {r.baseline} {r.speedup:.3f}x {r.verdict.value}" for r in e.speedups)
         + (f"; {e.liger_note}" if e.liger_note else ""))
    return e


def _verdict(checks: list) -> tuple[str, bool]:
    """Whether the composition is kept: outputs within tolerance at every shape and not slower than eager."""
    bad = [e for e in checks if not e.outputs_ok]
    slower = [e for e in checks if e.kept is False and e.outputs_ok]
    if bad:
        return f"not kept: outputs off at {', '.join(e.shape for e in bad)}", False
    if slower:
        return f"not kept: slower than eager end to end at {', '.join(e.shape for e in slower)}", False
    if any(e.kept is None for e in checks):
        return "kept: outputs within tolerance (speed not measured)", True
    return "kept: outputs within tolerance and not slower than eager", True

