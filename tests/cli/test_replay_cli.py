"""`kernelloop replay` end to end on a small Kernel Tuner cache, and `kernelloop record` on a GPU."""

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelloop.base.builtin import ops_dir
from kernelloop.cli import common
from kernelloop.cli.app import app

runner = CliRunner()


def cache(tmp_path: Path) -> Path:
    entries = {}
    for bx in (16, 32, 64, 128, 256):
        for t in (1, 2, 3, 4):
            time = None if (bx, t) == (256, 4) else 1.0 + abs(bx - 64) / 64 + abs(t - 3) * 0.5
            entries[f"{bx},{t}"] = {"bx": bx, "t": t, "time": time if time else "CompilationFailedConfig"}
    data = {"tune_params_keys": ["bx", "t"], "tune_params": {"bx": [16, 32, 64, 128, 256], "t": [1, 2, 3, 4]},
            "objective": "time", "kernel_name": "toy", "problem_size": [8], "cache": entries}
    p = tmp_path / "toy.json.gz"
    p.write_bytes(gzip.compress(json.dumps(data).encode()))
    return p


def test_replay_json_reports_curves_and_metrics(tmp_path):
    r = runner.invoke(app, ["replay", str(cache(tmp_path)), "--strategy", "staged", "--strategy", "random",
                            "--seeds", "3", "--budget", "19", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("["):])
    assert [o["strategy"] for o in out] == ["staged", "random"]
    for o in out:
        assert o["configurations"] == 20 and o["failed"] == 1 and o["optimum"] == 1.0
        assert len(o["mean_fraction_of_optimum"]) == 19 and len(o["runs"]) == 3
        assert all(r["evaluations"] == 19 for r in o["runs"])
        # 19 of 20 configurations with 1 failure: every run has seen the optimum by the end
        assert o["mean_fraction_of_optimum"][-1] == 1.0 and o["reached_5pct"] == 1.0


def test_replay_table_and_bad_input(tmp_path):
    r = runner.invoke(app, ["replay", str(cache(tmp_path)), "--seeds", "2", "--budget", "5"])
    assert r.exit_code == 0 and "staged" in r.output and "P@50" in r.output
    bad = runner.invoke(app, ["replay", str(cache(tmp_path)), "--strategy", "nope"])
    assert bad.exit_code == common.BAD_INPUT and "unknown strategy" in bad.output
    missing = runner.invoke(app, ["replay", str(tmp_path / "nothing.json")])
    assert missing.exit_code == common.BAD_INPUT


def test_p_at_k_beyond_the_budget_is_not_measured(tmp_path):
    """P@50 after 5 evaluations of a 20-configuration space is not P@50 (it printed the best after 5 under that
    name); once a run has tried the whole space, P@k of any larger k is what it found."""
    r = runner.invoke(app, ["replay", str(cache(tmp_path)), "--strategy", "random", "--seeds", "2", "--budget", "5",
                            "--json"])
    (o,) = json.loads(r.stdout[r.stdout.index("["):])
    assert o["p50"] is None and o["p100"] is None and all(x["p50"] is None for x in o["runs"])
    table = runner.invoke(app, ["replay", str(cache(tmp_path)), "--strategy", "random", "--seeds", "2",
                                "--budget", "5"])
    assert table.exit_code == 0 and "—" in table.output
    r = runner.invoke(app, ["replay", str(cache(tmp_path)), "--strategy", "random", "--seeds", "2", "--budget", "30",
                            "--json"])
    (o,) = json.loads(r.stdout[r.stdout.index("["):])
    assert o["p50"] == o["p100"] == 1.0


@pytest.mark.gpu
def test_record_then_replay_on_a_gpu(tmp_path):
    out = tmp_path / "rmsnorm.json.gz"
    r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--limit", "4"])
    assert r.exit_code == 0, r.output
    rep = runner.invoke(app, ["replay", str(out), "--seeds", "2", "--budget", "4", "--json"])
    assert rep.exit_code == 0, rep.output


def test_record_shards_in_the_interpreter_join_into_the_whole_space(tmp_path):
    from kernelloop.tune.replay import load_space, merge_spaces
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    outs = []
    for i in range(2):
        out = tmp_path / f"shard{i}.json.gz"
        r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret",
                                "--workloads", str(wl), "--limit", "4", "--shard", f"{i}/2"])
        assert r.exit_code == 0, r.output
        outs.append(out)
    shards = [load_space(p) for p in outs]
    assert [len(s) for s in shards] == [2, 2]
    whole = merge_spaces(shards)
    assert len(whole) == 4 and len({str(sorted(c.items())) for c in whole.configs}) == 4
    assert whole.meta["shards"] == [str(p) for p in outs]
    assert whole.meta["complete"] is True and whole.meta["planned"] == 4 and "shard" not in whole.meta
    # Refused: a shard twice (not the shards 0..N-1), a configuration in two shards, another recording's shard.
    with pytest.raises(ValueError, match="not the shards 0..N-1"):
        merge_spaces([shards[0], shards[0]])
    import dataclasses
    unsharded = [dataclasses.replace(s, meta={k: v for k, v in s.meta.items() if k != "shard"}) for s in shards]
    with pytest.raises(ValueError, match="more than one shard"):
        merge_spaces([unsharded[0], unsharded[0]])
    other = dataclasses.replace(shards[1], meta={**shards[1].meta, "op": "softmax"})
    with pytest.raises(ValueError, match="'op'"):
        merge_spaces([shards[0], other])
    speedups = dataclasses.replace(shards[1], meta={**shards[1].meta, "baseline": 10.0})
    with pytest.raises(ValueError, match="own baseline"):
        merge_spaces([shards[0], speedups])
    # One shard alone is what it is: a part, which the planner benchmark reports as not exhaustive.
    assert merge_spaces([shards[0]]) is shards[0] and shards[0].meta["shard"] == [0, 2]
    for bad in ("2/2", "x", "1/0"):
        r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(tmp_path / "b.json"),
                                "--device", "interpret", "--shard", bad])
        assert r.exit_code == common.BAD_INPUT and "--shard" in r.output
    # A workload no configuration of the chosen template can serve (rowwise's blocks start at 256 lanes; rows shorter
    # than 32 keep only the persistent template's one-warp configurations): said plainly, no empty space file.
    tiny = tmp_path / "tiny.toml"
    tiny.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 16 }\ndtype = "fp32"\n')
    r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(tmp_path / "e.json"),
                            "--device", "interpret", "--workloads", str(tiny), "--template", "rowwise"])
    assert r.exit_code == common.BAD_INPUT and "no configuration" in r.output and not (tmp_path / "e.json").exists()


def test_record_writes_after_every_configuration_and_resumes(tmp_path):
    from kernelloop.tune.replay import load_space
    from kernelloop.tune.replay.space_file import read_space_document, write_space_file
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    out = tmp_path / "s.json"
    args = ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret", "--workloads", str(wl),
            "--limit", "3"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    full = read_space_document(out)
    assert full["complete"] is True and full["planned"] == 3 and len(full["records"]) == 3
    # A recording cut after its first configuration (what the per-configuration write leaves behind) ...
    write_space_file(out, {**full, "records": full["records"][:1], "complete": False})
    assert load_space(out).meta["complete"] is False
    r = runner.invoke(app, args + ["--resume"])
    assert r.exit_code == 0, r.output
    # rich wraps lines at the console's width, which a long temporary path can reach: compare words, not lines
    assert "1 of 3 configurations already recorded" in " ".join(r.output.split()) and r.output.count("µs") == 2
    again = read_space_document(out)
    assert again["complete"] is True and len(again["records"]) == 3
    assert again["records"][0] == full["records"][0]                 # kept, not measured again
    # ... and a file from another recording (op, or device) is refused, naming the field.
    write_space_file(out, {**full, "op": "softmax"})
    r = runner.invoke(app, args + ["--resume"])
    assert r.exit_code == common.BAD_INPUT and "'op'" in r.output
    write_space_file(out, {**full, "device": {**full["device"], "name": "another GPU"}})
    r = runner.invoke(app, args + ["--resume"])
    assert r.exit_code == common.BAD_INPUT and "'device'" in r.output


def test_record_template_records_only_that_template_and_resume_checks_it(tmp_path):
    from kernelloop.tune.replay.space_file import read_space_document, write_space_file
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    out = tmp_path / "p.json"
    args = ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret", "--workloads", str(wl),
            "--limit", "2", "--template", "persistent"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = read_space_document(out)
    assert doc["templates"] == ["persistent"] and {rec["config"]["template"] for rec in doc["records"]} == {"persistent"}
    write_space_file(out, {**doc, "templates": ["rowwise"], "complete": False})
    r = runner.invoke(app, args + ["--resume"])
    assert r.exit_code == common.BAD_INPUT and "'templates'" in r.output
    r = runner.invoke(app, ["record", "rmsnorm", "--out", str(tmp_path / "x.json"), "--device", "interpret",
                            "--template", "nonesuch"])
    assert r.exit_code == common.BAD_INPUT and "nonesuch" in r.output



def test_record_fix_records_only_the_pinned_configurations_and_resume_checks_it(tmp_path):
    from kernelloop.tune.replay.space_file import read_space_document, write_space_file
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    out = tmp_path / "f.json"
    args = ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret", "--workloads", str(wl),
            "--limit", "2", "--fix", "num_warps=2,PREFETCH=1"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    doc = read_space_document(out)
    assert doc["fixed"] == {"num_warps": "2", "PREFETCH": "1"} and doc["planned"] == len(doc["records"]) >= 1
    # only the persistent template has PREFETCH; every record carries the pinned values
    assert all(rec["config"]["template"] == "persistent" and rec["config"]["num_warps"] == 2
               and rec["config"]["PREFETCH"] == 1 for rec in doc["records"])
    write_space_file(out, {**doc, "fixed": {"num_warps": "4"}, "complete": False})
    r = runner.invoke(app, args + ["--resume"])
    assert r.exit_code == common.BAD_INPUT and "'fixed'" in r.output
    r = runner.invoke(app, ["record", "rmsnorm", "--out", str(tmp_path / "x.json"), "--device", "interpret",
                            "--fix", "num_warps=3"])
    assert r.exit_code == common.BAD_INPUT and "--fix" in r.output and not (tmp_path / "x.json").exists()


def test_record_configs_records_exactly_the_listed_configurations_pruned_or_not(tmp_path):
    from kernelloop.tune.replay.space_file import read_space_document
    from kernelloop.core.spec import load_op
    from kernelloop.core.spec.space import expand, why_pruned
    from kernelloop.core.device import VIRTUAL_HOPPER
    from kernelloop.base.records import Workload
    wl = tmp_path / "w.toml"
    wl.write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 3, N = 300 }\ndtype = "fp32"\n')
    b = load_op(ops_dir() / "rmsnorm")
    t = next(t for t in b.spec.templates if t.name == "rowwise")
    w = Workload(op="rmsnorm", axes={"M": 3, "N": 300}, dtype="fp32")
    # one configuration pruning removes (a block narrower than 1024 looping over the row) and one it keeps
    removed = next(c for c in expand(t) if why_pruned(t, w, VIRTUAL_HOPPER, c) and c["BLOCK_N"] == 256
                   and c["ROWS"] == 1)
    kept = next(c for c in expand(t) if why_pruned(t, w, VIRTUAL_HOPPER, c) is None)
    listed = tmp_path / "configs.json"
    listed.write_text(json.dumps([{"template": "rowwise", **removed}, {"template": "rowwise", **kept}]))
    out = tmp_path / "c.json"
    r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(out), "--device", "interpret",
                            "--workloads", str(wl), "--configs", str(listed)])
    assert r.exit_code == 0, r.output
    doc = read_space_document(out)
    assert doc["unpruned"] is True and doc["configs_file"] == "configs.json"
    assert [rec["config"] for rec in doc["records"]] == [{"template": "rowwise", **removed},
                                                          {"template": "rowwise", **kept}]
    assert all(res["status"] == "PASSED" and res["value"] > 0 for rec in doc["records"]
               for res in rec["results"].values())
    # per-workload form (as audit-pruning --configs-out writes it) naming another workload, and malformed lists
    for bad, says in (({"configs": {"w-other": []}}, "no configurations for workload"),
                      ([{"BLOCK_N": 256}], "needs a \"template\""),
                      ([{"template": "rowwise", "BLOCK_N": 256}], "missing"),
                      ([{"template": "rowwise", **removed, "BLOCK_N": 257}], "BLOCK_N not among the declared"),
                      ("not json", "not a readable JSON file")):
        listed.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(tmp_path / "x.json"),
                                "--device", "interpret", "--workloads", str(wl), "--configs", str(listed)])
        assert r.exit_code == common.BAD_INPUT and says in " ".join(r.output.split()), r.output

    listed.write_text(json.dumps([{"template": "rowwise", **kept}]))
    r = runner.invoke(app, ["record", str(ops_dir() / "rmsnorm"), "--out", str(tmp_path / "x.json"), "--device",
                            "interpret", "--workloads", str(wl), "--configs", str(listed), "--template", "rowwise"])
    assert r.exit_code == common.BAD_INPUT and "not with --template" in " ".join(r.output.split())
