"""The test plays the agent (issue 24, item 1): it reads every file of its workspace and run folder and the
answers to its own failing submissions, and still cannot predict the next candidate's held-out cases.

The run key lives in a key folder outside the workspace (the user's controller keeps it); the archive keeps only
a salt and a commitment. Held-out cases are drawn per (secret, workload, candidate).
"""

import json
import re
import sqlite3
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.agent import Submission, init_workspace, submit, workspace_status
from kernelloop.core.archive import Archive
from kernelloop.core.execute import battery
from kernelloop.core.sandbox import keys
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.base.records import Candidate, Workload

ROOT = Path(__file__).resolve().parents[2]
OP = ops_dir() / "layernorm"
# Correct on every visible shape (M divisible by 4), tail rows never written on a held-out M.
FAILING = (ROOT / "tests" / "fixtures" / "cheats" / "hardcoded_shape.py").read_text()
FAST = dict(timeouts=Timeouts(check=60.0, bench=60.0))
W = Workload(op="layernorm", axes={"M": 8, "N": 64}, dtype="fp16")


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    base = tmp_path_factory.mktemp("secrecy")
    user_keys = base / "user-config" / "keys"          # the user's controller side: never shown to the agent
    mp = pytest.MonkeyPatch()
    mp.setenv(keys.KEY_DIR_ENV, str(user_keys))
    mp.delenv(keys.KEY_ENV, raising=False)
    wl = base / "wl.toml"
    wl.write_text('op = "layernorm"\n[[workload]]\naxes = { M = 8, N = 64 }\ndtype = "fp16"\n')
    ws = init_workspace(OP, base / "ws", workloads_file=wl, checks=1, device="interpret")
    answers = [submit(ws.root, Submission(source=FAILING + f"\n# attempt {i}\n", agent="adversary"), **FAST)
               for i in range(2)]
    yield ws, user_keys, answers
    mp.undo()


def _agent_reads(ws) -> tuple[bytes, list[str]]:
    """Everything the agent can read: every file under its workspace (run folder included), and every string in
    the archive's tables."""
    blob = b""
    for f in sorted(ws.root.rglob("*")):
        if f.is_file():
            blob += f.read_bytes()
    strings = set()
    for db in ws.root.rglob("*.sqlite"):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            for row in con.execute(f"SELECT * FROM {table}"):
                strings.update(str(v) for v in row if v is not None)
        con.close()
    tokens = set(re.findall(rb"[0-9a-fA-F]{16,}", blob))
    texts = {t.decode() for t in tokens} | {s for s in strings if len(s) < 200}
    for s in list(strings):
        texts.update(re.findall(r"[0-9a-fA-F]{16,}", s))
    return blob, sorted(texts)


def _heldout(secret: str, cand_id: str) -> list[tuple]:
    return [(tuple(sorted(c["workload"].axes.items())), c["seed"], c["distribution"])
            for c in battery.cases(OP_SPEC, secret, 1, cand_id, W)]


OP_SPEC = None


@pytest.fixture(scope="module", autouse=True)
def _spec():
    global OP_SPEC
    from kernelloop.core.spec import load_op
    OP_SPEC = load_op(OP).spec


def test_answers_name_the_class_of_a_failing_heldout_case_never_its_shape_or_seed(played):
    ws, _, answers = played
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        run_id = a.runs()[0]["id"]
        failures = [e["payload"] for e in a.events(run_id, "failure")]
    assert len(failures) == 2 and all(f["case"]["kind"] == "held-out" for f in failures)
    for answer, failure in zip(answers, failures):
        (r,) = answer["results"]
        assert r["status"] == "WRONG_INCOMPLETE"
        assert "a held-out smaller M" in r["failing_case"] and "held-out case" in r["message"]
        assert r["reason"] == "elements never written"
        text = json.dumps(answer)
        case = failure["case"]                           # the user's record: the full case
        assert str(case["seed"]) not in text and "seed=" not in text
        assert case["workload"] not in text, "the held-out shape's label"
        assert f"[{case['axes']['M']}x" not in text
        assert "never written (first at" not in text and "of " + str(case["axes"]["M"] * 64) not in text
        # the user-facing record keeps everything
        assert case["axes"]["M"] != 8 and case["seed"] > 0 and failure["reason"] == "elements never written"
    status = json.dumps(workspace_status(ws.root).as_json())
    assert all(str(f["case"]["seed"]) not in status and f["case"]["workload"] not in status for f in failures)


def test_the_key_is_nowhere_the_agent_can_read_and_the_archive_holds_its_commitment(played):
    ws, user_keys, _ = played
    (key_file,) = user_keys.iterdir()
    key = key_file.read_text().strip()
    assert key_file.stat().st_mode & 0o077 == 0, "the key file is the user's alone"
    blob, texts = _agent_reads(ws)
    assert key.encode() not in blob and key not in texts
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        run = a.runs()[0]
    assert "secret" not in run["options"] and key_file.name == run["id"]
    k = run["options"]["key"]
    assert k["commitment"] == keys.commitment(key, k["salt"]) and k["source"] == "file"
    assert keys.run_secret(key, k["salt"]).encode() not in blob


def test_the_agent_cannot_predict_the_next_candidates_heldout_cases(played):
    ws, user_keys, answers = played
    blob, texts = _agent_reads(ws)
    with Archive(ws.run_dir() / "archive.sqlite") as a:
        run = a.runs()[0]
        seen = [e["payload"]["case"] for e in a.events(run["id"], "failure")]
    salt = run["options"]["key"]["salt"]
    nxt = Candidate(op="layernorm", template="custom", source=FAILING + "\n# attempt 2\n", proposer="agent:adversary")

    # the controller's truth, with the key the agent never saw; positive control: the same derivation reproduces
    # the case the evaluator actually ran for the agent's last submission
    secret = keys.run_secret((next(user_keys.iterdir())).read_text().strip(), salt)
    last = answers[-1]["candidates"][0]["id"]
    assert any(seed == seen[-1]["seed"] for _, seed, _ in _heldout(secret, last))
    truth = _heldout(secret, nxt.id)

    # every string the agent could read, tried as the key and as the secret itself
    guesses = []
    for t in texts:
        guesses.append(_heldout(t, nxt.id))
        guesses.append(_heldout(keys.run_secret(t, salt), nxt.id))
    assert truth not in guesses
    assert not {s for _, s, _ in truth} & {s for g in guesses for _, s, _ in g}
    # what it learned about its earlier candidates (their seeds) is no part of the next one's cases
    assert not {s for _, s, _ in truth} & {c["seed"] for c in seen}
    # and the held-out shapes are drawn per candidate: across candidates they move
    shapes = {tuple(a for a, _, _ in _heldout(secret, Candidate(op="layernorm", template="custom",
                                                                 source=f"# {i}").id)) for i in range(12)}
    assert len(shapes) > 1


def test_resume_needs_the_key_and_checks_it(played, tmp_path, monkeypatch):
    ws, user_keys, _ = played
    (key_file,) = user_keys.iterdir()
    key = key_file.read_text()
    sub = Submission(source=FAILING + "\n# attempt 9\n", agent="adversary")
    monkeypatch.setenv(keys.KEY_DIR_ENV, str(tmp_path / "elsewhere"))
    with pytest.raises(keys.RunKeyError, match="its key is missing"):
        submit(ws.root, sub, **FAST)
    monkeypatch.setenv(keys.KEY_ENV, "0" * 64)
    with pytest.raises(keys.RunKeyError, match="not this run's key"):
        submit(ws.root, sub, **FAST)
    monkeypatch.setenv(keys.KEY_ENV, key.strip())       # the user hands the key over explicitly: it resumes
    assert submit(ws.root, sub, **FAST)["verdict"] == "WRONG_INCOMPLETE"
    assert key_file.read_text() == key
