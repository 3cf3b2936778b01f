"""benchmarks/real_vs_replay.py: a real (interpreter) run of the default strategy against its replay."""

import importlib.util
import json
from pathlib import Path

from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.core.archive import Archive
from kernelloop.cli.app import app
from kernelloop.base.records.device import DeviceProperties
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import Status
from kernelloop.core.spec import load_op, load_workloads
from kernelloop.core.spec.space import prune

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _script():
    spec = importlib.util.spec_from_file_location("rvr", ROOT / "benchmarks" / "real_vs_replay.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_replay_served_the_real_measurements_asks_what_the_real_run_asked(tmp_path):
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    run_dir = tmp_path / "run"
    r = runner.invoke(app, ["optimize", str(ops_dir() / "rmsnorm"), "--workloads", str(wl), "--device", "interpret",
                            "--budget", "4", "--checks", "1", "--no-confirm", "--template", "rowwise",
                            "--fix", "ROWS=1", "--out", str(run_dir)])
    assert r.exit_code == 0, r.output
    bundle = load_op(ops_dir() / "rmsnorm")
    w = load_workloads(wl, bundle.spec)[0]
    with Archive(run_dir / "archive.sqlite") as a:
        run = a.runs()[0]
        trials = sorted(a.trials(run["id"], w.id), key=lambda t: t.index)
        measured = {}
        for t in trials:
            c = a.get_candidate(t.candidate_id)
            assert t.verdict.status is Status.PASSED
            measured[json.dumps({"template": c.template, **c.config}, sort_keys=True)] = t.measurement.kernel.median_us
    assert len(trials) == 4
    archived = run["environment"].get("properties")   # the archive holds the record's JSON
    props = DeviceProperties.model_validate(archived) if archived else VIRTUAL_HOPPER
    template = next(t for t in bundle.spec.templates if t.name == "rowwise")
    space = [{"template": "rowwise", **c} for c in prune(template, w, props)[0] if c["ROWS"] == 1]
    assert len(space) > 4
    # The recording: the real run's own measurements where it measured, slower made-up values elsewhere, written
    # in reverse order (the script must rebuild the controller's order) and split into two shards.
    slow = 10 * max(measured.values())
    records = [{"config": c, "results": {w.id: {"value": measured.get(json.dumps(c, sort_keys=True), slow + i),
                                                 "status": "PASSED"}}} for i, c in enumerate(space)][::-1]
    paths = []
    for k in range(2):
        doc = {"format": "kernelloop-space/1", "name": "synthetic", "op": "rmsnorm", "objective": "kernel_us",
               "device": {"name": "virtual"}, "shard": [k, 2], "complete": True,
               "workloads": [{"id": w.id, "label": w.label, "axes": w.axes, "dtype": "fp32", "weight": 1.0}],
               "records": records[k::2]}
        paths.append(tmp_path / f"s{k}.json")
        paths[-1].write_text(json.dumps(doc))
    out = tmp_path / "cmp.json"
    assert _script().main(["--real", str(run_dir), "--space", str(paths[0]), "--space", str(paths[1]),
                           "--seeds", "5", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["real"]["strategy"] == "staged" and got["real"]["evaluations"] == 4
    assert got["real"]["fixed"] == {"ROWS": "1"} and got["space"]["configurations"] == len(space)
    # served the same values, the replay of the same seed asks exactly the same configurations
    assert got["same_seed_replay"]["keys_identical_until"] == 4 and got["same_seed_replay"]["first_divergence"] is None
    assert got["measurement_agreement"]["n"] == 4 and got["measurement_agreement"]["median_ratio"] == 1.0
    assert got["real_curve_fraction"] == got["real_curve_fraction_own_measurement"]
    assert got["final_fraction"]["real"] == got["same_seed_replay"]["final_fraction"]
    # a recording of another space is refused
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(paths[0].read_text()), "shard": None, "records": records[:2]}))
    try:
        _script().main(["--real", str(run_dir), "--space", str(bad)])
    except SystemExit as e:
        assert "does not hold the run's space" in str(e)
    else:
        raise AssertionError("a recording lacking the run's space was accepted")
