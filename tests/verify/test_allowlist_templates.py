"""Every kernel kernelloop ships or writes passes the allow-list (core/verify/rules/allow.py) and every other static rule:
the templates of every built-in op (gluon_kernel.py, swapab_kernel.py and the generated schedule_*.py included),
the schedule lowering's output for every schedule of its library, and the fused templates with every epilogue
translation the fusion's code generator can write."""

from __future__ import annotations

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.deliver.fuse import codegen
from kernelloop.deliver.fuse.opgen import TEMPLATE_FILE, _gemm_helpers, _template_text
from kernelloop.deliver.fuse.plans import GEMM_ARGS
from kernelloop.tune.schedule.library import LIBRARY
from kernelloop.tune.schedule.lower import lower
from kernelloop.core.spec import load_op
from kernelloop.core.verify.rules import check_source

OPS = sorted(p.name for p in ops_dir().iterdir() if (p / "spec.toml").is_file())
BUILTIN = [(op, name) for op in OPS for name in load_op(ops_dir() / op).template_sources]


def _hits(source: str, spec) -> list[str]:
    return [f"{h.rule} at line {h.line}: {h.detail} | {h.snippet}" for h in check_source(source, spec)]


def test_every_kernel_file_of_every_op_is_a_template():
    # a kernel file an op ships but no template names would escape the parametrisation below
    for op in OPS:
        bundle = load_op(ops_dir() / op)
        files = {t.file for t in bundle.spec.templates}
        shipped = {p.name for p in bundle.folder.glob("*.py")} - {"reference.py", "baselines.py"}
        assert shipped <= {f.split("/")[-1] for f in files}, (op, shipped - files)


@pytest.mark.parametrize("op,template", BUILTIN, ids=[f"{o}/{t}" for o, t in BUILTIN])
def test_builtin_template_passes_the_allow_list(op, template):
    bundle = load_op(ops_dir() / op)
    assert _hits(bundle.template_sources[template], bundle.spec) == []


@pytest.mark.parametrize("name", sorted(LIBRARY))
def test_lowered_schedule_passes_the_allow_list(name):
    spec = load_op(ops_dir() / "gemm").spec
    assert _hits(lower(LIBRARY[name]()), spec) == []


def _every_epilogue(args: list[str]) -> str:
    """An epilogue using every translation codegen writes (unary ops, binary ops, both GELUs)."""
    x, y = args[0], args[1]
    lines = [f"    t{k} = {expr.format(x=x)}" for k, expr in enumerate(codegen.UNARY.values())]
    lines += [f"    b{k} = {expr.format(a=x, b=y)}" for k, expr in enumerate(codegen.BINARY.values())]
    lines += [f"    g0 = {codegen._gelu(x, 'tanh')}", f"    g1 = {codegen._gelu(x, 'none')}"]
    return "\n".join(["@triton.jit", f"def _epilogue({', '.join(args)}):", *lines, "    return g0 + g1", ""])


@pytest.mark.parametrize("file", sorted(set(TEMPLATE_FILE.values())))
def test_fused_template_passes_the_allow_list(file):
    text = _template_text(file)
    common = _template_text("common.py")
    text = text.replace("# {COMMON}\n", "\n" + common[common.index("@triton.jit"):].rstrip() + "\n\n", 1)
    text = text.replace("# {GEMM_HELPERS}\n", "\n" + _gemm_helpers().rstrip() + "\n\n", 1)
    text = text.replace("# {EPILOGUE}\n", "\n" + _every_epilogue(GEMM_ARGS if "gemm" in file else ["x0", "x1"]))
    assert "{EPILOGUE}" not in text
    spec = load_op(ops_dir() / ("gemm" if "gemm" in file else "layernorm")).spec
    assert _hits(text, spec) == []


VERSION_TEST = """import triton
import triton.language as tl
_barrier = getattr(tl, "{name}", None) or tl.debug_barrier
"""


def test_a_version_feature_test_may_name_what_this_library_version_lacks():
    """`getattr(<declared module>, "<name>", default)` is how a template runs on two Triton versions (gluon_kernel.py
    picks `tma.async_load` or `tma.async_copy_global_to_shared`): a name the installed version does not define gives
    the default, itself checked; the rejection names what matched."""
    spec = load_op(ops_dir() / "layernorm").spec
    assert _hits(VERSION_TEST.format(name="a_name_no_triton_defines"), spec) == []
    assert _hits(VERSION_TEST.format(name="reduce"), spec) == []                 # defined and declared
    (hit,) = check_source(VERSION_TEST.format(name="__dict__"), spec)            # never allowed, present or not
    assert hit.rule == "not-allowed" and "'__dict__'" in hit.message and hit.message.startswith("not-allowed at line 3")


def test_a_feature_test_on_a_module_that_computes_its_attributes_is_refused(monkeypatch):
    """A declared module with a module-level __getattr__ could hand back anything for a name it does not define, so
    a missing name is not inert there (no declared module has one today; a policy that declares one is covered)."""
    import sys
    import types
    lazy = types.ModuleType("lazy_lib")
    lazy.__getattr__ = lambda name: sys      # what a lazily-importing library could return
    monkeypatch.setitem(sys.modules, "lazy_lib", lazy)
    spec = load_op(ops_dir() / "layernorm").spec
    policy = spec.code_policy.model_copy(update={"modules": [*spec.code_policy.modules, "lazy_lib"]})
    spec = spec.model_copy(update={"code": policy})
    ok = "import lazy_lib\nimport triton.language as tl\n_x = getattr(tl, 'a_name_triton_lacks', None)\n"
    assert [h for h in check_source(ok, spec) if h.rule == "not-allowed"] == []
    src = "import lazy_lib\n_x = getattr(lazy_lib, 'a_name_it_lacks', None)\n"
    (hit,) = [h for h in check_source(src, spec) if h.rule == "not-allowed"]
    assert hit.line == 2 and "'a_name_it_lacks'" in hit.message


# what one Triton version names and the other lacks, for the names the templates' version lines pick between
_VERSION_NAMES = {
    "triton.experimental.gluon.language": ["thread_barrier", "barrier"],
    "triton.experimental.gluon.language.nvidia.hopper.tma": [
        "async_load", "async_copy_global_to_shared", "async_store", "async_copy_shared_to_global"],
}
_SHIMMED = [(op, t) for op, t in BUILTIN if "_sync_warps = " in load_op(ops_dir() / op).template_sources[t]]


@pytest.mark.parametrize("module,name", [(m, n) for m, names in _VERSION_NAMES.items() for n in names])
def test_every_gluon_template_passes_without_one_version_name(monkeypatch, module, name):
    """The installed Triton decides which names exist: a template refused on the GPU host's Triton 3.6 because its
    version line read `... or gl.barrier` (3.9 only) passed on this host's 3.9. Each name a version line picks between
    is removed in turn and every Gluon template must still pass."""
    import importlib
    mod = importlib.import_module(module)
    if hasattr(mod, name):
        monkeypatch.delattr(mod, name)
    assert _SHIMMED, "no template carries the version lines"
    for op, template in _SHIMMED:
        bundle = load_op(ops_dir() / op)
        assert _hits(bundle.template_sources[template], bundle.spec) == [], (op, template, name)
