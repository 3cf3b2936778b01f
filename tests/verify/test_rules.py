"""Static source rules: each rule fires on what it names and stays quiet on honest kernels."""

import ast
import textwrap
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.base.records import StaticRuleHit
from kernelloop.core.spec import load_op
from kernelloop.core.verify.rules import RULE_IDS, RULES, check_source

ROOT = Path(__file__).resolve().parents[2]
OPS = ops_dir()
CANDIDATES = ROOT / "tests" / "fixtures" / "candidates"

HEAD = "import torch\nimport triton\nimport triton.language as tl\n"

KERNEL = HEAD + '''

@triton.jit
def _k(X, W, B, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(X + row * N + cols, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(m, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(W + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + row * N + cols, (xc * rstd * w + b).to(Y.dtype.element_ty), mask=m)

'''

LAUNCH = '''
def launch(x, weight, bias, y, *, eps, **config):
    M, N = x.shape
    _k[(M,)](x, weight, bias, y, N, eps, BLOCK=triton.next_power_of_2(N))
'''


@pytest.fixture(scope="module")
def specs():
    return {op.name: load_op(op).spec for op in sorted(OPS.iterdir()) if (op / "spec.toml").is_file()}


def rules(specs, body: str, op: str = "layernorm", dtypes=None, kernel: bool = True) -> set[str]:
    src = (KERNEL if kernel else HEAD) + textwrap.dedent(body)
    ast.parse(src)  # a test source that does not parse would have no hits for the wrong reason
    return {h.rule for h in check_source(src, specs[op], dtypes=dtypes)}


def launch_with(line: str, prelude: str = "") -> str:
    """A launch that runs the honest kernel and then `line` (indented into launch's body)."""
    return textwrap.dedent(prelude) + LAUNCH + "    " + "\n    ".join(textwrap.dedent(line).strip().splitlines()) + "\n"


# ---- honest code has no hits --------------------------------------------------------------------------------

def test_every_op_template_and_kernel_file_has_no_hits(specs):
    checked = 0
    for op, spec in specs.items():
        bundle = load_op(OPS / op)
        for name, src in bundle.template_sources.items():
            assert check_source(src, spec) == [], (op, name)
            checked += 1
        for path in sorted((OPS / op).glob("kernel*.py")):
            assert check_source(path.read_text(), spec) == [], path
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize("name", ["wrong_values", "incomplete", "mutates_input", "hangs", "oob_write", "raises"])
def test_wrong_but_not_cheating_fixtures_have_no_hits(specs, name):
    assert check_source((CANDIDATES / f"{name}.py").read_text(), specs["layernorm"]) == []


def test_segfault_fixture_is_excluded_because_ctypes_is_introspection(specs):
    # segfault.py kills its process through ctypes: reading raw memory is exactly what `introspection` forbids.
    hits = check_source((CANDIDATES / "segfault.py").read_text(), specs["layernorm"])
    assert {h.rule for h in hits} == {"introspection", "not-allowed"} and hits[0].rule == "introspection"


def test_unparsable_source_has_no_hits_the_worker_reports_it(specs):
    assert check_source((CANDIDATES / "syntax_error.py").read_text(), specs["layernorm"]) == []


def test_honest_kernel_with_usual_host_trimmings_has_no_hits(specs):
    body = '''
    import functools
    import math
    from typing import Optional

    _TL = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
    _LIMITS = {"max_n": 65536}


    @functools.lru_cache(maxsize=None)
    def _pick_block(n: int) -> int:
        return min(triton.next_power_of_2(n), 16384)


    def launch(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], y: torch.Tensor, *,
               eps: float, num_warps: int = 4, **config) -> None:
        assert x.is_contiguous() and y.is_contiguous(), "contiguous rows expected"
        assert x.dtype in (torch.float16, torch.bfloat16, torch.float32) and x.dtype == y.dtype
        x2 = x.view(-1, x.shape[-1])
        M, N = x2.shape
        if N > _LIMITS["max_n"] or x.numel() == 0 or x.dim() != 2:
            raise ValueError(f"unsupported shape {tuple(x.shape)}")
        aligned = x.data_ptr() % 16 == 0 and x2.stride(0) % 8 == 0
        sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
        names = "a,b".split(",")
        opts = dict(config)
        opts.update(BLOCK=_pick_block(N))
        grid = lambda meta: (triton.cdiv(M, 1),)
        _k[grid](x2, weight, bias, y, N, eps, BLOCK=opts["BLOCK"], num_warps=num_warps)


    if __name__ == "__main__":
        import time
        a = torch.randn(8, 256)
        out = torch.empty_like(a)
        t0 = time.perf_counter()
        launch(a, torch.ones(256), torch.zeros(256), out, eps=1e-5)
        print(time.perf_counter() - t0, (out - torch.nn.functional.layer_norm(a, (256,))).abs().max())
    '''
    assert rules(specs, body) == set()


# ---- the registry and the record ----------------------------------------------------------------------------

def test_registry_has_the_issue_rules_each_with_a_rationale():
    assert {"library-op", "torch-on-hot-path", "try-except", "new-stream", "thread-or-process", "monkey-patch",
            "file-or-env-access", "precision-downcast", "dynamic-code", "introspection", "global-state"} <= set(RULE_IDS)
    assert len(RULE_IDS) == len(RULES)
    for r in RULES:
        assert len(r.rationale) > 80 and "\n" not in r.rationale, r.id


def test_rules_keep_their_reporting_priority_whichever_family_module_registers_them():
    from kernelloop.core.verify.rules import PRIORITY
    assert RULE_IDS == PRIORITY == ("library-op", "output-aliasing", "new-stream", "thread-or-process",
                                    "timing-access", "monkey-patch", "introspection", "file-or-env-access",
                                    "dynamic-code", "precision-downcast", "global-state", "try-except",
                                    "disallowed-import", "torch-on-hot-path", "not-allowed")
    assert len({r.check.__module__ for r in RULES}) > 1   # the families live in modules of their own


def test_the_manifest_hashes_every_module_of_the_static_rules():
    import kernelloop.core.verify.rules as package
    from kernelloop.core.manifest import VERIFIER_FILES
    folder = Path(package.__file__).parent
    assert {f"verify/rules/{p.name}" for p in folder.glob("*.py")} <= set(VERIFIER_FILES)
    assert "verify/rules/__init__.py" in VERIFIER_FILES   # paths relative to src/kernelloop/core


def test_hit_carries_rule_line_col_snippet_rationale_and_round_trips(specs):
    src = HEAD + "\n\ndef launch(x, weight, bias, y, *, eps):\n    y.copy_(torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps))\n"
    hits = check_source(src, specs["layernorm"])
    first = hits[0]
    assert isinstance(first, StaticRuleHit)
    assert first.rule == "library-op" and first.line == 7 and first.col > 0
    assert first.snippet.startswith("y.copy_(torch.nn.functional.layer_norm")
    assert first.detail == "torch.nn.functional.layer_norm"
    assert first.message.startswith("library-op at line 7: ")
    assert StaticRuleHit.from_json(first.to_json()) == first
    assert [h.line for h in hits] == sorted(h.line for h in hits)


# ---- one test per rule: hits and look-alikes that must not hit -----------------------------------------------

@pytest.mark.parametrize("body", [
    "y.copy_(torch.nn.functional.layer_norm(x, (N,), weight, bias, eps))",
    "import torch.nn.functional as F\ny.copy_(F.layer_norm(x, (N,), weight, bias, eps))",
    "y.copy_(getattr(torch.nn.functional, 'layer_norm')(x, (N,), weight, bias, eps))",
    "y.copy_(torch.nn.LayerNorm(N)(x))",
    "y.copy_(torch.ops.aten.native_layer_norm(x, [N], weight, bias, eps)[0])",
    "y.copy_(torch.compile(lambda t: t)(x))",
])
def test_library_op_hits(specs, body):
    assert "library-op" in rules(specs, launch_with(body))


def test_library_op_through_imports_aliases_and_other_ops(specs):
    assert "library-op" in rules(specs, "from torch.nn.functional import layer_norm as ln\n" + LAUNCH)
    assert "library-op" in rules(specs, "F = torch.nn.functional\nln = F.layer_norm\n" + LAUNCH)
    assert "library-op" in rules(specs, "import liger_kernel\n" + LAUNCH)
    assert "library-op" in rules(specs, "def launch(x, y):\n    y.copy_(x.softmax(-1))\n", op="softmax",
                                 kernel=False)
    assert "library-op" in rules(specs, "def launch(x, w, y, *, eps):\n    y.copy_(torch.rms_norm(x, (4,), w, eps))\n",
                                 op="rmsnorm", kernel=False)


def test_library_op_quiet_on_own_functions_and_triton_ops(specs):
    assert rules(specs, "def layer_norm(a):\n    return a\n" + LAUNCH) == set()
    softmax_kernel = '''
    @triton.jit
    def _sm(X, Y, N, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < N, other=-float("inf"))
        tl.store(Y + cols, tl.softmax(x), mask=cols < N)


    def launch(x, y):
        _sm[(1,)](x, y, x.shape[-1], BLOCK=triton.next_power_of_2(x.shape[-1]))
    '''
    assert rules(specs, softmax_kernel, op="softmax", kernel=False) == set()


@pytest.mark.parametrize("body", [
    "y.copy_(x)", "tmp = torch.empty_like(y)", "s = x.sum()", "z = x @ weight", "y[:] = 0", "y += 1",
    "xf = x.float()", "xc = x.contiguous()", "t = x.clone()", "z = x * 2", "w2 = weight.to(x.device)",
    "y.fill_(0.0)", "v = x[0].item()", "flag = (x == 0).any()", "z = -x",
])
def test_torch_on_hot_path_hits(specs, body):
    assert "torch-on-hot-path" in rules(specs, launch_with(body))


def test_torch_on_hot_path_also_covers_helpers_module_level_and_kernels(specs):
    helper = '''
    def _finish(out, scale):
        return out * scale


    def launch(x, weight, bias, y, *, eps, **config):
        _finish(y, 2.0)
    '''
    assert "torch-on-hot-path" in rules(specs, helper)
    assert "torch-on-hot-path" in rules(specs, "_BUF = torch.zeros(16)\n" + LAUNCH)
    in_kernel = '''
    @triton.jit
    def _bad(X, N):
        torch.manual_seed(0)


    def launch(x, weight, bias, y, *, eps):
        _bad[(1,)](x, 1)
    '''
    assert "torch-on-hot-path" in rules(specs, in_kernel, kernel=False)


@pytest.mark.parametrize("body", [
    "s = x.stride(0) + y.stride(0)", "n = x.numel() * x.element_size()", "v = x.view(-1, N).reshape(M, N)",
    "ok = x.dtype == torch.float32 and isinstance(x, torch.Tensor)", "p = x.data_ptr() % 16",
    "d = {}\nd['a'] = 1\nvals = list(d.values())", "parts = 'a,b'.split(',')", "g = triton.cdiv(M, 4) * 4",
    "c = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)", "t = x.T.shape[0] - 1",
])
def test_torch_on_hot_path_quiet_on_metadata(specs, body):
    assert rules(specs, launch_with(body)) == set()


def test_try_except(specs):
    assert "try-except" in rules(specs, launch_with("try:\n    pass\nexcept Exception:\n    y.zero_()"))
    assert "try-except" in rules(specs, launch_with("try:\n    pass\nexcept:\n    pass"))
    assert rules(specs, launch_with("try:\n    pass\nfinally:\n    pass")) == set()


@pytest.mark.parametrize("body", [
    "s = torch.cuda.Stream()", "with torch.cuda.stream(torch.cuda.Stream()):\n    pass",
    "g = torch.cuda.CUDAGraph()", "torch.cuda.current_stream().wait_stream(None)",
])
def test_new_stream(specs, body):
    assert "new-stream" in rules(specs, launch_with(body))
    assert "new-stream" in rules(specs, "from torch.cuda import Stream\n" + LAUNCH)


def test_new_stream_quiet_on_device_context(specs):
    assert rules(specs, launch_with("with torch.cuda.device(x.device):\n    pass")) == set()


@pytest.mark.parametrize("prelude", [
    "import threading\n", "from concurrent.futures import ThreadPoolExecutor\n", "import multiprocessing as mp\n",
    "import subprocess\n", "import asyncio\n", "import torch.multiprocessing\n",
])
def test_thread_or_process(specs, prelude):
    assert "thread-or-process" in rules(specs, prelude + LAUNCH)


def test_thread_or_process_through_os(specs):
    found = rules(specs, launch_with("pid = os.fork()", "import os\n"))
    assert {"thread-or-process", "file-or-env-access"} <= found


@pytest.mark.parametrize("body", [
    "torch.cuda.Event.elapsed_time = lambda self, end: 0.0",
    "import time\ntime.perf_counter = lambda: 0.0",
    "import triton.testing\ntriton.testing.do_bench = lambda *a, **k: 0.001",
    "setattr(torch, 'layer_norm', None)",
    "torch.Tensor.copy_ = lambda self, src: self",
    "T = torch.cuda\nT.synchronize = lambda: None",
    "import unittest.mock",
    "__name__ = '__main__'",
])
def test_monkey_patch(specs, body):
    assert "monkey-patch" in rules(specs, launch_with(body))


def test_monkey_patch_quiet_on_local_objects(specs):
    body = '''
    class _Cfg:
        def __init__(self):
            self.block = 1


    def launch(x, weight, bias, y, *, eps):
        cfg = _Cfg()
        cfg.block = 4
        cfg.data = [M for M in x.shape]
    '''
    assert rules(specs, body) == set()


@pytest.mark.parametrize("body,prelude", [
    ("flag = os.environ.get('KERNELLOOP_BENCH')", "import os\n"),
    ("flag = getenv('X')", "from os import getenv\n"),
    ("data = open('/tmp/answer.bin', 'rb').read()", ""),
    ("p = pathlib.Path('/tmp').exists()", "import pathlib\n"),
    ("ref = torch.load('/tmp/ref.pt')", ""),
    ("n = len(sys.argv)", "import sys\n"),
])
def test_file_or_env_access(specs, body, prelude):
    assert "file-or-env-access" in rules(specs, launch_with(body, prelude))


@pytest.mark.parametrize("body,prelude", [
    ("t = x.to(tl.float16)", ""), ("t = tl.cast(x, tl.bfloat16)", ""), ("acc = tl.zeros([BLOCK], dtype=tl.float16)", ""),
    ("t = x.to(HALF)", "HALF = tl.float16\n"), ("c = tl.dot(x, x, allow_tf32=True)", ""),
    ("c = tl.dot(x, x, input_precision='tf32')", ""),
])
def test_precision_downcast_in_kernels(specs, body, prelude):
    src = prelude + textwrap.dedent(f'''
    @triton.jit
    def _p(X, Y, BLOCK: tl.constexpr):
        x = tl.load(X + tl.arange(0, BLOCK))
        {body}


    def launch(x, weight, bias, y, *, eps):
        _p[(1,)](x, y, BLOCK=16)
    ''')
    assert "precision-downcast" in rules(specs, src, kernel=False)


def test_precision_downcast_on_host_and_through_kernel_arguments(specs):
    assert "precision-downcast" in rules(specs, launch_with("xh = x.half()"))
    assert "precision-downcast" in rules(specs, launch_with("xh = x.to(torch.bfloat16)"))
    assert "precision-downcast" in rules(specs, launch_with("torch.backends.cuda.matmul.allow_tf32 = True"))
    assert "precision-downcast" in rules(specs, launch_with("_k[(1,)](x, weight, bias, y, N, eps, BLOCK=16, DT=tl.float16)"))
    jit_default = '''
    @triton.jit
    def _p(X, Y, DT: tl.constexpr = tl.float16):
        tl.store(Y, tl.load(X).to(DT))


    def launch(x, weight, bias, y, *, eps):
        _p[(1,)](x, y)
    '''
    assert "precision-downcast" in rules(specs, jit_default, kernel=False)


def test_precision_downcast_depends_on_the_dtypes_in_play(specs):
    body = '''
    @triton.jit
    def _p(X, Y):
        tl.store(Y, tl.load(X).to(tl.float16))


    @triton.jit
    def _q(X, Y):
        tl.store(Y, tl.load(X).to(tl.float8e4nv))


    def launch(x, weight, bias, y, *, eps):
        _p[(1,)](x, y)
    '''
    only_fp16 = check_source(HEAD + textwrap.dedent(body), specs["layernorm"], dtypes=["fp16"])
    assert ["float8e4nv" in h.snippet for h in only_fp16 if h.rule == "precision-downcast"] == [True]  # fp8 only
    assert len([h for h in check_source(HEAD + textwrap.dedent(body), specs["layernorm"])
                if h.rule == "precision-downcast"]) == 2


def test_precision_downcast_quiet_on_wide_or_integer_casts(specs):
    body = '''
    @triton.jit
    def _p(X, Y, N):
        i = tl.program_id(0).to(tl.int64)
        v = tl.load(X + i).to(tl.float32)
        tl.store(Y + i, v.to(Y.dtype.element_ty))


    def launch(x, weight, bias, y, *, eps):
        _p[(x.shape[0],)](x, y, x.shape[1])
    '''
    assert rules(specs, body, kernel=False) == set()


@pytest.mark.parametrize("body,prelude", [
    ("exec('y.zero_()')", ""), ("f = eval('lambda t: t')", ""), ("c = compile('1', 'x', 'eval')", ""),
    ("m = __import__('torch')", ""), ("m = importlib.import_module('torch')", "import importlib\n"),
    ("f = getattr(torch, 'lay' + 'er_norm')", ""), ("e = __builtins__['eval']", ""),
    ("from torch.utils.cpp_extension import load_inline", ""),
])
def test_dynamic_code(specs, body, prelude):
    assert "dynamic-code" in rules(specs, launch_with(body, prelude))


@pytest.mark.parametrize("body,prelude", [
    ("f = sys._getframe(1)", "import sys\n"), ("s = inspect.stack()", "import inspect\n"),
    ("objs = gc.get_objects()", "import gc\n"), ("p = ctypes.c_void_p(x.data_ptr())", "import ctypes\n"),
    ("g = globals()", ""), ("g = launch.__globals__", ""), ("st = y.untyped_storage()", ""),
    ("snap = torch.cuda.memory_snapshot()", ""),
])
def test_introspection(specs, body, prelude):
    assert "introspection" in rules(specs, launch_with(body, prelude))


@pytest.mark.parametrize("src", [
    "_n = 0\n" + LAUNCH + "    global _n\n    _n += 1\n",
    "_cache = {}\n" + LAUNCH + "    _cache[x.data_ptr()] = y\n",
    "_seen = []\n" + LAUNCH + "    _seen.append(x.shape)\n",
    LAUNCH.replace("**config", "_state={}, **config") + "    _state['n'] = 1\n",
    LAUNCH + "    launch.calls = getattr(launch, 'calls', 0) + 1\n",
    LAUNCH + "    key = id(x)\n",
    LAUNCH + "    x.cached = True\n",
    "_k.answers = {}\n" + LAUNCH,
])
def test_global_state(specs, src):
    assert "global-state" in rules(specs, src)


def test_global_state_in_closures_methods_and_caches(specs):
    closure = '''
    def _make():
        cache = {}

        def launch(x, weight, bias, y, *, eps):
            cache[x.data_ptr()] = 1
        return launch


    launch = _make()
    '''
    assert "global-state" in rules(specs, closure)
    method = '''
    class _Runner:
        def __init__(self):
            self.calls = 0

        def __call__(self, x, y):
            self.calls += 1


    _run = _Runner()


    def launch(x, weight, bias, y, *, eps):
        _run(x, y)
    '''
    assert "global-state" in rules(specs, method)
    cached_launch = "import functools\n\n\n@functools.lru_cache(maxsize=None)" + LAUNCH
    assert "global-state" in rules(specs, cached_launch)
    cached_tensor_helper = '''
    import functools


    @functools.cache
    def _stats(t):
        return t.shape


    def launch(x, weight, bias, y, *, eps):
        _stats(x)
    '''
    assert "global-state" in rules(specs, cached_tensor_helper)
    cached_kernel_launcher = '''
    from functools import lru_cache


    @lru_cache(None)
    def _go(M, N):
        _k[(M,)](None, None, None, None, N, 1e-5, BLOCK=16)
    ''' + LAUNCH
    assert "global-state" in rules(specs, cached_kernel_launcher)


def test_global_state_quiet_on_locals_constants_and_import_time_setup(specs):
    body = '''
    _CONFIGS = [1, 2]
    _CONFIGS.append(4)
    _TABLE = {"a": 1}


    def launch(x, weight, bias, y, *, eps):
        d = {}
        d["k"] = _TABLE["a"]
        rows = []
        rows.append(_CONFIGS[0])
    '''
    assert rules(specs, body) == set()


@pytest.mark.parametrize("body", [
    "y.set_(x)", "y.data = x", "y.resize_(0)", "torch.utils.swap_tensors(y, x)", "y.__class__ = type(x)",
])
def test_output_aliasing(specs, body):
    assert "output-aliasing" in rules(specs, launch_with(body))


def test_output_aliasing_tensor_subclasses(specs):
    sub = '''
    class Lazy(torch.Tensor):
        pass
    ''' + LAUNCH
    assert "output-aliasing" in rules(specs, sub)
    mode = '''
    class Mode:
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    ''' + LAUNCH
    assert "output-aliasing" in rules(specs, mode)


@pytest.mark.parametrize("body,prelude", [
    ("t = time.perf_counter()", "import time\n"), ("e = torch.cuda.Event(enable_timing=True)", ""),
    ("ms = triton.testing.do_bench(lambda: None)", "import triton.testing\n"),
    ("from timeit import default_timer", ""),
])
def test_timing_access(specs, body, prelude):
    assert "timing-access" in rules(specs, launch_with(body, prelude))


@pytest.mark.parametrize("prelude", [
    "import numpy as np\n", "import collections\n", "import random\n", "from . import helpers\n",
    "from torch import *\n",
])
def test_disallowed_import(specs, prelude):
    assert "disallowed-import" in rules(specs, prelude + LAUNCH)


def test_allowed_imports(specs):
    prelude = ("from __future__ import annotations\nimport math\nfrom typing import Optional\nimport functools\n"
               "from triton.language.extra import libdevice\n")
    assert rules(specs, prelude + LAUNCH) == set()
    # torch's library modules are no longer importable at all (the allow-list), not only their calls
    assert rules(specs, "import torch.nn.functional as F\n" + LAUNCH) == {"not-allowed"}


@pytest.mark.parametrize("src,rule", [
    ("import functools\n\n\ndef _impl(x, weight, bias, y, cache, *, eps):\n    cache[x.data_ptr()] = 1\n\n\n"
     "launch = functools.partial(_impl, cache={})\n", "global-state"),
    ("_C = {}\n\n\ndef launch(x, weight, bias, y, *, eps, _c=_C):\n    _c[1] = 2\n", "global-state"),
    ("def launch(x, weight, bias, y, *, eps):\n    f = y.copy_\n    f(x)\n", "torch-on-hot-path"),
    ("def launch(x, weight, bias, y, *, eps):\n    y.__setitem__(slice(None), x)\n", "torch-on-hot-path"),
    ("def launch(x, weight, bias, y, *, eps):\n    t = sum([x, x])\n", "torch-on-hot-path"),
    ("def launch(x, weight, bias, y, *, eps):\n    ts = [x, y]\n    z = ts[0] * 2\n", "torch-on-hot-path"),
    ("def launch(x, weight, bias, y, *, eps):\n    type(y).copy_(y, x)\n", "torch-on-hot-path"),
    ("def launch(x, weight, bias, y, *, eps):\n    f = vars(torch.nn.functional)['layer_norm']\n", "introspection"),
    ("def launch(x, weight, bias, y, *, eps):\n    f = torch.nn.functional.__dict__['layer_norm']\n", "introspection"),
    ("def launch(x, weight, bias, y, *, eps):\n    object.__setattr__(torch, 'x', 1)\n", "monkey-patch"),
    ("def launch(x, weight, bias, y, *, eps):\n    s = torch.nn.functional.__getattribute__('layer_norm')\n",
     "dynamic-code"),
    ("@triton.jit\ndef _k(A, Y):\n    p = (A + 0).to(tl.pointer_type(tl.float32))\n    tl.store(Y, tl.load(p))\n",
     "introspection"),
    ("import kernelloop.core.reference.truth\n", "disallowed-import"),
    ("@triton.jit\ndef _j(x, y):\n    y.copy_(x)\n\n\ndef launch(x, weight, bias, y, *, eps):\n    _j.fn(x, y)\n",
     "torch-on-hot-path"),
    ("@triton.jit\ndef _j(x, y):\n    y.copy_(x)\n\n\ndef launch(x, weight, bias, y, *, eps):\n    _j(x, y)\n",
     "torch-on-hot-path"),
])
def test_evasions_are_still_caught(specs, src, rule):
    assert rule in rules(specs, src, kernel=False)


def test_gluon_kernels_are_device_code(specs):
    """@gluon.jit functions (and gluon.constexpr_function helpers) are kernels: their arithmetic and casts are not
    torch on the hot path, but torch called inside one still is."""
    gluon = '''
    import torch
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl


    @gluon.constexpr_function
    def _layout(num_warps):
        return gl.BlockedLayout([1], [32], [num_warps], [0])


    @gluon.jit
    def _k(X, Y, N, BLOCK: gl.constexpr, num_warps: gl.constexpr):
        offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=_layout(num_warps))
        x = gl.load(X + offs, mask=offs < N, other=0.0).to(gl.float32)
        gl.store(Y + offs, (x * 2.0).to(Y.dtype.element_ty), mask=offs < N)


    def launch(x, weight, bias, y, *, eps, **config):
        _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, num_warps=4)
    '''
    assert rules(specs, gluon, kernel=False) == set()
    bad = gluon.replace("x = gl.load", "torch.manual_seed(0)\n        x = gl.load")
    assert "torch-on-hot-path" in rules(specs, bad, kernel=False)


def test_a_generator_seed_is_host_metadata(specs):
    """A launch may draw a one-off integer from a torch.Generator of its own (gemm's stream-K flag value): no tensor
    is computed. Drawing a tensor with that generator is still torch on the hot path."""
    src = '''
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _k(X, Y, N, token, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)


    def launch(x, weight, bias, y, *, eps, **config):
        token = (torch.Generator().seed() % 2 ** 60 | 1) + 2 ** 40
        _k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), token, BLOCK=1024)
    '''
    assert rules(specs, src, kernel=False) == set()
    bad = src.replace("token = (", "noise = torch.rand(4, generator=torch.Generator())\n        token = (")
    assert "torch-on-hot-path" in rules(specs, bad, kernel=False)
