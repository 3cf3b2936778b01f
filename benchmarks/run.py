"""GPU benchmarks as named suites: one command per suite, one results folder per run of it.

    python3 benchmarks/run.py SUITE [SUITE ...] [--out DIR] [--dry-run]
    python3 benchmarks/run.py --list

Run from the repository root on a CUDA host. Each suite is a list of steps, each under its own time limit (a hung or
failed step costs its own time, and the next step runs). A run writes its folder (default
`benchmarks/results/<date>-<gpu>-<suite>/`):

    env.json, env.txt   GPU, driver, CUDA, torch, triton, Python, the date, the git commit and the command
    steps.tsv           step, exit status, seconds
    <step>.log          each step's stderr (and stdout, for steps that are not optimize runs)
    <step>.json         an optimize step's summary (`kernelloop optimize --json`)
    <step>.sqlite.xz    its archive, xz-compressed (`kernelloop show`, `kernelloop report` and `--prior` read it as it is)
    <step>.md           its table (benchmarks/render.py)
    README.md           all of the above in one page

`--dry-run` prints each step's command and time limit and runs nothing (no GPU needed). A host without the project's
Python dependencies can carry them as wheels in `./.whl/`: they are installed into /tmp/site first (no index, no
network), and the steps run with `src/` and /tmp/site on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from kernelloop.base.compressed import write_bytes  # noqa: E402  (the standard library only)
RESULTS = "benchmarks/results"
KL = ("python3", "-m", "kernelloop.cli.app")


@dataclass(frozen=True)
class Step:
    """One command of a suite. In `argv`, {out} is the results folder and {runs} the suite's run folders."""

    name: str
    argv: tuple[str, ...]
    timeout_s: int
    optimize: bool = False     # an optimize run: summary to {out}/NAME.json, archive xz-compressed, table rendered


@dataclass(frozen=True)
class Suite:
    name: str
    about: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


def optimize(name: str, op: str, timeout_s: int, *args: str) -> Step:
    return Step(name, (*KL, "optimize", op, "--device", "cuda", "--out", f"{{runs}}/{name}", "--json", *args),
                timeout_s, optimize=True)


def script(name: str, timeout_s: int, *argv: str) -> Step:
    return Step(name, ("python3", *argv), timeout_s)


def gpu_tests(name: str, timeout_s: int, *paths: str, k: str | None = None) -> Step:
    return Step(name, ("python3", "-m", "pytest", "-m", "gpu", *(paths or ("tests",)), "-v", "--tb=short",
                       "-p", "no:cacheprovider", "--timeout", "240",
                       # one process: the suite's addopts start pytest-xdist workers, which would time side by side
                       "-p", "no:xdist", "-o", "addopts=-ra", *(("-k", k) if k else ())), timeout_s)


W = "benchmarks/workloads"
R = RESULTS
ATTENTION_GLUON = ("--template", "gluon_fa", "--strategy", "exhaustive", "--fix", "OVERLAP=1", "--budget", "24,250s", "--baseline", "sdpa-cudnn", "--baseline", "sdpa-flash",
                   "--baseline", "sdpa-efficient", "--baseline", "sdpa-math")
DECODE = "ops/gemm/workloads-decode.toml"
ATTENTION_BACKENDS = ("--baseline", "sdpa-cudnn", "--baseline", "sdpa-flash", "--baseline", "sdpa-efficient",
                      "--baseline", "sdpa-math")
DELIVERY_OPS = ("rmsnorm", "gemm_nt", "attention_causal")
# the GEMM fp16 4096³ configuration search: every 128-row tile of the three Gluon templates
GEMM_4096 = ("--template", "gluon_ws", "--template", "gluon_subtiled", "--template", "gluon_pingpong", "--strategy",
             "exhaustive", "--fix", "BLOCK_M=128", "--budget", "20,200s", "--workloads", f"{W}/gemm-4096.toml")

SUITES = {s.name: s for s in (
    Suite("norms", "LayerNorm, RMSNorm and softmax fp16 [4096, 4096], each winner beside eager, torch.compile, "
          "Liger-Kernel and a device copy of the same bytes", (
              optimize("layernorm-rowwise", "layernorm", 200, "--strategy", "exhaustive", "--template", "rowwise",
                       "--fix", "BLOCK_N=4096,ROWS=1", "--budget", "30,70s", "--workloads", f"{W}/layernorm-4096.toml"),
              optimize("rmsnorm-persistent", "rmsnorm", 260, "--strategy", "exhaustive", "--template", "persistent",
                       "--budget", "64,150s", "--workloads", f"{W}/rmsnorm-4096.toml"),
              optimize("softmax-chunked", "softmax", 220, "--strategy", "exhaustive", "--template", "chunked",
                       "--budget", "60,100s", "--workloads", f"{W}/softmax-4096.toml"))),
    Suite("norms-shapes", "the three row ops over their six-shape suites (ops/<op>/workloads.toml), 12 evaluations a "
          "workload", tuple(optimize(f"{op}-shapes", op, 300, "--budget", "12,200s") for op in
                            ("layernorm", "rmsnorm", "softmax"))),
    Suite("gemm-4096", "GEMM fp16 4096³: every 128-row tile of the three Gluon templates, beside cuBLAS", (
        optimize("gemm-4096", "gemm", 300, *GEMM_4096, "--baseline", "cublas"),)),
    Suite("pipeline", "the evaluation pipeline during the GEMM fp16 4096³ configuration search of `gemm-4096` (no "
          "confirmation): the GPU's busy share (verifying or timing) and trials per GPU-minute beside the recorded "
          "run (14 trials in 55 s)", (
              optimize("pipeline-gemm-4096", "gemm", 300, *GEMM_4096, "--no-confirm", "--in-flight", "4"),
              script("pipeline-figures", 120, "benchmarks/pipeline_gpu.py", "{runs}/pipeline-gemm-4096",
                     "--baseline", f"{R}/2026-12-01-h200-gemm/gemm-4096.sqlite.xz", "--out", "{out}/pipeline.json"))),
    Suite("pipeline-2gpu", "the same search on one GPU and on two (one worker per GPU), beside the recorded run", (
              optimize("pipeline-1gpu", "gemm", 300, *GEMM_4096, "--no-confirm", "--in-flight", "4",
                       "--devices", "1"),
              optimize("pipeline-2gpu", "gemm", 300, *GEMM_4096, "--no-confirm", "--in-flight", "8",
                       "--devices", "2"),
              script("pipeline-figures", 120, "benchmarks/pipeline_gpu.py", "{runs}/pipeline-1gpu",
                     "{runs}/pipeline-2gpu", "--baseline", f"{R}/2026-12-01-h200-gemm/gemm-4096.sqlite.xz",
                     "--out", "{out}/pipeline.json"))),
    Suite("gemm-prefill", "the 24 Llama-3-8B/70B prefill GEMMs (bf16) over the tiled, split-K and Gluon templates, each "
          "warm-started from its own best in the recorded suite run, beside cuBLAS", (
              optimize("gemm-prefill", "gemm", 560, "--template", "tiled", "--template", "splitk", "--template",
                       "gluon_ws", "--template", "gluon_subtiled", "--budget", "3,330s", "--baseline", "cublas",
                       "--workloads", "ops/gemm/workloads-prefill.toml",
                       "--prior", f"{R}/2026-12-01-h200-gemm/gemm-prefill.sqlite.xz"),)),
    Suite("gemm-decode", "the 32 Llama-3 decode GEMMs (M = 1…128, bf16): the swap-AB template searched first (no "
          "confirmation), then every template warm-started from that search and the recorded decode run, the "
          "winners confirmed beside cuBLAS", (
              optimize("gemm-decode-swapab", "gemm", 240, "--template", "swapab", "--budget", "8,150s",
                       "--in-flight", "8", "--no-confirm", "--workloads", DECODE),
              optimize("gemm-decode", "gemm", 300, "--budget", "2,100s", "--in-flight", "8", "--baseline", "cublas",
                       "--workloads", DECODE,
                       "--prior", f"{R}/2026-12-01-h200-gemm-decode/gemm-decode.sqlite.xz",
                       "--prior", "{runs}/gemm-decode-swapab"))),
    Suite("attention", "flash-attention forward, both 9-workload suites (non-causal and causal, MHA and GQA), "
          "warm-started from the recorded runs, beside all four SDPA backends", (
              optimize("attention-suite", "attention", 420, "--budget", "1,200s", *ATTENTION_BACKENDS,
                       "--prior", f"{R}/2026-12-01-h200-attention/attention-suite.sqlite.xz",
                       "--prior", f"{R}/2026-12-01-h200-attention/attention-suite-first-warm-start.sqlite.xz"),
              optimize("attention_causal-suite", "attention_causal", 420, "--budget", "1,200s", *ATTENTION_BACKENDS,
                       "--prior", f"{R}/2026-12-01-h200-attention/attention_causal-suite.sqlite.xz"))),
    Suite("attention-gluon", "the warp-specialized Gluon flash-attention template (loader warp, K/V ring, two "
          "ping-pong consumer warpgroups): its whole pruned space on the seed shape b8 h8 s4096 d128 fp16, non-causal "
          "and causal (24 configurations each), beside all four SDPA backends", (
              optimize("attention-gluon", "attention", 290, *ATTENTION_GLUON, "--workloads",
                       f"{W}/attention-seed.toml"),
              optimize("attention_causal-gluon", "attention_causal", 290, *ATTENTION_GLUON, "--workloads",
                       f"{W}/attention_causal-seed.toml"))),
    Suite("attention-gluon-suites", "the Gluon flash-attention template on both 9-workload attention suites "
          "(128-key blocks, ping-pong turns, the first two ring depths), beside all four SDPA backends", tuple(
              optimize(f"{op}-gluon-suite", op, 290, "--template", "gluon_fa", "--strategy", "exhaustive", "--fix",
                       "BLOCK_N=128", "--fix", "PINGPONG=1", "--budget", "2,240s", *ATTENTION_BACKENDS)
              for op in ("attention", "attention_causal"))),
    Suite("attention-agent", "the Gluon flash-attention template found through the agent path: a workspace per op "
          "on the seed shape, rounds of `kernelloop submit` with parents and hypotheses (the flash winner, free-running "
          "consumers, ping-pong turns, a deeper ring), the last confirmed beside the SDPA backends",
          tuple(script(f"{op}-agent", 290, "benchmarks/attention_agent.py", "--op", op, "--out", "{out}/agent")
                for op in ("attention", "attention_causal"))),
    Suite("aa", "the A/A experiment: kernels from 7 µs to 2 ms timed against themselves under the default policy "
          "(how often the verdict calls a difference that is not there)", (
              script("aa", 480, "benchmarks/aa_experiment.py", "--device", "cuda", "--comparisons", "200",
                     "--samples", "40", "--out", "{out}/aa.json"),
              script("side-stream", 90, "benchmarks/side_stream.py", "--out", "{out}/side_stream.json"))),
    Suite("ptx", "below the source: the differential proof against the mutation generator's wrong edits (all must "
          "be rejected), the rule-based PTX edits of the recorded norms winners proved and timed against their "
          "source-level parents", (
              script("ptx-proof", 470, "benchmarks/ptx_proof.py", "--out", "{out}", "--budget-s", "400"),)),
    Suite("schedule", "the typed schedules: the static gate's precision on real verdicts (the loop in audit mode over "
          "every pruned Gluon/schedule configuration of GEMM fp16 4096³ and three schedules the gate rejects) and a "
          "schedule-level GEMM search against the hand-written Gluon templates, gate on",
          (script("schedule-gpu", 560, "benchmarks/schedule_gpu.py", "--out", "{out}/schedule", "--budget", "6"),)),
    Suite("gpu-tier", "every test marked `gpu` (the CUDA evaluation path, timing policy, profiler, GPU kernels, the "
          "package on CUDA)", (gpu_tests("gpu-tests", 590),)),
    Suite("fusion", "fusion from the model's graph on a Llama-3-8B-shaped decoder (4 layers, bf16, eps 1e-5): residual "
          "add + RMSNorm, SwiGLU and rotary realised through the loop beside their unfused sequences, composed, "
          "and timed end to end beside eager, torch.compile and Liger-Kernel at 4x2048 and 1x512",
          (script("fusion-e2e", 560, "benchmarks/fusion_e2e.py", "--out", "{out}/fusion"),)),
    Suite("delivery", "the delivery path on the GPU: capture a model, optimize its cards, export a package, the "
          "end-to-end check with dispatch counts, one op re-optimized on the counted shapes; the package's GPU test "
          "and the packaged-op host overhead", (
              Step("capture", (*KL, "capture", "llama-tiny", "--device", "cuda", "--out", "{out}/cards/cards.json",
                               "--workloads-dir", "{out}/cards"), 120),
              *(optimize(op, op, 240, "--workloads", f"{{out}}/cards/{op}.toml", "--budget", "2")
                for op in DELIVERY_OPS),
              Step("export", (*KL, "export", *(f"{{runs}}/{op}" for op in DELIVERY_OPS), "--out", "{out}/llama-pkg",
                              "--extend", "M=1:64"), 240),
              Step("e2e", (*KL, "e2e", "llama-tiny", "{out}/llama-pkg", "--device", "cuda", "--batch", "3", "--seq", "7",
                           "--counts", "{out}/counts.json", "--out", "{out}/e2e"), 240),
              optimize("attention-again", "attention_causal", 240, "--workloads", "{out}/counts.json", "--budget", "2"),
              gpu_tests("gpu-package-test", 150, "tests/package/test_gpu_package.py"),
              script("packaged-overhead", 200, "benchmarks/packaged_overhead.py", "--out", "{out}/overhead",
                     "--budget", "3"))),
)}


def resolve(step: Step, out: Path, runs: Path) -> list[str]:
    return [a.replace("{out}", str(out)).replace("{runs}", str(runs)) for a in step.argv]


def default_out(suite: str, gpu: str, today: str | None = None) -> Path:
    slug = "".join(c if c.isalnum() else "-" for c in gpu.lower().removeprefix("nvidia ")).strip("-") or "gpu"
    return Path(RESULTS) / f"{today or dt.date.today().isoformat()}-{slug}-{suite}"


def _out(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(command: list[str]) -> dict:
    """The device and software facts a results folder records (read in a subprocess: this process keeps no GPU)."""
    probe = ("import json, torch, triton, platform; p = torch.cuda.get_device_properties(0) if "
             "torch.cuda.is_available() else None; print(json.dumps({'gpu': p.name if p else '', 'cuda': "
             "torch.version.cuda, 'torch': torch.__version__, 'triton': triton.__version__, "
             "'python': platform.python_version()}))")
    facts = json.loads(_out([sys.executable, "-c", probe]) or "{}")
    smi = _out(["nvidia-smi", "--query-gpu=driver_version,power.limit", "--format=csv,noheader"]).splitlines()
    driver, power = ([s.strip() for s in smi[0].split(",")] + ["", ""])[:2] if smi else ("", "")
    return {**facts, "driver": driver, "power_limit": power,
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": _out(["git", "-C", str(ROOT), "rev-parse", "HEAD"]),
            "command": shlex.join(command)}


def carry_wheels() -> dict[str, str]:
    """Install ./.whl/*.whl into /tmp/site when present; the environment the steps run with."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    paths = [str(ROOT / "src")]
    if wheels:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--no-cache-dir", "--upgrade", "--target", "/tmp/site", *map(str, wheels)], check=True)
        paths.append("/tmp/site")
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_step(step: Step, argv: list[str], out: Path, runs: Path, env: dict) -> tuple[int, float]:
    """Run one step under its limit (its whole process group stopped at the limit); its files into `out`."""
    t0 = time.monotonic()
    stdout = open(out / f"{step.name}.json" if step.optimize else out / f"{step.name}.log", "w")
    stderr = open(out / f"{step.name}.log", "a") if step.optimize else subprocess.STDOUT
    try:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            rc = proc.wait(timeout=step.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = 124
    finally:
        stdout.close()
        if stderr is not subprocess.STDOUT:
            stderr.close()
    if step.optimize:
        db = runs / step.name / "archive.sqlite"
        if db.is_file():
            con = sqlite3.connect(db)          # a step stopped at its limit leaves trials in the write-ahead log
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
            write_bytes(out / f"{step.name}.sqlite.xz", db.read_bytes())
        table = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "render.py"), str(out / f"{step.name}.json")],
                               capture_output=True, text=True, env=env)
        (out / f"{step.name}.md").write_text(table.stdout or table.stderr)
    return rc, time.monotonic() - t0


def write_readme(suite: Suite, out: Path, env: dict, results: list[tuple[Step, int, float]]) -> None:
    lines = [f"# {suite.name}: {suite.about}", "",
             f"{env.get('gpu') or 'no GPU'}, driver {env.get('driver') or '?'}, power limit "
             f"{env.get('power_limit') or '?'}; CUDA {env.get('cuda')}, torch {env.get('torch')}, triton "
             f"{env.get('triton')}, Python {env.get('python')}; {env['date']}, commit {env.get('commit') or '?'}.", "",
             f"    {env['command']}", "", "| step | exit | seconds |", "|---|---|---|"]
    lines += [f"| {s.name} | {rc} | {secs:.0f} |" for s, rc, secs in results]
    for s, _, _ in results:
        md = out / f"{s.name}.md"
        if md.is_file():
            lines += ["", f"## {s.name}", "", md.read_text().strip()]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def pick_steps(suite: Suite, names: list[str]) -> Suite:
    """`suite` with only the steps named (in the suite's order); every name must be one of its steps."""
    if not names:
        return suite
    known = [s.name for s in suite.steps]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"{suite.name} has no step {', '.join(unknown)}; its steps: {', '.join(known)}")
    return Suite(suite.name, suite.about, tuple(s for s in suite.steps if s.name in names))


def run_suite(suite: Suite, out: Path, command: list[str], env_vars: dict, runs_root: Path = ROOT / "runs") -> int:
    """Run every step of `suite` in order, each under its limit; write the results folder `out`. 0: all passed."""
    runs = runs_root / f"bench-{suite.name}"
    out.mkdir(parents=True, exist_ok=True)
    env = environment(command)
    (out / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    (out / "env.txt").write_text("".join(f"{k}: {v}\n" for k, v in env.items()))
    results = []
    for step in suite.steps:
        if step.optimize:
            shutil.rmtree(runs / step.name, ignore_errors=True)
        runs.mkdir(parents=True, exist_ok=True)
        rc, secs = run_step(step, resolve(step, out, runs), out, runs, env_vars)
        results.append((step, rc, secs))
        with open(out / "steps.tsv", "a") as f:
            f.write(f"{step.name}\t{rc}\t{secs:.0f}\n")
        print(f"{suite.name}/{step.name}: exit {rc} in {secs:.0f} s", flush=True)
    write_readme(suite, out, env, results)
    print(f"results: {out}")
    return 0 if all(rc == 0 for _, rc, _ in results) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suites", nargs="*", metavar="SUITE", help="one or more of: " + ", ".join(SUITES))
    ap.add_argument("--out", type=Path, help="results folder (one suite only; default "
                                             f"{RESULTS}/<date>-<gpu>-<suite>)")
    ap.add_argument("--dry-run", action="store_true", help="print each step's command and limit; run nothing")
    ap.add_argument("--list", action="store_true", help="list the suites")
    ap.add_argument("--step", action="append", default=[], metavar="NAME",
                    help="run only this step of the suite (repeatable; one suite only): a suite whose steps add up "
                         "to more than one command's time runs a step at a time, each into its own --out")
    args = ap.parse_args(argv)
    if args.list:
        for s in SUITES.values():
            print(f"{s.name:14s} {len(s.steps)} step(s), ≤ {sum(x.timeout_s for x in s.steps)} s: {s.about}")
            print(f"{'':14s} steps: {', '.join(f'{x.name} (≤ {x.timeout_s} s)' for x in s.steps)}")
        return 0
    unknown = [s for s in args.suites if s not in SUITES]
    if not args.suites or unknown:
        ap.print_usage(sys.stderr)
        print(f"{'unknown suite ' + ', '.join(unknown) if unknown else 'name a suite'}; the suites: "
              f"{', '.join(SUITES)}", file=sys.stderr)
        return 2
    if args.out is not None and len(args.suites) > 1:
        print("--out names one results folder: give one suite with it", file=sys.stderr)
        return 2
    if args.step and len(args.suites) > 1:
        print("--step names steps of one suite: give one suite with it", file=sys.stderr)
        return 2
    try:
        suites = {name: pick_steps(SUITES[name], args.step) for name in args.suites}
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if args.dry_run:
        for name in args.suites:
            suite = suites[name]
            out = args.out or default_out("-".join([name, *args.step]), "GPU")
            runs = Path("runs") / f"bench-{name}"
            print(f"# {name}: {suite.about}\n# results folder: {out}")
            for step in suite.steps:
                print(f"{step.name}\t{step.timeout_s}\t{shlex.join(resolve(step, out, runs))}")
        return 0
    gpu = _out([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name(0) "
                "if torch.cuda.is_available() else '')"])
    if not gpu:
        print("no CUDA GPU here: these suites measure GPU kernels (use --dry-run to see their commands)",
              file=sys.stderr)
        return 3
    outs = {name: (args.out or default_out("-".join([name, *args.step]), gpu)).resolve() for name in args.suites}
    for out in outs.values():
        if out.exists() and any(out.iterdir()):
            print(f"{out} already holds results: give another --out", file=sys.stderr)
            return 2
    env_vars = carry_wheels()
    command = ["python3", "benchmarks/run.py", *(sys.argv[1:] if argv is None else argv)]
    return max(run_suite(suites[name], out, command, env_vars) for name, out in outs.items())


if __name__ == "__main__":
    sys.exit(main())
