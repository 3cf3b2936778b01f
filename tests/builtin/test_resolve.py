"""kernelloop.base.builtin: the package data's folders and the one op resolution every command uses."""

import shutil
from pathlib import Path

import pytest

from kernelloop.base.builtin import builtin_ops, knowledge_dir, op_folder, ops_dir, prompts_dir, resolve_op, resolve_path
from kernelloop.tune.knowledge.loader import default_dir
from kernelloop.tune.propose.llm.prompts import prompts_root
from kernelloop.core.spec import SpecError, load_op

PKG = Path(__file__).resolve().parents[2] / "src" / "kernelloop"


def test_folders_are_the_package_data():
    assert ops_dir() == PKG / "base" / "builtin" / "ops"   # this editable checkout; tests/test_install.py checks a wheel
    assert knowledge_dir() == PKG / "base" / "builtin" / "knowledge" and any(knowledge_dir().glob("*.toml"))
    assert (prompts_dir() / "v1" / "system.md").is_file()
    names = builtin_ops()
    assert {"layernorm", "rmsnorm", "softmax", "gemm", "gemm_nt", "attention_causal"} <= set(names)
    assert names == sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())


def test_knowledge_and_prompts_default_to_builtin(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELLOOP_KNOWLEDGE", raising=False)
    monkeypatch.delenv("KERNELLOOP_PROMPTS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_dir() == knowledge_dir() and prompts_root() == prompts_dir()
    monkeypatch.setenv("KERNELLOOP_KNOWLEDGE", str(tmp_path / "k"))
    monkeypatch.setenv("KERNELLOOP_PROMPTS", str(tmp_path / "p"))
    assert default_dir() == tmp_path / "k" and prompts_root() == tmp_path / "p"


def test_a_name_is_the_builtin_op_from_any_folder(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert resolve_op("layernorm") == ops_dir() / "layernorm"
    assert load_op(resolve_op("layernorm")).spec.name == "layernorm"
    assert op_folder("rmsnorm") == ops_dir() / "rmsnorm"
    assert op_folder("rmsnorm", tmp_path / "mine") == tmp_path / "mine" / "rmsnorm"


def test_an_existing_path_and_a_local_ops_folder_win(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "my_ops" / "rmsnorm"
    shutil.copytree(ops_dir() / "rmsnorm", mine, ignore=shutil.ignore_patterns("__pycache__"))
    assert resolve_op(str(mine)) == mine and resolve_op("my_ops/rmsnorm") == Path("my_ops/rmsnorm")
    assert resolve_op("my_ops/rmsnorm/spec.toml") == Path("my_ops/rmsnorm/spec.toml")
    shutil.copytree(mine, tmp_path / "ops" / "rmsnorm")
    assert resolve_op("rmsnorm") == Path("ops/rmsnorm")          # ./ops/<name> before the built-in one
    assert resolve_op("ops/rmsnorm") == Path("ops/rmsnorm")      # it exists here: as given


def test_ops_paths_that_do_not_exist_here_mean_the_builtin_op(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert resolve_op("ops/rmsnorm") == ops_dir() / "rmsnorm"
    assert resolve_op("ops/rmsnorm/spec.toml") == ops_dir() / "rmsnorm" / "spec.toml"
    assert resolve_path(Path("ops/gemm/workloads-prefill.toml")) == ops_dir() / "gemm" / "workloads-prefill.toml"
    assert resolve_path(Path("ops/nope/workloads.toml")) == Path("ops/nope/workloads.toml")
    assert resolve_path(Path("w.toml")) == Path("w.toml")


def test_an_unknown_name_stays_a_path_that_fails_to_load(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert resolve_op("no_such_op") == Path("no_such_op")
    with pytest.raises(SpecError, match="no_such_op"):
        load_op(resolve_op("no_such_op"))


def test_export_finds_a_runs_op_the_same_way(monkeypatch, tmp_path):
    from kernelloop.deliver.package.export import ExportError, _op_bundle
    from kernelloop.base.records import sha256_hex
    monkeypatch.chdir(tmp_path)
    b = load_op(ops_dir() / "rmsnorm")
    man = {"spec_sha256": sha256_hex((b.folder / "spec.toml").read_bytes()), "reference_sha256": b.reference_hash,
           "template_sha256": {}}
    assert _op_bundle({"op": "rmsnorm", "id": "r-1", "manifest": man}, None, set()).folder == ops_dir() / "rmsnorm"
    with pytest.raises(ExportError, match="pass --ops"):
        _op_bundle({"op": "my_op", "id": "r-1", "manifest": man}, None, set())
    with pytest.raises(ExportError, match="does not load") as e:
        _op_bundle({"op": "my_op", "id": "r-1", "manifest": man}, tmp_path, set())
    assert "pass --ops" not in str(e.value)
