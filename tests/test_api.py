"""kernelloop.optimize / kernelloop.Run: one interpreter run shared by the tests, its records beside `show --json`;
callers without a __main__ guard and through `python -c`; bad arguments."""

import gzip
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kernelloop
from kernelloop.deliver import api
from kernelloop.base.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.base.records import Status, Trial, Workload
from kernelloop.base.records.summary import BestSummary, FrontEntry, RunSummary
from kernelloop.core.spec import load_op, load_workloads

LAYERNORM = ops_dir() / "layernorm"
ARCHIVES = Path(__file__).resolve().parent / "fixtures" / "archives"   # runs archived by earlier versions
SMALL = ["layernorm[64x256]:fp16", "layernorm[1x512]:bf16"]   # two of its interpreter workloads


def _small_workloads() -> list[Workload]:
    spec = load_op(LAYERNORM).spec
    return [w for w in load_workloads(LAYERNORM / "workloads-interpret.toml", spec) if w.label in SMALL]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    seen = []
    run = kernelloop.optimize("layernorm", workloads=_small_workloads(), budget=2, device="interpret", out=out,
                              baselines=["copy"], on_progress=seen.append)
    assert isinstance(run, kernelloop.Run) and seen and seen[-1].done == 4
    return out


@pytest.fixture(scope="module")
def show_json(run_dir):
    r = CliRunner().invoke(app, ["show", str(run_dir), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_the_run_is_what_show_json_prints(run_dir, show_json):
    run = kernelloop.Run.load(run_dir)
    s = run.summary()
    assert isinstance(s, RunSummary) and s.op == "layernorm" and s.interpreter and s.status == "complete"
    assert s.run_dir == str(run_dir)   # the one key show leaves out
    assert s.model_dump(mode="json", exclude={"run_dir"}) == show_json
    assert RunSummary.model_validate(show_json).model_dump(mode="json") == show_json   # the JSON is the record
    assert [w.label for w in run.workloads] == SMALL


def test_best_front_and_trials_agree_with_show_json(run_dir, show_json):
    run = kernelloop.Run.load(run_dir)
    by_label = {w["label"]: w for w in show_json["workloads"]}
    for label in SMALL:
        w = by_label[label]
        best = run.best(label)
        assert isinstance(best, BestSummary)
        assert best.candidate == w["best"]["candidate"] and best.label == w["best"]["label"]
        assert best.search.kernel_us == w["best"]["search"]["kernel_us"]
        assert best.search.roofline_fraction == w["best"]["search"]["roofline_fraction"]
        assert run.best(w["id"]) == best   # by id or by label
        front = run.front(label)
        assert front and all(isinstance(f, FrontEntry) for f in front)
        assert [f.model_dump(mode="json") for f in front] == w["front"]
        assert run.summary().workload(label).confirmed.kernel_us == w["confirmed"]["kernel_us"]
        assert set(w["confirmed"]["baselines"]) == {"copy"}
        mine = run.trials(workload=label)
        assert len(mine) == w["trials"] == 2 and all(t.workload_id == w["id"] for t in mine)
        # the best is the fastest PASSED trial of its workload
        passed = [t for t in mine if t.verdict.status is Status.PASSED]
        assert len(passed) == w["passed"]
        assert min(t.measurement.kernel.median_us for t in passed) == best.search.kernel_us
    everything = run.trials()
    assert all(isinstance(t, Trial) for t in everything) and [t.index for t in everything] == sorted(
        t.index for t in everything)
    assert len(run.trials(status="PASSED")) == show_json["counts"].get("PASSED", 0)
    assert len(run.trials(status=Status.PASSED)) == show_json["counts"].get("PASSED", 0)
    assert sum(len(run.trials(status=s)) for s in Status) == len(everything) == 4


def test_a_resume_goes_on_with_the_runs_own_workloads(run_dir, tmp_path):
    """Resumed without workloads, a run continued on the op's default workload file, whose trials the run's
    summary, report and export never list (a run of 6 trials resumed to 40, 34 of them unseen); it now goes on with
    the workloads it began with, and other workloads are refused."""
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    again = kernelloop.optimize("layernorm", budget=2, device="interpret", out=copy, resume=True, confirm=False)
    assert again.result.evaluated == 0 and again.result.replayed == 4
    assert [w.label for w in again.summary().workloads] == SMALL and len(again.trials()) == 4
    others = [w for w in load_workloads(LAYERNORM / "workloads-interpret.toml", load_op(LAYERNORM).spec)
              if w.label not in SMALL][:1]
    with pytest.raises(RuntimeError, match=r"cannot resume with other workloads: the run has layernorm\[64x256\]"):
        kernelloop.optimize("layernorm", workloads=others, budget=2, device="interpret", out=copy, resume=True,
                            confirm=False)
    assert len(kernelloop.Run.load(copy).trials()) == 4


def test_a_workload_must_be_named_when_there_are_several(run_dir):
    run = kernelloop.Run.load(run_dir)
    with pytest.raises(ValueError, match="name one of: layernorm"):
        run.best()
    with pytest.raises(ValueError, match="2 workloads"):
        run.front()
    with pytest.raises(KeyError, match="no workload 'layernorm\\[9x9\\]:fp16'"):
        run.best("layernorm[9x9]:fp16")
    with pytest.raises(api.UsageError, match="status 'WON': choose from PASSED"):
        run.trials(status="WON")


def test_load_the_archive_file_and_a_gzipped_copy(run_dir, tmp_path):
    folder = kernelloop.Run.load(run_dir).summary()
    plain = kernelloop.Run.load(run_dir / "archive.sqlite")
    assert plain.summary() == folder
    gz = tmp_path / "archive.sqlite.gz"
    with open(run_dir / "archive.sqlite", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    packed = kernelloop.Run.load(gz).summary()
    assert packed.run_dir is None and packed.model_dump(exclude={"run_dir"}) == folder.model_dump(exclude={"run_dir"})


def test_agent_submit_and_status_report_figures_under_the_names_show_uses(run_dir, show_json):
    import importlib
    status = importlib.import_module("kernelloop.deliver.agent.status")
    submit = importlib.import_module("kernelloop.deliver.agent.submit")   # the package exports functions of these names
    run = kernelloop.Run.load(run_dir)
    label = SMALL[0]
    best = run.best(label)
    m = next(t for t in run.trials(workload=label) if t.id == best.trial).measurement
    shown = next(w for w in show_json["workloads"] if w["label"] == label)["best"]["search"]
    # the answer's `measurement` is a MeasurementSummary record (kernelloop.deliver.agent.answer.WorkloadAnswer)
    from kernelloop.deliver.agent.answer import WorkloadAnswer
    from kernelloop.base.records.summary import MeasurementSummary
    assert WorkloadAnswer.model_fields["measurement"].annotation == MeasurementSummary | None
    assert hasattr(submit, "trial_result")
    answered = MeasurementSummary.of(m).model_dump(mode="json")
    from_status = MeasurementSummary(**status._figures(m)).model_dump(mode="json")
    assert answered == from_status == shown   # one name per quantity: roofline_fraction
    assert "roofline_fraction" in shown and "copy_fraction" not in shown


CALLER = textwrap.dedent("""
    import json, sys
    import kernelloop
    from kernelloop.core.spec import load_op, load_workloads
    op = kernelloop.api.load_bundle("layernorm")
    wls = [w for w in load_workloads(op.folder / "workloads-interpret.toml", op.spec) if w.label == "layernorm[1x512]:bf16"]
    run = kernelloop.optimize("layernorm", workloads=wls, budget=1, device="interpret", out=sys.argv[1], confirm=False)
    print("RESULT " + json.dumps({"passed": len(run.trials(status="PASSED")), "best": run.best().label}))
""")


def _result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout[-3000:]   # the caller ran once: the worker did not re-run it
    return json.loads(lines[0].removeprefix("RESULT "))


@pytest.fixture(scope="module")
def callers(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """CALLER run as a script without a main guard, through `python -c` and from standard input: three independent
    processes (each its own folder and run), started side by side; each test below reads its own."""
    base = tmp_path_factory.mktemp("callers")
    script = base / "no_guard.py"
    script.write_text(CALLER)
    argvs = {"script": ([sys.executable, str(script)], None), "-c": ([sys.executable, "-c", CALLER], None),
             "stdin": ([sys.executable, "-"], CALLER)}
    procs, done = {}, {}
    try:
        for how, (argv, given) in argvs.items():
            folder = base / how
            folder.mkdir()
            # output to files, not pipes: a process started beside others never blocks on a pipe nobody reads yet
            outs = open(folder / "stdout", "w+"), open(folder / "stderr", "w+")
            procs[how] = (subprocess.Popen([*argv, str(folder / "run")], cwd=folder, text=True, stdout=outs[0],
                                           stderr=outs[1], stdin=subprocess.PIPE if given else None), outs)
            if given:
                procs[how][0].stdin.write(given)
                procs[how][0].stdin.close()
        for how, (proc, outs) in procs.items():
            proc.wait(timeout=600)
            texts = []
            for f in outs:
                f.seek(0)
                texts.append(f.read())
            done[how] = subprocess.CompletedProcess(proc.args, proc.returncode, *texts)
    finally:
        for proc, outs in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for f in outs:
                f.close()
    return done


def test_a_script_without_a_main_guard(callers):
    out = _result(callers["script"])
    assert out["passed"] == 1 and out["best"]


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_code_without_a_file_like_a_notebook_cell(how, callers):
    out = _result(callers[how])
    assert out["passed"] == 1 and out["best"]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"op": "no-such-op"}, api.UsageError, r"unknown op 'no-such-op'.*layernorm"),
    ({"op": "layernorm", "strategy": "guess"}, api.UsageError, r"strategy 'guess': choose from .*random"),
    ({"op": "layernorm", "device": "tpu"}, api.UsageError, r"device 'tpu': use cuda or interpret"),
    ({"op": "layernorm", "budget": "ten"}, api.UsageError, r"budget 'ten'"),
    ({"op": "layernorm", "budget": 0}, api.UsageError, r"must be positive"),
    ({"op": "layernorm", "templates": ["nope"]}, api.UsageError, r"template 'nope': layernorm has .*rowwise"),
    ({"op": "layernorm", "baselines": ["magic"]}, api.UsageError, r"baseline 'magic': choose from eager"),
    ({"op": "layernorm", "resume": True}, api.UsageError, r"resume=True needs out"),
    ({"op": "layernorm", "workloads": []}, api.UsageError, r"the list is empty"),
    ({"op": "layernorm", "fixed": {"BLOCK_N": 3}}, api.UsageError, r"fixed .*no template of layernorm has"),
    ({"op": "layernorm", "fixed": "BLOCK_N"}, api.UsageError, r"fixed item 'BLOCK_N': expected NAME=VALUE"),
    ({"op": "layernorm", "budget": "gpu:30s", "gpu_seconds": 30}, api.UsageError,
     r"GPU budget is given twice \(gpu_seconds and a 'gpu:' part of budget\)"),
    ({"op": "layernorm", "start": "ROWS=1"}, api.UsageError, r"start is only used by strategy planner"),
    ({"op": "layernorm", "strategy": "random", "prior": ["x.json"]}, api.UsageError,
     r"prior is only used by strategy .*staged"),
    ({"op": "layernorm", "prior": ["no-such-recording.json"]}, api.UsageError, r"prior no-such-recording.json"),
    ({"op": "layernorm", "profile_timeout_s": 0}, api.UsageError, r"profile_timeout_s 0"),
    ({"op": "attention", "templates": ["gluon_fa"]}, api.UsageError,
     r"nothing to try on interpret: .*gluon_fa: .*no interpreter \(\d+ of \d+\)"),
])
def test_bad_arguments_raise_clear_errors(kwargs, error, match, tmp_path):
    kwargs = {"device": "interpret", "out": tmp_path / "never", **kwargs}
    if kwargs.get("resume"):
        kwargs.pop("out")
    with pytest.raises(error, match=match):
        kernelloop.optimize(**kwargs)
    assert not (tmp_path / "never").exists()   # nothing started


def test_check_space_names_the_workloads_left_with_nothing_and_why():
    """A workload whose selected space prunes to nothing is named with the pruning reasons; the others are not."""
    bundle = api.load_bundle("attention")
    seed = Workload(op="attention", axes={"B": 1, "H": 2, "HKV": 2, "S": 4096, "D": 128}, dtype="fp16")
    short = Workload(op="attention", axes={"B": 1, "H": 2, "HKV": 2, "S": 40, "D": 128}, dtype="fp16")
    empty = api.check_space(bundle, [seed, short], "interpret", ["flash"], {"BLOCK_N": "128"})
    assert list(empty) == [short.label]
    assert "flash: " in empty[short.label] and "kv block wider" in empty[short.label]
    assert api.check_space(bundle, [seed, short], "interpret", ["flash"], None) == {}
    with pytest.raises(api.UsageError, match="every configuration of every workload is pruned"):
        api.check_space(bundle, [short], "interpret", ["flash"], {"BLOCK_N": "128"})


def test_pinned_parameters_hold_for_every_trial(tmp_path):
    w = _small_workloads()[:1]
    run = kernelloop.optimize("layernorm", workloads=w, budget=2, device="interpret", out=tmp_path / "run",
                              fixed={"ROWS": 1, "num_warps": 2}, confirm=False)
    from kernelloop.core.archive import Archive
    with Archive(run.path) as a:
        configs = [a.get_candidate(t.candidate_id).config for t in run.trials()]
    assert len(configs) == 2 and all(c["ROWS"] == 1 and c["num_warps"] == 2 for c in configs)


def test_the_old_keywords_still_work_with_a_deprecation_warning(tmp_path):
    """`fix` and `gpu_budget` (the names docs/api.md published before each setting had one name) still reach the
    same setting, with a DeprecationWarning; under both names, or a keyword that never was one, they are refused."""
    w = _small_workloads()[:1]
    with pytest.warns(DeprecationWarning, match=r"fix=\.\.\.\) is deprecated: use fixed"), \
            pytest.warns(DeprecationWarning, match=r"gpu_budget=\.\.\.\) is deprecated: use gpu_seconds"):
        p = api.plan("layernorm", w, 2, "interpret", fix={"ROWS": 1}, gpu_budget=30)
    assert p.options.fixed == {"ROWS": "1"} and p.options.budget.gpu_seconds == 30.0
    with pytest.warns(DeprecationWarning), pytest.raises(api.UsageError, match="fix and fixed are one setting"):
        api.plan("layernorm", w, 2, "interpret", fix={"ROWS": 1}, fixed={"ROWS": 1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'fixes'"):
        kernelloop.optimize("layernorm", w, 2, "interpret", out=tmp_path / "never", fixes={"ROWS": 1})
    with pytest.warns(DeprecationWarning, match="optimize\\(fix="), pytest.raises(api.UsageError, match="fixed item"):
        kernelloop.optimize("layernorm", w, 2, "interpret", out=tmp_path / "never", fix="ROWS")
    assert not (tmp_path / "never").exists()


def test_missing_run_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run archive at .*nothing"):
        kernelloop.Run.load(tmp_path / "nothing")


def test_budget_grammar():
    assert api.parse_budget("40,10m", "cuda") == (40, 600.0, None)
    assert api.parse_budget("90s", "cuda") == (None, 90.0, None)
    assert api.parse_budget("40,10m,gpu:5m", "cuda") == (40, 600.0, 300.0)   # GPU seconds beside the others
    assert api.parse_budget("gpu:90s", "cuda") == (None, None, 90.0)
    assert api.parse_budget(3, "interpret") == (3, None, None)
    assert api.parse_budget(None, "cuda") == (24, None, None) and api.parse_budget(None, "interpret") == (8, None, None)
    for bad in ("", "ten", "-3", "10d", "gpu:", "gpu:0s", "gpu:5", "1,2", "5s,1m", "gpu:5s,40,gpu:1m"):
        with pytest.raises(api.UsageError):
            api.parse_budget(bad, "cuda")


@pytest.mark.parametrize("name", ["h200-layernorm-planner.sqlite.xz", "h200-attention-exhaustive.sqlite.xz"])
def test_archives_of_earlier_versions_load(name):
    run = kernelloop.Run.load(ARCHIVES / name)
    s = run.summary()
    assert not s.interpreter and s.workloads and len(run.trials()) == sum(s.counts.values())
    for w in s.workloads:
        if w.best is not None:
            assert run.best(w.label) == w.best and w.best.search.roofline_fraction is not None
            assert run.front(w.id) == w.front
    assert any(w.best is not None for w in s.workloads)
