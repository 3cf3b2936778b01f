"""`kernelloop ptx`: compiled kernels at the PTX level (docs/ptx.md).

recover PATH      a compiled kernel's PTX and metadata, and its round trip through Triton's ptxas
propose TARGET    + hot windows (the SASS, or a profile's source page), rule-based edits and with --llm the
                  LLM's, static checks (CPU)
prove TARGET      + the differential proof beside the original and the ordinary verifier (GPU)
time TARGET       + timing against the original in the same process (GPU)
show RUN          the run's archived PTX-level edits and proofs
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from . import common
from .common import esc
from .llm_options import LlmBaseUrlOpt, LlmConfigOpt, LlmKeyEnvOpt, LlmModelOpt, LlmProviderOpt, llm_config

ptx_app = typer.Typer(rich_markup_mode=None, add_completion=False, no_args_is_help=True,
                      help="Compiled kernels at the PTX level: recovery, round trip, edits proposed, "
                           "proved against the original and timed (docs/ptx.md).")


@ptx_app.command("recover")
def recover(
    path: Annotated[Path, typer.Argument(help="A candidate JSON, a Triton cache entry folder, a .ptx or a .cubin.")],
    workload: Annotated[Optional[str], typer.Option(
        help="A candidate's workload axes, e.g. 'M=4096,N=4096' (default: the op's first workload).")] = None,
    dtype: Annotated[str, typer.Option(help="The workload's dtype (with --workload).")] = "fp16",
    arch: Annotated[int, typer.Option(help="Target compute capability.")] = 90,
    as_json: Annotated[bool, typer.Option("--json", help="Print the Recovery record as JSON (without PTX/cubin).")] = False,
) -> None:
    """Recover the PTX and metadata of every kernel PATH holds, re-assemble it with Triton's ptxas and compare."""
    from ..tune.ptx.recover import recover as run
    console = common.console(stderr=as_json, soft_wrap=True)
    if not path.exists():
        common.bad_argument(console, f"{path} does not exist")
    w = _workload(path, workload, dtype, console)
    try:
        result = run(path, workload=w, arch=arch)
    except (ValueError, OSError) as e:
        console.print(f"[red]cannot recover:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    if as_json:
        data = result.model_dump(mode="json", exclude={"kernels": {"__all__": {"kernel": {"ptx", "cubin_b64",
                                                                                          "metadata"}}}})
        data["round_trip_ok"] = result.round_trip_ok
        print(common_json(data))
    else:
        console.print(f"{esc(result.source)} ({esc(result.origin)}): "
                      + ("recoverable" if result.recoverable else f"[red]not recoverable[/red]: {esc(result.reason)}"))
        for rep in result.kernels:
            k, rt = rep.kernel, rep.round_trip
            known = {"warps": k.num_warps, "threads": k.threads, "shared": k.shared_bytes, "registers": k.registers}
            console.print(esc(f"  {k.name or '?'}: target {k.target or '?'}, PTX {k.ptx_version or '-'}"
                              + "".join(f", {what} {v}" for what, v in known.items() if v is not None)))
            if not k.recoverable:
                console.print(f"    not recoverable: {esc(k.reason)}")
            elif rt is None:
                console.print("    round trip: not run (no ptxas/cuobjdump)")
            elif not rt.assembled:
                console.print(f"    round trip: [red]ptxas refused it[/red]\n{esc(rt.error)}")
            else:
                same = "byte-identical cubin" if rt.identical_cubin else (
                    "no original cubin to compare" if not rt.compared_to_cubin else "cubin bytes differ")
                console.print(f"    round trip: {'[green]ok[/green]' if rt.ok else '[red]differs[/red]'} ({esc(same)}; "
                              f"{esc(rt.sass_instructions)} SASS instructions, {esc(rt.registers)} registers)")
                for d in rt.differences:
                    console.print(f"      {esc(d.kind)}: {esc(d.what)}: {esc(d.original)} -> {esc(d.reassembled)}")
    raise typer.Exit(common.OK if result.recoverable and result.round_trip_ok else common.FAILED)


def _workload(path: Path, text: str | None, dtype: str, console):
    """--workload of a candidate JSON, checked against its op's axes and dtypes (exits BAD_INPUT naming what is
    missing or unknown); for other targets its axes as given; None without --workload."""
    from ..tune.ptx.recover import parse_axes, parse_workload
    from ..base.records import Candidate, Workload
    if not text:
        return None
    try:
        if path.is_file() and path.suffix == ".json":
            return parse_workload(text, Candidate.from_json(path.read_text()).op, dtype)
        return Workload(op="", axes=parse_axes(text), dtype=dtype)
    except (ValueError, OSError) as e:   # a SpecError or a ValidationError is a ValueError
        common.bad_argument(console, f"--{e}" if str(e).startswith("workload ") else str(e))


def common_json(data: dict) -> str:
    import json
    return json.dumps(data, indent=2, sort_keys=True)


# --- below the source: propose, prove, time ----------------------------------------------------------------

Target = Annotated[Path, typer.Argument(help="A run folder (its winners) or a candidate JSON.")]
WorkloadOpt = Annotated[Optional[str], typer.Option("--workload", help="A candidate's workload axes, e.g. "
                                                    "'M=64,N=1024' (default: the op's first workload).")]
RulesOpt = Annotated[Optional[str], typer.Option("--rules", help="Comma-separated rules (default: all: cache_hint,"
                                                 "prefetch_size,unroll,predicate,hoist_loads).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the reports as JSON.")]


ProfileOpt = Annotated[Optional[Path], typer.Option(
    "--profile", help="Nsight Compute's source page as CSV (`ncu --import R.ncu-rep --csv --page source "
                      "--print-source sass` of a report with the SourceCounters section): the hot windows are "
                      "weighed by its samples per SASS instruction (default: a run's profiles/<trial>.source.csv "
                      "kept by `kernelloop profile --ncu`, else the static estimate from the SASS).")]
LlmOpt = Annotated[bool, typer.Option(
    "--llm", help="Also ask the LLM (--config / KERNELLOOP_LLM_* / --provider --model --base-url --api-key-env) "
                  "for an edit of each of the --llm-windows hottest windows; ptxas's errors and the static checks' "
                  "refusals go back to it verbatim for repair. Calls are recorded in RUN/llm-ptx (a run) or "
                  "OUT/llm (propose --out); calls already recorded there, or in --replay DIR, are answered from "
                  "the recording.")]
PtxReplayOpt = Annotated[Optional[Path], typer.Option(
    "--replay", help="Replay the PTX calls recorded in this folder (a run's llm-ptx/ folder, or the llm/ folder of "
                     "`propose --out`): no network. The provider and model come from the recording unless "
                     "--provider/--model name them.")]
LlmWindowsOpt = Annotated[int, typer.Option("--llm-windows", min=1, help="Windows the LLM rewrites, hottest first.")]
PtxPromptsOpt = Annotated[str, typer.Option("--prompts", help="PTX prompt set version (a folder of the built-in "
                                                              "prompts/ptx).")]


@dataclass(frozen=True)
class LlmArgs:
    """`--llm` and its options."""

    config: Path | None
    provider: str | None
    model: str | None
    base_url: str | None
    api_key_env: str | None
    replay: Path | None
    prompts: str
    windows: int

    @classmethod
    def given(cls, llm: bool, *args) -> "LlmArgs | None":
        """The options when --llm was given, else None."""
        return cls(*args) if llm else None


def _llm_proposer(args: LlmArgs, path: Path, out: Path | None, console):
    """The LLM's PTX proposer with its client and recording; exits BAD_INPUT on a bad setting."""
    from ..tune.propose.llm import Cassette, LLMClient, LLMConfigError, make_provider
    from ..tune.propose.llm.ptx import LlmPtxProposer, load_ptx_prompts
    folder = args.replay or (out / "llm" if out is not None else path / "llm-ptx" if path.is_dir() else None)
    try:
        if folder is None:
            raise LLMConfigError("--llm records its calls in the run folder (RUN/llm-ptx) or under `propose --out "
                                 "DIR`; give a run, --out DIR, or --replay DIR (a recording)")
        if args.replay is not None and not args.replay.is_dir():
            raise LLMConfigError(f"--replay {args.replay}: no such folder")
        cfg = llm_config(args.config, args.provider, args.model, args.base_url, args.api_key_env, replay=args.replay)
        prompts = load_ptx_prompts(args.prompts)
        mode = "replay" if args.replay is not None else "record"
        client = LLMClient(cfg, Cassette(folder, mode), make_provider(cfg) if mode == "record" else None)
    except (LLMConfigError, FileNotFoundError) as e:
        console.print(f"[red]bad argument:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    return LlmPtxProposer(client, prompts, windows=args.windows)


def _stages(path: Path, workload: str | None, dtype: str, rules: str | None, out: Path | None, as_json: bool,
            prove: bool, time_it: bool, executor: str = "gpu", checks: int = 8, max_proofs: int | None = None,
            seed: int = 0, profile: Path | None = None, llm: LlmArgs | None = None) -> None:
    from ..tune.propose.llm import ReplayMiss
    from ..tune.ptx.pipeline import Options, PtxError, prove_target, targets, work
    console = common.console(stderr=as_json, soft_wrap=True)
    if not path.exists():
        console.print(f"[red]bad argument:[/red] {esc(path)} does not exist")
        raise typer.Exit(common.BAD_INPUT)
    if prove and executor == "stand-in" and os.environ.get("TRITON_INTERPRET") != "1":
        console.print("[red]bad argument:[/red] --executor stand-in runs the template in Triton's interpreter: run "
                      "the command with TRITON_INTERPRET=1 in its environment")
        raise typer.Exit(common.BAD_INPUT)
    if prove and executor == "gpu":
        import torch
        if not torch.cuda.is_available():
            console.print("[red]cannot prove:[/red] the differential proof runs the kernels on a CUDA GPU; none here "
                          "(`--executor stand-in` runs the proof's logic in the interpreter, executing no PTX)")
            raise typer.Exit(common.STOPPED)
    opts = Options(rules=[r for r in rules.split(",") if r] if rules else None, prove=prove, executor=executor,
                   checks=checks, time_it=time_it, max_proofs=max_proofs, seed=seed)
    w = _workload(path, workload, dtype, console)
    try:
        found = targets(path, w)
        if profile is not None:
            from ..tune.profile.source_page import read_source_csv
            opts.profile, opts.profile_from = read_source_csv(profile), str(profile)
    except (PtxError, ValueError, OSError) as e:   # NcuParseError is a ValueError
        console.print(f"[red]bad argument:[/red] {esc(e)}")
        raise typer.Exit(common.BAD_INPUT)
    opts.llm = _llm_proposer(llm, path, out, console) if llm is not None else None
    reports, passed = [], 0
    for t in found:
        try:
            report, accepted = work(t, opts)
        except ReplayMiss as e:
            console.print(f"[red]replay stopped:[/red] {esc(e)}")
            raise typer.Exit(common.STOPPED)
        except ValueError as e:   # an unknown rule
            console.print(f"[red]bad argument:[/red] {esc(e)}")
            raise typer.Exit(common.BAD_INPUT)
        if t.run_dir is not None and accepted:
            from ..tune.ptx.archive import put_candidate
            from ..tune.ptx.pipeline import open_archive
            archive = open_archive(t.run_dir)
            try:
                for kernel, check in accepted:
                    put_candidate(archive, check.candidate, kernel.ptx)
            finally:
                archive.close()
        proofs = prove_target(t, accepted, opts) if prove and accepted else []
        report = report.model_copy(update={"proofs": proofs})
        reports.append(report)
        edits = [e for k in report.kernels for e in k.edits]
        passed += sum(p.passed for p in proofs) if prove else sum(e.accepted for e in edits)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for e in edits:
                (out / f"{e.candidate.id}.json").write_text(e.candidate.to_json())
                (out / f"{e.candidate.id}.diff").write_text(e.diff)
        if not as_json:
            _print_target(console, report, edits, proofs)
    if as_json:
        print(common_json({"targets": [r.model_dump(mode="json") for r in reports], "passed": passed}))
    if profile is not None and not any(w.source == "profile" for r in reports for k in r.kernels for w in k.windows):
        console.print(f"[red]bad argument:[/red] --profile {esc(profile)}: no kernel's windows could be weighed by it "
                      f"(the notes say why)")
        raise typer.Exit(common.BAD_INPUT)
    raise typer.Exit(common.OK if passed else common.FAILED)


def _print_target(console, report, edits, proofs) -> None:
    from rich.markup import escape
    console.print(f"[bold]{esc(report.op)} {esc(report.template)}[/bold] {esc(report.config)} on {esc(report.workload)} "
                  f"(parent {esc(report.parent_candidate_id)})")
    if report.error:
        console.print(f"  [red]{escape(report.error)}[/red]")
    for k in report.kernels:
        rt = k.round_trip
        console.print(f"  {esc(k.name)}: " + ("not recoverable: " + esc(k.reason) if not k.recoverable else
                                         f"round trip {'ok' if rt and rt.ok else 'differs: ' + esc(k.reason)}"))
        for n in k.notes:
            console.print(f"    [dim]{escape(n)}[/dim]")
        for w in k.windows[:3]:
            console.print(f"    window {esc(w.label or 'entry block')} lines {w.start + 1}-{w.end + 1}: {w.weight:.0%} "
                          f"({w.profile_metric or w.source}){' loop' if w.loop else ''}")
        for e in k.edits:
            state = ("[green]accepted[/green]" if e.accepted else "[red]refused[/red]: " +
                     escape("; ".join(f"{v.rule}: {v.message[:200]}" for v in e.violations)))
            same = " (ptxas made the same SASS)" if e.sass_changed is False else ""
            console.print(f"    {esc(e.candidate.id)} {esc(e.candidate.rule)}: {state}{esc(same)}")
    for p in proofs:
        t = p.timing
        timing = (f"; {t.speedup:.3f}x [{t.ci_low:.3f}, {t.ci_high:.3f}] {t.verdict} ({t.policy})" if t else "")
        console.print(escape(f"    proof {p.candidate_id} {p.rule}: {p.verdict} at {p.stage}, {len(p.cases)} cases "
                             f"[{p.executor}]{timing}" + (f": {p.message[:300]}" if p.message and not p.passed
                                                          else "")))


@ptx_app.command("propose")
def propose(path: Target, workload: WorkloadOpt = None, dtype: Annotated[str, typer.Option()] = "fp16",
            rules: RulesOpt = None,
            out: Annotated[Optional[Path], typer.Option(help="Write each edit (<id>.json) and its diff here.")] = None,
            profile: ProfileOpt = None, llm: LlmOpt = False, config: LlmConfigOpt = None,
            provider: LlmProviderOpt = None, model: LlmModelOpt = None, base_url: LlmBaseUrlOpt = None,
            api_key_env: LlmKeyEnvOpt = None, replay: PtxReplayOpt = None, llm_windows: LlmWindowsOpt = 1,
            prompts: PtxPromptsOpt = "v1", as_json: JsonOpt = False) -> None:
    """Recover, round-trip, find the hot windows, propose rule-based edits (and with --llm the LLM's) and check
    them statically (no GPU). A run's edits are archived with their parent and diff. Exit 0 when some edit passed
    the checks."""
    _stages(path, workload, dtype, rules, out, as_json, prove=False, time_it=False, profile=profile,
            llm=LlmArgs.given(llm, config, provider, model, base_url, api_key_env, replay, prompts, llm_windows))


ExecutorOpt = Annotated[Literal["gpu", "stand-in"], typer.Option(help="gpu: the kernels on CUDA with the edit substituted through Triton's "
                                          "IR override; stand-in: the proof's logic in the interpreter (CPU, runs no "
                                          "PTX; needs TRITON_INTERPRET=1).")]
ChecksOpt = Annotated[int, typer.Option(help="Seeded cases on the workload (held-out shapes come on top).")]
MaxOpt = Annotated[Optional[int], typer.Option("--max", help="Prove at most this many edits per target.")]


@ptx_app.command("prove")
def prove(path: Target, workload: WorkloadOpt = None, dtype: Annotated[str, typer.Option()] = "fp16",
          rules: RulesOpt = None, executor: ExecutorOpt = "gpu", checks: ChecksOpt = 8, max_proofs: MaxOpt = None,
          profile: ProfileOpt = None, llm: LlmOpt = False, config: LlmConfigOpt = None,
          provider: LlmProviderOpt = None, model: LlmModelOpt = None, base_url: LlmBaseUrlOpt = None,
          api_key_env: LlmKeyEnvOpt = None, replay: PtxReplayOpt = None, llm_windows: LlmWindowsOpt = 1,
          prompts: PtxPromptsOpt = "v1", as_json: JsonOpt = False) -> None:
    """Everything `propose` does, then the differential proof of each accepted edit whose SASS changed (beside the
    original on the same seeded inputs and held-out shapes, bit for bit) and the ordinary verifier. Exit 0 when
    some edit was proved."""
    _stages(path, workload, dtype, rules, None, as_json, prove=True, time_it=False, executor=executor,
            checks=checks, max_proofs=max_proofs, profile=profile,
            llm=LlmArgs.given(llm, config, provider, model, base_url, api_key_env, replay, prompts, llm_windows))


@ptx_app.command("time")
def time_(path: Target, workload: WorkloadOpt = None, dtype: Annotated[str, typer.Option()] = "fp16",
          rules: RulesOpt = None, executor: ExecutorOpt = "gpu", checks: ChecksOpt = 8, max_proofs: MaxOpt = None,
          seed: Annotated[int, typer.Option(help="Seed of the interleaving and the bootstrap.")] = 0,
          profile: ProfileOpt = None, llm: LlmOpt = False, config: LlmConfigOpt = None,
          provider: LlmProviderOpt = None, model: LlmModelOpt = None, base_url: LlmBaseUrlOpt = None,
          api_key_env: LlmKeyEnvOpt = None, replay: PtxReplayOpt = None, llm_windows: LlmWindowsOpt = 1,
          prompts: PtxPromptsOpt = "v1", as_json: JsonOpt = False) -> None:
    """`prove`, then each proved edit timed against the original in the same process (interleaved rounds, cold L2,
    the bootstrap interval and the 2 % band). A run's edits and proofs are archived. Exit 0 when some edit passed."""
    _stages(path, workload, dtype, rules, None, as_json, prove=True, time_it=True, executor=executor,
            checks=checks, max_proofs=max_proofs, seed=seed, profile=profile,
            llm=LlmArgs.given(llm, config, provider, model, base_url, api_key_env, replay, prompts, llm_windows))


@ptx_app.command("show")
def show(run: Annotated[Path, typer.Argument(help="A run folder.")], as_json: JsonOpt = False) -> None:
    """The run's archived PTX-level edits (parent, rule, diff size) and their proofs."""
    from ..core.archive import Archive
    from ..tune.ptx.archive import candidates, diff, proofs
    console = common.console(stderr=as_json, soft_wrap=True)
    path = run / "archive.sqlite"
    if not path.is_file():
        console.print(f"[red]bad argument:[/red] {esc(run)}: no archive.sqlite (is it a run folder?)")
        raise typer.Exit(common.BAD_INPUT)
    with Archive(path, readonly=True) as archive:
        runs = archive.runs()
        cands = candidates(archive)
        done = proofs(archive, runs[0]["id"]) if runs else []
        diffs = {c.id: diff(archive, c.id) for c in cands}
    if as_json:
        print(common_json({"candidates": [{**c.model_dump(mode="json"), "id": c.id, "diff": diffs[c.id]}
                                          for c in cands],
                           "proofs": [{"workload_id": w, **p.model_dump(mode="json")} for w, p in done]}))
        raise typer.Exit(common.OK)
    for c in cands:
        n = sum(1 for ln in diffs[c.id].splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
        console.print(f"{esc(c.id)} {esc(c.rule)} of {esc(c.kernel)} (parent {esc(c.parent_candidate_id)}): {n} changed lines; "
                      f"{esc(c.hypothesis[:160])}")
    for w, p in done:
        console.print(f"proof {esc(p.candidate_id)} on {esc(w)}: {esc(p.verdict)} ({esc(p.stage)})"
                      + (f", {p.timing.speedup:.3f}x {esc(p.timing.verdict)}" if p.timing else "")
                      + esc(f" [{p.executor}]"))
    if not cands:
        console.print("no PTX-level edits archived in this run")
    raise typer.Exit(common.OK)
