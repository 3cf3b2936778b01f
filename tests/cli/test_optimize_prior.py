"""`kernelloop optimize --prior SPACE` in interpreter mode: the staged search is warm-started from a recording of
other shapes (written here with the space-file writer, no GPU), the archive says so, --resume keeps it, and every
bad --prior is refused."""

import hashlib
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.cli import common
from kernelloop.cli.app import app
from kernelloop.core.device import device_properties
from kernelloop.base.records import Workload
from kernelloop.tune.replay.space_file import FORMAT, write_space_file
from kernelloop.tune.search import make_strategy
from kernelloop.tune.search.encoding import config_key
from kernelloop.tune.search.history import TransferPrior
from kernelloop.core.spec import load_op, load_workloads
from kernelloop.core.spec.space import selected_space

RMSNORM = ops_dir() / "rmsnorm"
runner = CliRunner()
# other shapes, of very different cost and different best warp counts
WORKLOADS = 'op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n'
RECORDED = [({"M": 8, "N": 1000}, 10.0, 1), ({"M": 1, "N": 4096}, 1000.0, 3)]


def pruned(axes: dict) -> list[dict]:
    bundle = load_op(RMSNORM)
    w = Workload(op="rmsnorm", axes=axes, dtype="fp32")
    return [c for _, kept, _ in selected_space(bundle.spec.templates, w, device_properties("interpret"), None, None)
            for c in kept]


def cost(c: dict, log2_warps: int = 1) -> float:
    """A made-up time over the three templates' parameters: the chunked template with 2**log2_warps warps, one row
    per program and small chunks is fastest."""
    return (1.0 + {"chunked": 0.0, "persistent": 0.15, "rowwise": 0.3}[c["template"]]
            + 0.4 * abs(math.log2(c["num_warps"]) - log2_warps) + 0.2 * (c.get("ROWS", 1) - 1)
            + 0.03 * math.log2(c.get("CHUNK", c.get("BLOCK_N", 256)) / 256)
            + 0.05 * (1 - c.get("EVICT_FIRST", 1)) + 0.02 * c.get("STREAM_STORE", 0) + 0.01 * c.get("PREFETCH", 0))


def recording(path: Path, op: str = "rmsnorm", measured: int | None = None) -> Path:
    """A space file of rmsnorm measured on RECORDED's shapes; `measured` keeps only that many PASSED results."""
    wls = [{"id": f"w{i}", "label": str(axes), "axes": axes, "dtype": "fp32", "weight": 1.0}
           for i, (axes, _, _) in enumerate(RECORDED)]
    spaces = [{config_key(c): c for c in pruned(axes)} for axes, _, _ in RECORDED]
    configs = {k: c for s in spaces for k, c in s.items()}
    records, n = [], 0
    for k, c in configs.items():
        results = {}
        for w, space, (_, scale, warps) in zip(wls, spaces, RECORDED):
            ok = k in space and (measured is None or n < measured)
            n += ok
            results[w["id"]] = {"value": scale * cost(c, warps) if ok else None,
                                "status": "PASSED" if ok else "PRUNED",
                                "ci": None}
        records.append({"config": c, "results": results})
    return write_space_file(path, {"format": FORMAT, "name": f"{op}-cuda", "op": op, "objective": "kernel_us",
                                   "params": sorted({p for c in configs.values() for p in c}), "workloads": wls,
                                   "records": records, "complete": True})


def expected_warm_start(path: Path, target: list[dict], k: int, nearest: str = "w0") -> list[int]:
    """The warm start computed here: up to half of k (rounded up) the target rows that the recorded workload
    `nearest` (the target's nearest shape) measured, fastest first, then the pooled model's picks."""
    doc = json.loads(path.read_text())
    own = {config_key(r["config"]): r["results"][nearest]["value"] for r in doc["records"]
           if r["results"][nearest]["value"] is not None}
    held = sorted((own[config_key(c)], i) for i, c in enumerate(target) if config_key(c) in own)
    chosen = [i for _, i in held[:(k + 1) // 2]]
    chosen += [i for i in expected_prior(path).top(target, len(target)) if i not in chosen]
    return chosen[:k]


def expected_prior(path: Path) -> TransferPrior:
    """The prior computed here from the recording's document: each workload's times over its best, pooled."""
    doc = json.loads(path.read_text())
    configs, values = [], []
    for w in doc["workloads"]:
        times = [(r["config"], r["results"][w["id"]]["value"]) for r in doc["records"]
                 if r["results"][w["id"]]["value"] is not None]
        best = min(v for _, v in times)
        configs += [c for c, _ in times]
        values += [v / best for _, v in times]
    return TransferPrior(configs, values)


@pytest.fixture
def workloads(tmp_path) -> Path:
    wl = tmp_path / "w.toml"
    wl.write_text(WORKLOADS)
    return wl


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory) -> Path:
    """One finished budget-4 run of the tests' workload, which the tests below read as a prior (never write)."""
    base = tmp_path_factory.mktemp("prior")
    wl = base / "w.toml"
    wl.write_text(WORKLOADS)
    assert optimize(wl, base / "earlier", "--budget", "4").exit_code == 0
    return base / "earlier"


def optimize(workloads: Path, out: Path, *extra: str):
    return runner.invoke(app, ["optimize", str(RMSNORM), "--device", "interpret", "--workloads", str(workloads),
                               "--out", str(out), "--no-confirm", "--json", *extra])


def said(r) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(r.output.split())


def evaluated(out: Path) -> tuple[list[dict], dict, list[dict]]:
    """The configurations in trial order, the archived run options and the archived strategy events."""
    with Archive(out / "archive.sqlite") as a:
        run = a.runs()[0]
        configs = []
        for t in a.trials(run["id"]):
            cand = a.get_candidate(t.candidate_id)
            configs.append({"template": cand.template, **cand.config})
        events = [e["payload"] for e in a.events(run["id"], "search")]
    return configs, run["options"], events


def test_prior_warm_starts_the_search_and_resume_keeps_it(tmp_path, workloads):
    rec = recording(tmp_path / "rmsnorm.space.json")
    target = pruned({"M": 3, "N": 300})
    # the target (M 3, N 300) is nearest to the recorded M 8, N 1000 (w0): its own best are tried first
    k = max(1, make_strategy("staged", target, 0).n_init // 2)   # the size of the staged search's warm start
    first = [target[i] for i in expected_warm_start(rec, target, k)]
    assert len(first) >= 2, "the warm start has a second configuration for the resumed run to ask"
    assert first[:2] != [target[i] for i in expected_prior(rec).warm_start(target, 2)], \
        "this recording tells the per-workload warm start from the pooled one"
    out = tmp_path / "run"
    r = optimize(workloads, out, "--budget", "1", "--prior", str(rec))
    assert r.exit_code == 0, r.output
    sha = hashlib.sha256(rec.read_bytes()).hexdigest()
    archived = {"files": [{"path": str(rec), "sha256": sha}], "path": str(rec), "sha256": sha,
                "configurations": len({config_key(c) for axes, _, _ in RECORDED for c in pruned(axes)})}
    assert json.loads(r.stdout[r.stdout.index("{"):])["prior"] == archived
    configs, options, events = evaluated(out)
    assert configs == first[:1], "the first ask is the prior's warm start in this workload's pruned space"
    assert options["prior"] == archived
    assert any(e["kind"] == "prior" and e["action"] == "warm start" and e["source"] == "w0" for e in events)
    # resumed without --prior: the archived prior warms the search again, so its next ask is the prior's second
    r = optimize(workloads, out, "--budget", "2", "--resume")
    assert r.exit_code == 0, r.output
    assert evaluated(out)[0] == first[:2]
    # a resume refuses another prior, and the same prior whose file changed since the run began
    other = recording(tmp_path / "other.space.json.gz", measured=5)
    r = optimize(workloads, out, "--budget", "3", "--resume", "--prior", str(other))
    assert r.exit_code == common.STOPPED and "cannot resume with --prior" in said(r), r.output
    recording(rec, measured=5)
    r = optimize(workloads, out, "--budget", "3", "--resume")
    assert r.exit_code == common.STOPPED and "changed since the run began" in said(r), r.output


def test_a_moved_prior_is_found_again_through_its_new_path_and_its_sha256(tmp_path, workloads):
    rec = recording(tmp_path / "rmsnorm.space.json")
    out = tmp_path / "run"
    assert optimize(workloads, out, "--budget", "1", "--prior", str(rec)).exit_code == 0
    moved = rec.rename(tmp_path / "moved.space.json")
    r = optimize(workloads, out, "--budget", "2", "--resume")
    assert r.exit_code == common.STOPPED and "pass --prior with those files' paths" in said(r), r.output
    r = optimize(workloads, out, "--budget", "2", "--resume", "--prior", str(moved))
    assert r.exit_code == 0, r.output
    assert len(evaluated(out)[0]) == 2


def test_without_prior_the_search_starts_elsewhere(tmp_path, workloads):
    rec = recording(tmp_path / "rmsnorm.space.json")
    target = pruned({"M": 3, "N": 300})
    out = tmp_path / "run"
    r = optimize(workloads, out, "--budget", "2")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout[r.stdout.index("{"):])["prior"] is None
    configs, options, events = evaluated(out)
    assert options["prior"] is None and not any(e["kind"] == "prior" for e in events)
    assert configs != [target[i] for i in expected_warm_start(rec, target, 2)]


def test_an_earlier_runs_archive_is_a_prior(tmp_path, workloads, earlier_run):
    """--prior RUN_FOLDER (or its archive.sqlite): learnt from the run's PASSED trials, best time per configuration."""
    first = earlier_run
    with Archive(first / "archive.sqlite", readonly=True) as a:
        run = a.runs()[0]
        times = {}
        for t in a.trials(run["id"], status="PASSED"):
            cand = a.get_candidate(t.candidate_id)
            key = config_key({"template": cand.template, **cand.config})
            times[key] = min(times.get(key, math.inf), t.measurement.kernel.median_us)
    from kernelloop.tune.replay.prior import read_prior
    data = {f.name: f.read_bytes() for f in first.iterdir() if f.name in ("archive.sqlite", "archive.sqlite-wal")}
    rec = read_prior(first, "rmsnorm")
    assert {n: (first / n).read_bytes() for n in data} == data, "reading the archive changed nothing in it"
    assert rec.path.endswith("archive.sqlite") and rec.prior.configurations == len(times) >= 2
    best = min(times, key=times.get)
    fastest_predicted = min(times, key=lambda k: rec.prior.predict(json.loads(k)))
    assert fastest_predicted == best, "an additive fit of a few points ranks their best first"
    with pytest.raises(ValueError, match="a recording of op 'rmsnorm', not 'softmax'"):
        read_prior(first / "archive.sqlite", "softmax")
    # committed results keep archives gzipped: the same prior, the sha256 that of the .gz file as given
    import gzip
    import shutil
    gz = tmp_path / "kept.sqlite.gz"
    with open(first / "archive.sqlite", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    packed = read_prior(gz, "rmsnorm")
    assert packed.prior.configurations == rec.prior.configurations
    assert packed.files == [(str(gz), hashlib.sha256(gz.read_bytes()).hexdigest())]
    assert packed.prior.warm_start(pruned({"M": 3, "N": 300}), 3) == rec.prior.warm_start(pruned({"M": 3, "N": 300}), 3)
    second = tmp_path / "second"
    r = optimize(workloads, second, "--budget", "1", "--prior", str(first))
    assert r.exit_code == 0, r.output
    configs, options, _ = evaluated(second)
    assert options["prior"]["configurations"] == len(times)
    target = pruned({"M": 3, "N": 300})
    assert configs == [target[i] for i in rec.prior.warm_start(target, 1)]


def test_bad_prior_is_refused(tmp_path, workloads):
    good = recording(tmp_path / "rmsnorm.space.json.gz")
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\xffnot json")
    other_json = tmp_path / "other.json"
    other_json.write_text('{"results": []}')
    cases = [
        (["--prior", str(tmp_path / "missing.space.json")], "no recorded space at"),
        (["--prior", str(garbage)], "not a readable recording"),
        (["--prior", str(other_json)], "neither a kernelloop space file nor a Kernel Tuner cache"),
        (["--prior", str(recording(tmp_path / "softmax.space.json", op="softmax"))], "a recording of op 'softmax'"),
        (["--prior", str(recording(tmp_path / "one.space.json", measured=1))],
         "at least two measured configurations, got 1"),
        (["--prior", str(good), "--strategy", "random"], "--prior is only used by --strategy staged"),
        (["--prior", str(good), "--strategy", "planner"], "--prior is only used by --strategy staged"),
    ]
    for args, message in cases:
        r = optimize(workloads, tmp_path / "never", *args)
        assert r.exit_code == common.BAD_INPUT, (args, r.output)
        assert "--prior" in r.output and message in said(r), (args, r.output)
    assert not (tmp_path / "never").exists()


def test_several_priors_pool_and_the_target_starts_from_its_own_recorded_best(tmp_path, workloads, earlier_run):
    """--prior repeated: a space file of other shapes and an earlier run of the target workload itself. The
    archive names both files; the first ask is the target's own measured best from the earlier run (not the
    nearer shape's of the space file); a resume keeps both and refuses a different set."""
    rec = recording(tmp_path / "rmsnorm.space.json")
    earlier = earlier_run
    with Archive(earlier / "archive.sqlite", readonly=True) as a:
        run = a.runs()[0]
        (run_workload,) = {t.workload_id for t in a.trials(run["id"])}
        times = {}
        for t in a.trials(run["id"], status="PASSED"):
            cand = a.get_candidate(t.candidate_id)
            times[config_key({"template": cand.template, **cand.config})] = t.measurement.kernel.median_us
    own_best = json.loads(min(times, key=times.get))
    out = tmp_path / "run"
    r = optimize(workloads, out, "--budget", "1", "--prior", str(rec), "--prior", str(earlier))
    assert r.exit_code == 0, r.output
    configs, options, events = evaluated(out)
    assert configs == [own_best]
    files = options["prior"]["files"]
    assert [f["path"] for f in files] == [str(rec), str(earlier / "archive.sqlite")]
    assert files[0]["sha256"] == hashlib.sha256(rec.read_bytes()).hexdigest()
    assert "path" not in options["prior"], "several files: only the list"
    source = next(e["source"] for e in events if e["kind"] == "prior")
    assert source == run_workload, "the target's own recording, by its workload id"
    # resumed with the same files in another order: the same prior
    r = optimize(workloads, out, "--budget", "2", "--resume", "--prior", str(earlier), "--prior", str(rec))
    assert r.exit_code == 0, r.output
    assert r.exit_code == 0, r.output
    assert len(evaluated(out)[0]) == 2
    shown = runner.invoke(app, ["show", str(out)], env={"COLUMNS": "500"})   # long paths unwrapped
    assert shown.exit_code == 0, shown.output
    assert f"search warm-started from {rec} (sha256 {files[0]['sha256'][:12]})" in said(shown), shown.output
    assert "earlier/archive.sqlite (sha256" in said(shown), shown.output
    r = optimize(workloads, out, "--budget", "3", "--resume", "--prior", str(rec))
    assert r.exit_code == common.STOPPED and "cannot resume with --prior" in said(r), r.output
    recording(rec, measured=5)   # the same paths, one file changed
    r = optimize(workloads, out, "--budget", "3", "--resume", "--prior", str(rec), "--prior", str(earlier))
    assert r.exit_code == common.STOPPED and "a file changed since the run began" in said(r), r.output
    # a file given twice, and a bad second file (named in the message), are refused
    r = optimize(workloads, tmp_path / "never", "--prior", str(rec), "--prior", str(rec))
    assert r.exit_code == common.BAD_INPUT and "is given twice" in said(r), r.output
    r = optimize(workloads, tmp_path / "never", "--prior", str(rec), "--prior", str(tmp_path / "missing.json"))
    assert r.exit_code == common.BAD_INPUT and "missing.json: not a readable recording" in said(r), r.output
    assert not (tmp_path / "never").exists()


def test_the_options_prior_is_a_warm_start_record_and_an_old_archived_form_resumes(tmp_path):
    """`RunOptions.prior` is a WarmStart: options archived with one recording at the top (path, sha256, no
    `files`) read back into it and resume from the recording; a prior of another type or shape is refused."""
    from pydantic import ValidationError

    from kernelloop.base.records.summary import WarmStart
    from kernelloop.tune.loop import RunOptions
    from kernelloop.tune.loop.freeze import read_warm_start, resumed_options
    rec = recording(tmp_path / "rmsnorm.space.json")
    sha = hashlib.sha256(rec.read_bytes()).hexdigest()
    old = {"device": "interpret", "strategy": "staged",
           "prior": {"path": str(rec), "sha256": sha, "configurations": 7}}
    stored = RunOptions.from_archived(old)
    assert isinstance(stored.prior, WarmStart) and [(f.path, f.sha256) for f in stored.prior.files] == [(str(rec), sha)]
    assert stored.as_dict()["prior"] == {"files": [{"path": str(rec), "sha256": sha}], "configurations": 7,
                                         "path": str(rec), "sha256": sha}
    options = resumed_options(RunOptions(device="interpret", strategy="staged"), stored)
    assert options.prior == stored.prior
    assert isinstance(read_warm_start(options, "rmsnorm"), TransferPrior)
    for bad in ("a.space.json", {"configurations": 3}, {"files": [{"path": "a"}], "configurations": 3},
                {"files": [{"path": "a", "sha256": "1"}], "configurations": "many"},
                {"files": [{"path": "a", "sha256": "1"}], "configurations": 3, "recordings": 1}):
        with pytest.raises(ValidationError):
            RunOptions(device="interpret", strategy="staged", prior=bad)
