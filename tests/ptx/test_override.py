"""Triton's IR override substitutes an edited PTX for a template's kernel: built ahead of time for sm_90 on this
machine (no GPU), the compiled kernel's PTX is the edit and its cubin is what Triton's ptxas makes of it; a launch
that compiles to other PTX (another configuration) is left as it is."""

import base64
import hashlib

from kernelloop.base.builtin import ops_dir
from kernelloop.core.build.ptx_override import PtxOverrides, write_files
from kernelloop.tune.ptx.patch import edited_ptx
from kernelloop.tune.ptx.rules import propose
from kernelloop.tune.ptx.tools import assemble
from kernelloop.core.spec import load_op
from kernelloop.core.build.aot import BUILT, build_configs
from kernelloop.core.spec.loader import load_workloads


def test_the_edited_ptx_is_what_triton_compiles(kernels, surveyed, tmp_path):
    bundle = load_op(ops_dir() / "rmsnorm")
    row = next(r for r in surveyed if r.op == "rmsnorm" and r.template == "rowwise")
    k = kernels["rmsnorm/rowwise"]
    edit = propose(k, parent="c-p", rules=["unroll"])[0]
    text = edited_ptx(edit, k.ptx)
    files = write_files(tmp_path, {k.name: (hashlib.sha256(k.ptx.encode()).hexdigest(), text)})
    w = load_workloads(bundle.folder / "workloads.toml", bundle.spec)[0]
    other = {**row.config, "num_warps": row.config["num_warps"] * 2}   # another configuration: other PTX
    same, diff = build_configs(bundle.spec, {"rowwise": bundle.folder / "kernel.py"}, w,
                               [{"template": "rowwise", **row.config}, {"template": "rowwise", **other}], jobs=1,
                               keep_asm=True, ptx_overrides=files)
    assert same.status == diff.status == BUILT
    (ks,), (kd,) = same.kernels, diff.kernels
    assert ks["ptx_override"] and ks["asm"]["ptx"] == text
    assert base64.b64decode(ks["asm"]["cubin_b64"]) == assemble(text, 90, k.metadata).cubin
    assert not kd["ptx_override"] and kd["asm"]["ptx"] != text


def test_overrides_count_hits_and_misses():
    class Jit:
        __name__ = "_k"

    class Compiled:
        def __init__(self, ptx):
            self.asm = {"ptx": ptx}
    calls = []

    def run(jit, *args, grid, warmup, **kw):
        calls.append((warmup, kw.get("ir_override")))
        return Compiled(args[0])
    sha = hashlib.sha256(b"orig").hexdigest()
    o = PtxOverrides({"_k": {sha: "/x/edit.ptx"}})
    assert o.kwargs(Jit(), run, ("orig",), (1,), {}) == {"ir_override": "/x/edit.ptx"}
    assert o.kwargs(Jit(), run, ("other",), (1,), {}) == {}
    assert o.hits["_k"] == 1 and o.misses["_k"] == 1 and calls == [(True, None), (True, None)]
