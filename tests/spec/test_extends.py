"""`extends` in spec.toml (kernelloop.core.spec.extends): the built-in extensions load as the specs they replaced, the
merge rule, the errors for a missing base or a cycle, and the hash that covers the whole chain."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.core.spec import SpecError, load_op
from kernelloop.core.spec.extends import merge

OPS = ops_dir()
FROZEN = Path(__file__).parent / "fixtures" / "resolved_gemm_bias_specs.json"


def _resolved(op: str) -> dict:
    b = load_op(OPS / op)
    return {"spec": b.spec.model_dump(mode="json"), "fixed_axes": list(b.fixed_axes),
            "template_sources_sha256": {k: hashlib.sha256(v.encode()).hexdigest()
                                        for k, v in sorted(b.template_sources.items())}}


@pytest.mark.parametrize("op", ["gemm_bias", "gemm_bias_gelu", "gemm_bias_silu"])
def test_builtin_extensions_load_as_the_full_specs_they_replaced(op):
    # The fixture is the model_dump of each op as loaded when gemm_bias_gelu/silu still spelled out every line.
    assert _resolved(op) == json.loads(FROZEN.read_text())[op]


@pytest.mark.parametrize("op", ["gemm_bias_gelu", "gemm_bias_silu"])
def test_builtin_extensions_say_extends_and_keep_the_base_order(op):
    text = (OPS / op / "spec.toml").read_text()
    assert 'extends = "gemm_bias"' in text and len(text.splitlines()) < 80
    b, base = load_op(OPS / op), load_op(OPS / "gemm_bias")
    assert list(b.spec.axes) == list(base.spec.axes)
    assert [t.name for t in b.spec.templates] == [t.name for t in base.spec.templates]
    assert b.spec_file_names() == ["spec.toml", "../gemm_bias/spec.toml"]


def _fail(field, msg):
    return SpecError("x", field, msg)


def test_merge_rule():
    base = {"a": {"x": 1, "y": 2}, "dtypes": ["fp16", "bf16"],
            "templates": [{"name": "t", "params": [{"name": "P", "values": [1, 2]}, {"name": "Q", "values": [0]}],
                           "constraints": [{"expr": "P > 0", "reason": "r"}, {"expr": "Q == 0", "reason": "s"}]}]}
    over = {"a": {"y": 3}, "dtypes": ["fp32"],
            "templates": [{"name": "t", "params": [{"name": "Q", "values": [1]}, {"name": "R", "values": [5]}],
                           "constraints": [{"expr": "P > 0", "remove": True}, {"expr": "R < 9", "reason": "u"}]},
                          {"name": "t2", "params": [{"name": "P", "values": [3]}]}]}
    got = merge(base, over, "", _fail)
    assert got["a"] == {"x": 1, "y": 3}                       # tables key by key
    assert got["dtypes"] == ["fp32"]                          # plain arrays replaced
    t, t2 = got["templates"]
    assert [(p["name"], p["values"]) for p in t["params"]] == [("P", [1, 2]), ("Q", [1]), ("R", [5])]
    assert [c["expr"] for c in t["constraints"]] == ["Q == 0", "R < 9"]   # by expr; removed; appended
    assert t2 == {"name": "t2", "params": [{"name": "P", "values": [3]}]}
    assert base["templates"][0]["params"][1]["values"] == [0]           # the base is not changed


def test_remove_of_an_entry_the_base_lacks_is_an_error():
    with pytest.raises(SpecError, match="removes name 'nope'"):
        merge({"inputs": [{"name": "x"}]}, {"inputs": [{"name": "nope", "remove": True}]}, "", _fail)
    with pytest.raises(SpecError, match="only applies"):
        merge({"dtypes": ["fp16"]}, {"dtypes": [{"remove": True}]}, "", _fail)


def _child(root: Path, name: str, extends: str, body: str = "") -> Path:
    folder = root / name
    folder.mkdir()
    for f in ("reference.py", "kernel.py", "chunked.py", "persistent.py"):   # layernorm's reference and templates
        shutil.copyfile(OPS / "layernorm" / f, folder / f)
    (folder / "spec.toml").write_text(f'extends = "{extends}"\nname = "{name}"\n{body}')
    return folder


@pytest.fixture
def ops_root(tmp_path):
    shutil.copytree(OPS / "layernorm", tmp_path / "base")
    spec = tmp_path / "base" / "spec.toml"
    spec.write_text(spec.read_text().replace('name = "layernorm"', 'name = "base"', 1))
    return tmp_path


def test_a_sibling_base_with_overrides(ops_root):
    child = _child(ops_root, "child", "base", 'description = "mine"\n[tolerance.fp16]\natol = 0.5\n'
                   '[[templates]]\nname = "rowwise"\n[[templates.params]]\nname = "num_warps"\nvalues = [4]\n')
    b, base = load_op(child), load_op(ops_root / "base")
    assert b.spec.description == "mine" and b.spec.tolerance[b.spec.dtypes[0]].atol == 0.5
    assert b.spec.tolerance[b.spec.dtypes[0]].rtol == base.spec.tolerance[base.spec.dtypes[0]].rtol
    warps = {p.name: p.values for p in b.spec.templates[0].params}["num_warps"]
    assert warps == [4] and b.spec.templates[0].constraints == base.spec.templates[0].constraints
    assert b.spec.inputs == base.spec.inputs and b.spec_files[1].resolve() == (ops_root / "base/spec.toml").resolve()


def test_a_builtin_base_when_no_sibling_has_it(tmp_path):
    b = load_op(_child(tmp_path, "myln", "layernorm"))
    assert b.spec.templates == load_op(OPS / "layernorm").spec.templates
    assert b.spec_files[1] == OPS / "layernorm" / "spec.toml"


def test_a_missing_base_names_the_chain(tmp_path):
    with pytest.raises(SpecError) as e:
        load_op(_child(tmp_path, "a", "no_such_op"))
    assert e.value.field == "extends" and "a -> no_such_op" in str(e.value)


def test_self_and_cycles_name_the_chain(tmp_path):
    with pytest.raises(SpecError, match=r"chain a -> a"):
        load_op(_child(tmp_path, "a", "a"))
    _child(tmp_path, "b", "c")
    _child(tmp_path, "c", "b")
    with pytest.raises(SpecError, match=r"chain b -> c -> b"):
        load_op(tmp_path / "b")


def test_a_chain_of_two(ops_root):
    _child(ops_root, "mid", "base", 'description = "mid"\n')
    b = load_op(_child(ops_root, "leaf", "mid", 'dtypes = ["fp32"]\n'))
    assert b.spec.description == "mid" and [d.value for d in b.spec.dtypes] == ["fp32"]
    assert b.spec_file_names() == ["spec.toml", "../mid/spec.toml", "../base/spec.toml"]


def test_the_spec_hash_covers_the_base(ops_root):
    child = _child(ops_root, "child", "base")
    plain = load_op(ops_root / "base")
    assert plain.spec_hash == hashlib.sha256((ops_root / "base/spec.toml").read_bytes()).hexdigest()
    before = load_op(child).spec_hash
    spec = ops_root / "base" / "spec.toml"
    spec.write_text(spec.read_text().replace("rtol = 1e-2", "rtol = 2e-2", 1))
    assert load_op(child).spec_hash != before


def test_the_manifest_and_the_workspace_record_the_chain(ops_root):
    from kernelloop.deliver.agent.workspace import _op_files
    from kernelloop.core.manifest import build_manifest
    b = load_op(_child(ops_root, "child", "base"))
    assert "../base/spec.toml" in _op_files(b) and "spec.toml" in _op_files(b)
    from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK as policy
    from kernelloop.base.records import Environment
    env = Environment(device="interpret", torch="", triton="", python="", host="")
    man = build_manifest(b, policy, policy, env, checks=1)
    assert man["spec_sha256"] == b.spec_hash
