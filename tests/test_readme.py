"""The README's set-up and quickstart commands, read from README.md itself (its code blocks), each checked:

Run for real, all four quickstarts in ONE fresh folder outside the clone, in the Triton interpreter, in the README's
order (two lanes side by side on disjoint paths; each lane's commands one after another):
- kernel engineer: `optimize rmsnorm --device interpret --budget 2 --out runs/rmsnorm`, `show`, `report` — as
  written;
- ML engineer, after the kernel engineer (runs/rmsnorm is there): `accelerate llama-tiny ...` as written, and the
  same command pointed at runs/ is refused (exit 2) rather than packaging the kernel engineer's run;
- coding-agent user: `agent init layernorm ...`, `submit my_kernel.py ...`, `agent status` — as written; the test
  supplies my_kernel.py (a LayerNorm kernel taking no configuration, as an agent would write it), and the
  submission must pass;
- researcher: `replay ...` as written; `benchmarks/strategies.py` with `--seeds 2 --budget 20 --cache TMP` appended
  (as written it runs 20 seeds at budget 400 on nine spaces, too long for CI), its `benchmarks/...` paths made
  absolute into the clone (the README runs them from the clone).

Parsed only (every argument and option through the command's own parser, nothing run):
- the two set-up commands: the pip part is checked against pyproject.toml's extras; `kernelloop optimize
  layernorm` runs for real in tests/test_install.py (from a wheel, outside the clone, `--budget 1 --no-confirm`);
  the second command is this test suite itself;
- the ML engineer's Python snippet: its names exist (the long form, capture/optimize/export/e2e, is run for real
  by tests/test_walkthrough.py);
- the GPU-only commands in the kernel-engineer text (`--budget 24` on CUDA, `profile --ncu`) and `mcp` (a stdio
  server).

A README command that none of these rules covers fails the test: a new command in the README needs a rule here.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import typer

import kernelloop
from kernelloop.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter README walk")]

MY_KERNEL = (ROOT / "tests" / "fixtures" / "candidates" / "honest_layernorm.py").read_text()   # must PASS


def section(title: str) -> str:
    """The README's section whose heading starts with `title`, up to the next heading."""
    parts = re.split(r"^## ", README, flags=re.M)
    (text,) = [p for p in parts if p.startswith(title)]
    return text


def code_blocks(text: str) -> list[str]:
    """Fenced blocks (not ```python) and 4-space indented blocks of a section."""
    fenced = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)
    out = [body for lang, body in fenced if lang != "python"]
    rest = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out += ["\n".join(line[4:] for line in m.group(0).splitlines())
            for m in re.finditer(r"(?:^    \S.*\n?)+", rest, flags=re.M)]
    return out


def commands(block: str) -> list[list[str]]:
    """Each command of a block as its words: continuation lines joined, comments dropped, a `for ... done` loop
    over ops expanded into one command per op."""
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        loop = re.fullmatch(r"for (\w+) in (.*?); do (.*?); done", line.strip())
        if loop:
            var, items, body = loop.groups()
            out += [shlex.split(body.replace(f"${var}", item), comments=True) for item in items.split()]
            continue
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def inline_commands(text: str) -> list[list[str]]:
    return [shlex.split(c) for c in re.findall(r"`(kernelloop [^`]+)`", text)]


def parse(words: list[str]) -> None:
    """`kernelloop ARGS` through the command's own parser (click, via typer), without running anything: an unknown
    command or option, a missing argument or a bad value raises."""
    assert words[0] == "kernelloop", words
    cmd, rest, path = typer.main.get_command(app), list(words[1:]), ["kernelloop"]
    while hasattr(cmd, "commands"):   # groups: kernelloop, agent, trace
        name, rest = rest[0], rest[1:]
        assert name in cmd.commands, f"no command {' '.join([*path, name])}"
        cmd, path = cmd.commands[name], [*path, name]
    cmd.make_context(" ".join(path), rest)


def spawn(words: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    cmd = ([sys.executable, "-m", "kernelloop.cli.app", *words[1:]] if words[0] == "kernelloop"
           else [sys.executable, *words[1:]] if words[0] == "python3" else words)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def ran(words: list[str], p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, f"{shlex.join(words)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def quickstart(title: str) -> list[list[str]]:
    """The commands of a quickstart's one code block."""
    (cmds,) = [commands(b) for b in code_blocks(section(title))]
    return cmds


def _researcher_steps(folder: Path) -> list[list[str]]:
    """As written, `benchmarks/...` made absolute into the clone; strategies.py at 2 seeds and budget 20 (as written
    it runs 20 seeds at budget 400 on nine spaces), its cache in the flow's `folder`."""
    absolute = [[str(ROOT / w) if w.startswith("benchmarks/") else w for w in c]
                for c in quickstart("Quickstart: researcher")]
    return [absolute[0], absolute[1] + ["--seeds", "2", "--budget", "20", "--cache", str(folder / "cache")]]


LANES = (("kernel engineer", "ML engineer"), ("coding-agent user", "researcher"))


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> dict[str, tuple[Path, list[subprocess.CompletedProcess]]]:
    """The four quickstarts run for real in ONE fresh folder outside the clone, in the README's order, as a user who
    reads on types them: the ML engineer's command runs after the kernel engineer's (which wrote runs/rmsnorm), the
    researcher's after the coding-agent user's. The two lanes run side by side (their paths are disjoint: runs/,
    report.html, llama-fast/ against ws/, my_kernel.py, results/, cache/); a flow stops at its first failing
    command. {flow: (the folder, completed)}."""
    from concurrent.futures import ThreadPoolExecutor
    folder = tmp_path_factory.mktemp("readme")
    flows = {"kernel engineer": quickstart("Quickstart: kernel engineer"),
             "ML engineer": quickstart("Quickstart: ML engineer"),
             "coding-agent user": quickstart("Quickstart: coding-agent user")[:3],   # the fourth (mcp): parsed only
             "researcher": _researcher_steps(folder)}
    (folder / "my_kernel.py").write_text(MY_KERNEL)

    def walk(lane: tuple[str, ...]) -> dict[str, list[subprocess.CompletedProcess]]:
        done: dict[str, list[subprocess.CompletedProcess]] = {}
        for name in lane:
            done[name] = []
            for words in flows[name]:
                done[name].append(spawn(words, folder))
                if done[name][-1].returncode != 0:
                    return done
        return done
    results: dict[str, list[subprocess.CompletedProcess]] = {}
    with ThreadPoolExecutor(max_workers=len(LANES)) as pool:
        for done in pool.map(walk, LANES):
            results.update(done)
    return {name: (folder, results.get(name, [])) for name in flows}


def _walked(walked, name: str, steps: list[list[str]]) -> tuple[Path, list[subprocess.CompletedProcess]]:
    """A flow's folder and its commands' results, each asserted to have exited 0."""
    folder, done = walked[name]
    for words, p in zip(steps, done):
        ran(words, p)
    assert len(done) == len(steps)
    return folder, done


def test_the_two_setup_commands():
    cmds = [c for b in code_blocks(section("Two commands")) for c in commands(b)]
    assert len(cmds) == 2, cmds
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for words in cmds:
        k = words.index("&&")
        pip, rest = words[:k], words[k + 1:]
        assert pip[:4] == ["python3", "-m", "pip", "install"] and "-e" in pip
        wanted = re.fullmatch(r"\.\[(.*)\]", pip[pip.index("-e") + 1]).group(1).split(",")
        assert set(wanted) <= set(extras), wanted
        if rest[0] == "kernelloop":
            assert rest == ["kernelloop", "optimize", "layernorm"]   # run from a wheel by tests/test_install.py
            parse(rest)
        else:
            assert rest[:3] == ["python3", "-m", "pytest"]          # this suite


def test_kernel_engineer_quickstart_runs(walked):
    text = section("Quickstart: kernel engineer")
    cmds = quickstart("Quickstart: kernel engineer")
    assert [c[:2] for c in cmds] == [["kernelloop", "optimize"], ["kernelloop", "show"], ["kernelloop", "report"]]
    assert "--device" in cmds[0] and cmds[0][cmds[0].index("--device") + 1] == "interpret"
    tmp_path, _ = _walked(walked, "kernel engineer", cmds)
    assert (tmp_path / "runs" / "rmsnorm" / "archive.sqlite").is_file()
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    gpu = inline_commands(text)
    assert any(c[:2] == ["kernelloop", "optimize"] for c in gpu) and any(c[1] == "profile" for c in gpu)
    for words in gpu:
        parse([w if w != "RUN" else str(tmp_path / "runs" / "rmsnorm") for w in words])
    named = re.findall(r"`(--[a-z-]+)", text.split("Useful options:")[1])
    options = {o for p in typer.main.get_command(app).commands["optimize"].params for o in p.opts}
    assert named and set(named) <= options, set(named) - options


def test_ml_engineer_quickstart_runs_after_the_kernel_engineers(walked):
    """In the folder where the kernel engineer's runs/rmsnorm already is: `accelerate` works in its own folder, and
    pointed at the kernel engineer's runs/ it refuses (exit 2) rather than package that run."""
    text = section("Quickstart: ML engineer")
    cmds = quickstart("Quickstart: ML engineer")
    assert [c[:2] for c in cmds] == [["kernelloop", "accelerate"]]
    out = Path(cmds[0][cmds[0].index("--out") + 1])
    folder, (p,) = _walked(walked, "ML engineer", cmds)
    assert "rmsnorm: optimizing" in p.stderr and "done: patched" in p.stderr
    summary = json.loads((folder / out / "accelerate.json").read_text())
    assert summary["verdict"] == "patched" and summary["outputs_ok"] and summary["replaced"]
    assert {o["op"] for o in summary["ops"]} == {"rmsnorm", "gemm_nt", "attention_causal"}
    assert all(c["status"] == "patched" or c["detail"] for c in summary["cards"])
    assert (folder / out / "package" / "kernelloop-package.json").is_file()
    assert (folder / "runs" / "rmsnorm" / "archive.sqlite").is_file()   # the kernel engineer's run, still there
    refused = spawn([*cmds[0][:cmds[0].index("--out")], "--out", "runs"], folder)
    assert refused.returncode == 2 and "not an accelerate folder" in refused.stderr, refused.stderr[-2000:]
    snippet = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    for name in re.findall(r"kernelloop\.(\w+)\(", snippet):
        assert callable(getattr(kernelloop, name)), name
    walk = (ROOT / "tests" / "test_walkthrough.py").read_text()   # the long form, run for real there
    for sub in ("capture", "optimize", "export", "e2e"):
        assert re.search(rf'kl(_start)?\("{sub}"', walk), sub


def test_coding_agent_quickstart_runs(walked):
    text = section("Quickstart: coding-agent user")
    (cmds,) = [commands(b) for b in code_blocks(text)]
    assert [c[1] for c in cmds] == ["agent", "submit", "agent", "mcp"]
    _, (_, submitted, status) = _walked(walked, "coding-agent user", cmds[:3])
    answer = json.loads(submitted.stdout)
    assert answer["verdict"] == "PASSED" and len(answer["results"]) >= 2
    status = json.loads(status.stdout)
    assert status["counts"] == {"PASSED": len(answer["results"])}
    parse(cmds[3])   # a stdio MCP server: parsed, not started (tests/agent/test_agent_mcp.py serves it)


def test_researcher_quickstart_runs(walked):
    text = section("Quickstart: researcher")
    (cmds,) = [commands(b) for b in code_blocks(text)]
    assert [c[:2] for c in cmds] == [["kernelloop", "replay"], ["python3", "benchmarks/strategies.py"]]
    tmp_path, (replayed, _) = _walked(walked, "researcher", _researcher_steps(walked["researcher"][0]))
    assert "staged" in replayed.stdout and "median evals to 5 %" in replayed.stdout
    assert list((tmp_path / "results").glob("strategies-*.json"))


def test_every_quickstart_is_covered():
    titles = re.findall(r"^## (Quickstart: [^—\n]+)", README, flags=re.M)
    assert [t.strip() for t in titles] == ["Quickstart: kernel engineer", "Quickstart: ML engineer",
                                           "Quickstart: coding-agent user", "Quickstart: researcher"]
    assert len(README.splitlines()) <= 200
