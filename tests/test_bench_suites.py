"""benchmarks/run.py on a CPU host: the suites' commands (dry run), argument checks, every file a suite reads,
every optimize step through the real command's checks, and a suite's results folder written by the runner."""

from __future__ import annotations

import lzma
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

import kernelloop.core.device
from kernelloop.base.builtin import resolve_path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = ROOT / "tests" / "fixtures" / "archives" / "h200-attention-exhaustive.sqlite.xz"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = mod           # dataclasses look their module up
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_run", None)


def test_the_named_suites_exist_and_dry_run_lists_each_command(bench, capsys):
    assert {"norms", "gemm-prefill", "gemm-decode", "attention", "aa", "gpu-tier", "delivery", "ptx", "schedule"} <= set(bench.SUITES)
    assert bench.main(["--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in bench.SUITES)
    assert bench.main([*bench.SUITES, "--dry-run"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split("\t") for ln in out.splitlines() if not ln.startswith("#")]
    assert len(rows) == sum(len(s.steps) for s in bench.SUITES.values())
    assert all(int(limit) > 0 and cmd for _, limit, cmd in rows)
    assert out.count("# results folder: benchmarks/results/") == len(bench.SUITES)
    assert "{out}" not in out and "{runs}" not in out
    # the delivery path, in order: capture, the cards' ops optimized, export, e2e with counts, re-optimized on them
    names = [s.name for s in bench.SUITES["delivery"].steps]
    assert names[:7] == ["capture", "rmsnorm", "gemm_nt", "attention_causal", "export", "e2e", "attention-again"]


def test_a_dry_run_with_out_resolves_that_folder(bench, capsys, tmp_path):
    assert bench.main(["delivery", "--dry-run", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert f"--workloads-dir {tmp_path / 'd'}/cards" in out and f"--counts {tmp_path / 'd'}/counts.json" in out
    assert "--workloads " + str(tmp_path / "d" / "counts.json") in out


@pytest.mark.parametrize("args, said", [
    ([], "name a suite"),
    (["norms", "nope"], "unknown suite nope"),
    (["norms", "aa", "--out", "x", "--dry-run"], "--out names one results folder"),
    (["norms", "aa", "--step", "aa", "--dry-run"], "--step names steps of one suite"),
    (["delivery", "--step", "nope", "--dry-run"], "delivery has no step nope; its steps: capture"),
])
def test_argument_errors_exit_2_saying_why(bench, capsys, args, said):
    assert bench.main(args) == 2
    assert said in capsys.readouterr().err


def test_a_step_runs_alone_into_its_own_default_folder(bench, capsys):
    assert bench.main(["delivery", "--step", "e2e", "--step", "export", "--dry-run"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split("\t")[0] for ln in out.splitlines() if not ln.startswith("#")]
    assert rows == ["export", "e2e"]                    # the suite's order, not the order named
    assert "-delivery-e2e-export" in out
    assert all(s.timeout_s <= 600 for suite in bench.SUITES.values() for s in suite.steps)   # each fits a command


def test_without_a_gpu_a_real_run_refuses(bench, capsys, monkeypatch):
    monkeypatch.setattr(bench, "_out", lambda cmd: "")          # what the probe prints on a host without CUDA
    monkeypatch.setattr(bench, "carry_wheels", lambda: pytest.fail("nothing is installed before the check"))
    assert bench.main(["norms"]) == 3
    assert "no CUDA GPU" in capsys.readouterr().err


def test_every_repository_file_a_suite_reads_exists(bench):
    refs = {a for s in bench.SUITES.values() for st in s.steps for a in st.argv
            if re.match(r"(benchmarks|ops|tests)/", a)}
    assert "benchmarks/results/2026-12-01-h200-gemm/gemm-prefill.sqlite.xz" in refs
    # ops/<name>/... is the built-in op's file (kernelloop.base.builtin.resolve_path), the rest is relative to the clone
    assert sorted(r for r in refs if not ((ROOT / r).exists() or resolve_path(r).exists())) == []


def test_every_optimize_step_passes_the_commands_checks(bench, monkeypatch, tmp_path):
    """Each optimize step (workloads from the repository) through the real command up to the run: spec, workload
    file, templates, --fix, baselines and every --prior read and checked as on the GPU host, then each workload
    must keep configurations after pruning for an H200-like device. A wrong argument would cost a GPU run."""
    from typer.testing import CliRunner

    import kernelloop.cli.optimize as optimize_cli
    from kernelloop.cli.app import app
    from kernelloop.core.device import device_properties
    from kernelloop.core.spec.space import selected_space

    h200 = device_properties("interpret").with_(virtual=False, name="H200-like (sm_90, 132 SMs)")
    seen = []

    class Checked(RuntimeError):
        pass

    def fake_run(bundle, wls, opts, run_dir, **kw):   # the one way into the loop (tune/loop/entry.py)
        if opts.templates or opts.fixed:      # a narrowed space can prune to nothing
            for w in wls:
                kept = [c for _, k, _ in selected_space(bundle.spec.templates, w, h200, opts.templates,
                                                        opts.fixed) for c in k]
                assert kept, f"{w.label}: nothing kept for {opts.templates} {opts.fixed}"
        seen.append(opts)
        raise Checked("arguments checked")

    monkeypatch.setattr(kernelloop.core.device, "cuda_available", lambda: True)
    monkeypatch.setattr(kernelloop.core.device, "device_properties", lambda device: h200)  # the pre-run space check
    import kernelloop.tune.loop as entry
    monkeypatch.setattr(entry, "run", fake_run)
    monkeypatch.chdir(ROOT)
    steps = [st for s in bench.SUITES.values() for st in s.steps if st.optimize and "{out}" not in " ".join(st.argv)]
    assert len(steps) >= 10
    for st in steps:
        argv = bench.resolve(st, tmp_path / "out", tmp_path / "runs")
        # a warm start from an earlier step's run folder (gemm-decode) exists only once that step has run
        earlier = [i for i, a in enumerate(argv) if a == "--prior" and argv[i + 1].startswith(str(tmp_path / "runs"))]
        argv = [a for i, a in enumerate(argv) if i not in earlier and i - 1 not in earlier]
        assert argv[:4] == ["python3", "-m", "kernelloop.cli.app", "optimize"]
        r = CliRunner().invoke(app, argv[3:])
        assert r.exit_code == 3 and "arguments checked" in r.output, (st.name, r.output)
    assert len(seen) == len(steps)


def test_the_other_kernelloop_steps_use_options_their_commands_have(bench):
    from typer.testing import CliRunner

    from kernelloop.cli.app import app
    for s in bench.SUITES.values():
        for st in s.steps:
            if st.argv[:3] != bench.KL or st.optimize:
                continue
            helped = CliRunner().invoke(app, [st.argv[3], "--help"], terminal_width=200)
            assert helped.exit_code == 0
            flat = re.sub(r"[\s│]+", " ", helped.output)
            for flag in (a for a in st.argv[4:] if a.startswith("--")):
                assert flag in flat, (s.name, st.name, flag)


def test_a_suite_run_writes_its_results_folder(bench, tmp_path):
    """The runner on stand-in steps: an optimize-kind step (a real archive, its summary), a command, and one that
    outlives its limit (stopped, exit 124, the next step still runs)."""
    fake_optimize = ("import sys, json; from pathlib import Path; run = Path(sys.argv[1]); "
                     "run.mkdir(parents=True); from kernelloop.base.compressed import decompress_to; "
                     "decompress_to(sys.argv[2], run / 'archive.sqlite'); "
                     "from kernelloop.core.archive import Archive; from kernelloop.deliver.report.summary import run_summary; "
                     "a = Archive(run / 'archive.sqlite', readonly=True); print(run_summary(a).model_dump_json())")
    suite = bench.Suite("fake", "stand-in steps", (
        bench.Step("opt", ("python3", "-c", fake_optimize, "{runs}/opt", str(ARCHIVE)), 60, optimize=True),
        bench.Step("hello", ("python3", "-c", "print('hello into {out}')"), 30),
        bench.Step("hang", ("python3", "-c", "import time; time.sleep(60)"), 2),
        bench.Step("after", ("python3", "-c", "print('still ran')"), 30),
    ))
    out = tmp_path / "results"
    env = {**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")}
    rc = bench.run_suite(suite, out, ["python3", "benchmarks/run.py", "fake"], env, runs_root=tmp_path / "runs")
    assert rc == 1                                                   # one step failed (the hang)
    steps = [ln.split("\t") for ln in (out / "steps.tsv").read_text().splitlines()]
    assert [(n, rc) for n, rc, _ in steps] == [("opt", "0"), ("hello", "0"), ("hang", "124"), ("after", "0")]
    assert float(steps[2][2]) < 20
    assert (out / "hello.log").read_text().strip() == f"hello into {out}"
    assert (out / "after.log").read_text().strip() == "still ran"
    summary = json.loads((out / "opt.json").read_text())
    assert summary["op"] == "attention"
    with lzma.open(out / "opt.sqlite.xz") as f:          # the archive kept xz-compressed
        assert f.read(16) == b"SQLite format 3\x00"
    assert "sdpa-cudnn" in (out / "opt.md").read_text()
    env_rec = json.loads((out / "env.json").read_text())
    assert {"gpu", "driver", "torch", "triton", "date", "command", "commit"} <= set(env_rec)
    assert env_rec["command"] == "python3 benchmarks/run.py fake" and env_rec["torch"]
    readme = (out / "README.md").read_text()
    assert "python3 benchmarks/run.py fake" in readme and "| hang | 124 |" in readme and "## opt" in readme
    shutil.rmtree(tmp_path / "runs")
