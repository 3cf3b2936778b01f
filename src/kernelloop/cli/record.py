"""`kernelloop record SPEC`: measure a whole pruned configuration space on a GPU into a space file.

Every configuration that survives pruning is built, verified and timed on every workload by the same
Evaluator and worker process as `optimize` (so the recording carries the same verdicts and timing policy);
the result is a `kernelloop-space/1` file that `kernelloop replay` serves without a GPU.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from ..core.device import cuda_available, device_properties, environment
from ..base.records import Candidate, Status
from ..base.records.device import Device
from ..tune.replay.space_file import FORMAT, read_space_document, write_space_file
from ..tune.search.encoding import config_key
from ..core.spec import SpecError, load_op, load_workloads
from ..core.spec.space import selected_space
from . import common
from .common import esc


_WorkloadsOpt = Annotated[Optional[Path], typer.Option(
    help="Workload file (default: the op's workloads.toml; workloads-interpret.toml with --device interpret).")]
_ShardOpt = Annotated[Optional[str], typer.Option(
    help="I/N: measure only every N-th configuration from the I-th (0-based), e.g. one shard per GPU; "
         "`kernelloop.tune.replay.merge_spaces` (and benchmarks/planner_vs_exhaustive.py) join the shard files.")]
_TemplateOpt = Annotated[Optional[list[str]], typer.Option(
    "--template", help="Record only this template of the spec (repeatable; default: every template).")]
_FixOpt = Annotated[Optional[str], typer.Option(
    "--fix", help="Pin parameters, e.g. 'TMA=1,GROUP_M=8': record only the configurations with these values (and "
         "only templates having these parameters), as `optimize --fix` searches them.")]
_ConfigsFileOpt = Annotated[Optional[Path], typer.Option("--configs", help=(
    "Record exactly these configurations, pruned or not: a JSON file with a list of configurations (each with "
    "its \"template\") or {\"configs\": {WORKLOAD_ID: [...]}} as `audit-pruning --configs-out` writes it; "
    "for timing what pruning removes beside what it keeps."))]
_ResumeOpt = Annotated[bool, typer.Option(
    help="Continue the recording in --out (written after every configuration, 'complete': false until the "
         "last): configurations already in it are not measured again.")]
_AsJsonOpt = Annotated[bool, typer.Option("--json", help="Print what was recorded as JSON (progress to stderr).")]


def record(
    spec: Annotated[str, typer.Argument(help=common.SPEC_HELP)],
    out: Annotated[Path, typer.Option(help="Space file to write (.json, or compressed: .json.xz, .json.gz).")],
    workloads: _WorkloadsOpt = None,
    device: Annotated[str, typer.Option(help="cuda (interpret only for testing the command).")] = "cuda",
    limit: Annotated[Optional[int], typer.Option(min=1, help="Measure only the first N configurations.")] = None,
    checks: Annotated[int, typer.Option(min=1, help="Verification runs per configuration.")] = 1,
    shard: _ShardOpt = None,
    templates: _TemplateOpt = None,
    fixed_text: _FixOpt = None,
    configs_file: _ConfigsFileOpt = None,
    resume: _ResumeOpt = False,
    as_json: _AsJsonOpt = False,
) -> None:
    """Build, verify and time every configuration of the pruned space on every workload; write a space file."""
    from ..core.bench.policy import policies_for

    console = common.console(stderr=as_json)
    if Device.of(device).is_cuda and not cuda_available():
        _bad(console, "bad argument", "--device cuda: no CUDA device is available here")
    try:
        bundle = load_op(common.resolve_op(spec))
        default = "workloads.toml" if Device.of(device).is_cuda else "workloads-interpret.toml"
        wls = load_workloads(common.resolve_path(workloads) or bundle.folder / default, bundle.spec)
    except SpecError as e:
        common.spec_error(console, e, spec)
    common.require_templates(bundle, templates, console)
    try:
        fixed = common.fixed_parameters(fixed_text, bundle, templates)
    except typer.BadParameter as e:
        _bad(console, "bad argument", esc(e))
    part = _parse_shard(shard, console) if shard is not None else None
    props = device_properties(device)
    if configs_file is not None and (templates or fixed_text):
        _bad(console, "bad argument", "--configs lists the configurations itself: not with --template or --fix")
    if configs_file is not None:
        configs, valid = _listed_space(configs_file, bundle, wls, console)
    else:
        configs, valid = _pruned_space(bundle, wls, props, templates, fixed)
    if not configs:
        _bad(console, "bad input", f"no configuration of {esc(bundle.spec.name)}'s templates survives pruning"
                                   f"{' with --fix ' + fixed_text if fixed_text else ''} on "
                                   f"{', '.join(w.label for w in wls)}: nothing to record")
    keys = list(configs)[:limit] if limit else list(configs)
    if part is not None:
        keys = keys[part[0]::part[1]]
    policy, _ = policies_for(device)
    doc = {"format": FORMAT, "name": f"{bundle.spec.name}-{device}", "op": bundle.spec.name, "objective": "kernel_us",
           "device": props.model_dump(mode="json"), "environment": environment(device).model_dump(mode="json"),
           "timing_policy": policy.model_dump(mode="json"),
           "params": sorted({k for c in configs.values() for k in c}),
           "workloads": [{"id": w.id, "label": w.label, "axes": w.axes, "dtype": w.dtype.value, "weight": w.weight}
                         for w in wls],
           "records": [], "planned": len(keys), "complete": False, **({"shard": list(part)} if part is not None else {}),
           **({"templates": sorted(set(templates))} if templates else {}), **({"fixed": fixed} if fixed else {}),
           **({"configs_file": configs_file.name, "unpruned": True} if configs_file is not None else {})}
    records: list[dict] = []
    if resume and out.is_file():
        records, keys = _resumed(out, doc, keys, console)
    _measure(bundle, device, policy, checks, wls, [(k, configs[k]) for k in keys], valid, out, doc, records,
             console)
    write_space_file(out, {**doc, "records": records, "complete": True})
    console.print(f"wrote {esc(out)}: {len(records)} configurations x {len(wls)} workloads")
    if as_json:
        print(json.dumps(recorded_summary(out, bundle.spec.name, device, wls, records), indent=2))


def _bad(console, kind: str, markup: str) -> NoReturn:
    """Print `markup` (rich text whose user parts the caller escaped) under `kind` and exit."""
    console.print(f"[red]{esc(kind)}:[/red] {markup}")
    raise typer.Exit(common.BAD_INPUT)


def _parse_shard(shard: str, console) -> tuple[int, int]:
    """--shard I/N as (I, N), with 0 <= I < N."""
    try:
        i, n = (int(v) for v in shard.split("/"))
        if not (n >= 1 and 0 <= i < n):
            raise ValueError
    except ValueError:
        _bad(console, "bad argument", f"--shard {esc(repr(shard))}: expected I/N with 0 <= I < N")
    return i, n


def _listed_space(configs_file: Path, bundle, wls, console) -> tuple[dict[str, dict], dict[str, set[str]]]:
    """The configurations --configs lists, by key, and the keys each workload is to measure."""
    try:
        listed = _listed_configs(configs_file, bundle, wls)
    except ValueError as e:
        _bad(console, "bad input", f"--configs {esc(configs_file)}: {esc(e)}")
    return _by_key({w.id: listed[w.id] for w in wls})


def _pruned_space(bundle, wls, props, template, fixed) -> tuple[dict[str, dict], dict[str, set[str]]]:
    """The configurations that survive pruning on some workload, by key, and the keys each workload kept."""
    return _by_key({w.id: [cfg for _, kept, _ in selected_space(bundle.spec.templates, w, props, template or None,
                                                                 fixed) for cfg in kept] for w in wls})


def _by_key(per_workload: dict[str, list[dict]]) -> tuple[dict[str, dict], dict[str, set[str]]]:
    configs: dict[str, dict] = {}
    valid: dict[str, set[str]] = {}
    for wid, cfgs in per_workload.items():
        valid[wid] = set()
        for cfg in cfgs:
            configs.setdefault(config_key(cfg), cfg)
            valid[wid].add(config_key(cfg))
    return configs, valid


def _resumed(out: Path, doc: dict, keys: list[str], console) -> tuple[list[dict], list[str]]:
    """The records of the recording in `out` (it must record the same thing) and the keys still to measure."""
    try:
        old = read_space_document(out)
    except (ValueError, OSError) as e:
        _bad(console, "bad input", f"--resume: {esc(out)} is not a space file: {esc(e)}")
    for field in ("op", "device", "timing_policy", "workloads", "shard", "templates", "fixed", "configs_file"):
        if old.get(field) != doc.get(field):
            _bad(console, "bad input", f"--resume: {esc(out)} differs in {field!r} from this recording; "
                                       f"record into another file")
    records = [r for r in old["records"] if config_key(r["config"]) in set(keys)]
    done = {config_key(r["config"]) for r in records}
    console.print(f"resuming {esc(out)}: {len(done)} of {len(keys)} configurations already recorded")
    return records, [k for k in keys if k not in done]


def _measure(bundle, device: str, policy, checks: int, wls, todo: list[tuple[str, dict]],
             valid: dict[str, set[str]], out: Path, doc: dict, records: list[dict], console) -> None:
    """Evaluate each configuration on every workload that kept it, in one worker; `records` grows and the space
    file is rewritten after every configuration (a cut recording keeps what it measured)."""
    from ..core.execute.evaluate import Evaluator
    from ..core.execute.pool import Worker, job_root

    work = out.parent / f".record-{int(time.time())}"
    work.mkdir(parents=True, exist_ok=True)  # the worker's log lives here; the worker opens it at start
    worker = Worker(device, job_root(work), log_path=work / "worker.log", remove_work_dir=True)
    evaluator = Evaluator(bundle, device, worker, policy, secrets.token_hex(16), checks)
    try:
        for i, (key, cfg) in enumerate(todo):
            cand = Candidate(op=bundle.spec.name, template=cfg["template"],
                             source=bundle.template_sources[cfg["template"]],
                             config={k: v for k, v in cfg.items() if k != "template"}, proposer="record")
            results = {}
            for w in wls:
                if key not in valid[w.id]:
                    results[w.id] = {"value": None, "status": "PRUNED", "ci": None}
                    continue
                ev = evaluator.evaluate(cand, w, worker.work_dir / f"{cand.id}-{w.id}")
                m = ev.measurement
                ok = ev.verdict.status is Status.PASSED and m is not None
                results[w.id] = {"value": m.kernel.median_us if ok else None, "status": ev.verdict.status.value,
                                 "ci": [m.kernel.ci_low_us, m.kernel.ci_high_us] if ok else None}
            records.append({"config": cfg, "results": results})
            write_space_file(out, {**doc, "records": records})
            console.print(f"[{i + 1}/{len(todo)}] {esc(key)}: " + ", ".join(
                f"{r['value']:.2f}µs" if r["value"] else r["status"] for r in results.values()))
    finally:
        worker.close()


def recorded_summary(out: Path, op: str, device: str, wls, records: list[dict]) -> dict:
    """`record --json`: the file, and per workload the statuses and the fastest configuration measured."""
    workloads = []
    for w in wls:
        rs = [(r["config"], r["results"][w.id]) for r in records if w.id in r["results"]]
        statuses: dict[str, int] = {}
        for _, res in rs:
            statuses[res["status"]] = statuses.get(res["status"], 0) + 1
        timed = [(cfg, res) for cfg, res in rs if res["value"] is not None]
        best = min(timed, key=lambda x: x[1]["value"]) if timed else None
        workloads.append({"id": w.id, "label": w.label, "statuses": statuses,
                          "best": {"config": best[0], "kernel_us": best[1]["value"], "kernel_ci_us": best[1]["ci"]}
                          if best else None})
    return {"out": str(out), "op": op, "device": device, "configurations": len(records), "complete": True,
            "workloads": workloads}


def _listed_configs(path: Path, bundle, wls) -> dict[str, list[dict]]:
    """The configurations of a --configs file per workload id; ValueError naming what is wrong."""
    import json
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"not a readable JSON file: {e}")
    if isinstance(doc, dict) and isinstance(doc.get("configs"), dict):
        per = doc["configs"]
        missing = [w.id for w in wls if w.id not in per]
        if missing:
            raise ValueError(f"no configurations for workload(s) {', '.join(missing)} (it has {', '.join(per)})")
        out = {w.id: per[w.id] for w in wls}
    elif isinstance(doc, list):
        out = {w.id: doc for w in wls}
    else:
        raise ValueError('expected a list of configurations or {"configs": {WORKLOAD_ID: [...]}}')
    params = {t.name: {p.name: p.values for p in t.params} for t in bundle.spec.templates}
    for cfgs in out.values():
        for cfg in cfgs:
            if not isinstance(cfg, dict) or cfg.get("template") not in params:
                raise ValueError(f"{cfg!r}: each configuration needs a \"template\" of {', '.join(params)}")
            declared = params[cfg["template"]]
            extra = sorted(set(cfg) - {"template"} - set(declared))
            missing = sorted(set(declared) - set(cfg))
            if extra or missing:
                raise ValueError(f"{cfg!r}: parameters {'unknown ' + str(extra) if extra else ''}"
                                 f"{' missing ' + str(missing) if missing else ''} for template {cfg['template']}")
            bad = sorted(k for k, v in declared.items() if cfg[k] not in v)
            if bad:
                raise ValueError(f"{cfg!r}: {', '.join(bad)} not among the declared values of template "
                                 f"{cfg['template']}")
    return out
