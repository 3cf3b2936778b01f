"""scripts/gpu_session.sh packs what its steps wrote into one archive even when the device call's `timeout`
stops it mid-step (only a handful of files come back from a device call)."""

import shutil
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_stopped_session_still_packs_its_steps(tmp_path):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = subprocess.run(["timeout", "8", "bash", "scripts/gpu_session.sh", "selftest"], cwd=tmp_path,
                       env={"OUT": str(out), "PATH": "/usr/bin:/bin:/usr/local/bin", "SELFTEST_SLEEP": "120"},
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 124, r.stdout + r.stderr
    assert time.monotonic() - t0 < 30      # the 120 s step was stopped, not waited for
    left = sorted(p.name for p in out.iterdir())
    assert left == ["env-selftest.txt", "session-selftest.tgz", "steps.tsv"], r.stdout + r.stderr
    with tarfile.open(out / "session-selftest.tgz") as t:
        names = {Path(n).name for n in t.getnames()}
    assert {"quick.log", "slow.log", "steps.tsv"} <= names
    steps = (out / "steps.tsv").read_text()
    assert steps.startswith("quick\t0\t") and "stopped by a signal" in steps


def test_a_finished_session_packs_and_exits_0(tmp_path):
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    out = tmp_path / "out"
    r = subprocess.run(["bash", "scripts/gpu_session.sh", "selftest"], cwd=tmp_path,
                       env={"OUT": str(out), "PATH": "/usr/bin:/bin:/usr/local/bin", "SELFTEST_SLEEP": "0"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["env-selftest.txt", "session-selftest.tgz", "steps.tsv"]
    steps = (out / "steps.tsv").read_text().splitlines()
    assert [line.split("\t")[:2] for line in steps] == [["quick", "0"], ["slow", "0"]]


def test_every_repository_file_a_phase_reads_exists():
    """A phase that names a missing workload file or prior archive would spend a device call on an error."""
    import re
    text = (ROOT / "scripts" / "gpu_session.sh").read_text()
    refs = set(re.findall(r"(?<![\w$/])((?:benchmarks|ops)/[\w./-]+\.(?:toml|sqlite|json|gz))", text))
    assert len(refs) >= 20 and "benchmarks/workloads/gemm-prefill-few-tiles.toml" in refs
    assert [r for r in sorted(refs) if not (ROOT / r).is_file()] == []


def _optimize_calls(text: str) -> list[tuple[str, str, list[str]]]:
    """(phase, step name, the arguments after the op) of every `optimize NAME SECONDS OP ...` line of each phase
    of gpu_session.sh, continuation lines joined; words with shell expansions (`${...}`) and paths under runs/ (written
    by an earlier step of the same call) are left out."""
    import re
    import shlex
    calls, phase = [], None
    lines = text.replace("\\\n", " ").splitlines()
    for line in lines:
        m = re.match(r"^  ([\w-]+)\)", line)
        if m:
            phase = m.group(1)
        words = line.split()
        if phase and words[:1] == ["optimize"] and len(words) >= 4:
            args = [w for w in shlex.split(" ".join(words[4:])) if "$" not in w]
            cleaned = []
            for i, w in enumerate(args):
                if w.startswith("runs/") or (w == "--prior" and i + 1 < len(args) and args[i + 1].startswith("runs/")):
                    continue
                cleaned.append(w)
            calls.append((phase, words[1], [words[3], *cleaned]))
    return calls


def test_the_newest_phases_optimize_arguments_pass_the_commands_checks(monkeypatch, tmp_path):
    """Each `optimize` of the phases written since the ninth session, through the real command up to the run: the
    spec, workload file, templates, --fix, baselines and every --prior are read and checked as on the GPU host;
    then every workload must keep configurations after pruning for an H200-like device. A wrong argument would
    otherwise cost a device call."""
    from typer.testing import CliRunner

    import kernelloop.cli.optimize as optimize_cli
    from kernelloop.cli.app import app
    from kernelloop.device import device_properties
    from kernelloop.spec.space import selected_space

    h200 = {**device_properties("interpret"), "virtual": False, "name": "H200-like (sm_90, 132 SMs)"}
    seen, pruned = [], set()

    class Checked(RuntimeError):
        pass

    class FakeController:
        def __init__(self, bundle, wls, opts, run_dir, on_progress):
            self.bundle, self.wls, self.opts = bundle, wls, opts

        def run(self, resume=False):
            # a narrowed space (--template, --fix) can prune to nothing; each combination is pruned once
            narrowed = (tuple(self.opts.templates or ()), tuple(sorted((self.opts.fixed or {}).items())))
            for w in self.wls if any(narrowed) else ():
                if (w.id, narrowed) in pruned:
                    continue
                kept = [c for _, k, _ in selected_space(self.bundle.spec.templates, w, h200, self.opts.templates,
                                                        self.opts.fixed) for c in k]
                assert kept, f"{w.label}: nothing kept for templates {self.opts.templates} fix {self.opts.fixed}"
                pruned.add((w.id, narrowed))
            seen.append(self.opts)
            raise Checked("arguments checked")

    monkeypatch.setattr(optimize_cli, "cuda_available", lambda: True)
    monkeypatch.setattr(optimize_cli, "Controller", FakeController)
    monkeypatch.chdir(ROOT)
    import re
    # the phases from the ninth session on (s10a, ...): older ones name what has changed since
    calls = [c for c in _optimize_calls((ROOT / "scripts" / "gpu_session.sh").read_text())
             if re.fullmatch(r"s(\d+)[a-z]", c[0]) and int(re.fullmatch(r"s(\d+)[a-z]", c[0]).group(1)) >= 10]
    assert len(calls) >= 9 and {"s12a", "s12c", "s12d"} <= {p for p, _, _ in calls}
    for phase, name, (op, *args) in calls:
        r = CliRunner().invoke(app, ["optimize", f"ops/{op}", "--device", "cuda", "--out", str(tmp_path / name),
                                     "--json", *args])
        assert r.exit_code == 3 and "arguments checked" in r.output, (phase, name, r.output)
    assert len(seen) == len(calls) and len(pruned) >= 30
