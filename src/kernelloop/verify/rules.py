"""Static source rules: what a kernel candidate may not do, each with the attack it closes.

`check_source(source, spec)` parses a candidate with `ast` (it never imports or runs it) and returns one
`StaticRuleHit` per broken rule and line, first line first. Any hit makes the verdict REJECTED; the controller
runs this before the worker ever sees the source.

What a candidate is. A module that imports only `triton` (with `triton.language`), `math`, `typing`, `functools`
and `torch`; whose `@triton.jit` functions (or Gluon's `@gluon.jit`) do all the arithmetic; and whose host code
(`launch`, its helpers and the module-level statements) uses torch only for metadata -- shapes, strides, `numel`, dtype and device,
`data_ptr` for alignment, allocation-free views -- and triton only to launch (`cdiv`, `next_power_of_2`,
autotune configs). Everything else a candidate might do is either a rule below or unnecessary for a kernel.

How names are seen. Every name is resolved to a qualified name through `import`/`from ... import`/`as`,
plain assignments (`F = torch.nn.functional`, `ln = F.layer_norm`) and `getattr` with a literal attribute
name, so aliases do not hide a call; `getattr` with a computed name is itself `dynamic-code`. Which tensors a
host expression touches is inferred from `launch`'s positional parameters (the op's inputs and outputs)
through assignments and calls of the module's own helpers; a method that only tensors have (`copy_`, `float`,
`sum`, ...) is a hit on any receiver that is not a known module.

Decisions.
- `functools.lru_cache`/`functools.cache` are allowed only on pure compile-time helpers: not `launch`, never
  handed a tensor, launching no kernel and touching no torch. Anything else is `global-state`: a tensor hashes
  by identity, so a cache around tensor arguments is a result cache keyed by `id`.
- Allocations (`torch.empty`, `empty_like`, ...) count as torch on the hot path: a scratch buffer is also how
  freed memory still holding an answer is picked up, and the op's outputs are already allocated by the harness.
- `if __name__ == "__main__":` blocks are not analysed: the worker imports candidates under another module name,
  so they never run (rebinding `__name__` is itself a `monkey-patch` hit).
- A source that does not parse has no hits: importing it fails in the worker, which reports a COMPILE_ERROR
  with the log.
- Precision is judged against the dtypes the candidate will run on (`dtypes`, default: all the spec's): a cast
  to fp16 is a downcast whenever one of them is not fp16, bf16 likewise, fp8 always.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
import types
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import torch

from ..records import DType, OpSpec, StaticRuleHit

RuleHit = StaticRuleHit  # the name the issue uses; `records.RuleHit` is the Nsight Compute rule record

LIB = "library-op"
HOT = "torch-on-hot-path"
TRY = "try-except"
STREAM = "new-stream"
PROC = "thread-or-process"
MONKEY = "monkey-patch"
FILE = "file-or-env-access"
PREC = "precision-downcast"
DYN = "dynamic-code"
INTRO = "introspection"
GLOBAL = "global-state"
TIMING = "timing-access"
ALIAS = "output-aliasing"
IMPORT = "disallowed-import"


@dataclass(frozen=True)
class Rule:
    """One static rule: an id, the attack it closes, and a check yielding (node, what matched)."""

    id: str
    rationale: str
    check: Callable[["_Module"], Iterable[tuple[ast.AST, str]]]


RULES: list[Rule] = []  # in reporting priority: the more specific rule first


def rule(rule_id: str, rationale: str):
    def register(fn: Callable[["_Module"], Iterable[tuple[ast.AST, str]]]):
        RULES.append(Rule(rule_id, " ".join(rationale.split()), fn))
        return fn
    return register


# ---- name tables --------------------------------------------------------------------------------------------

ALLOWED_IMPORT_ROOTS = frozenset({"triton", "torch", "math", "typing", "typing_extensions", "functools",
                                  "__future__"})

# Qualified-name prefixes (component-wise; a trailing '*' matches the start of the last component) -> rule.
_NAME_RULES: dict[str, str] = {
    # threads and processes: work that outlives the call escapes the timer
    "threading": PROC, "_thread": PROC, "multiprocessing": PROC, "concurrent": PROC, "subprocess": PROC,
    "asyncio": PROC, "sched": PROC, "signal": PROC, "pty": PROC, "torch.multiprocessing": PROC,
    "torch.distributed": PROC, "os.system": PROC, "os.popen": PROC, "os.fork": PROC, "os.forkpty": PROC,
    "os.spawn*": PROC, "os.exec*": PROC, "os.posix_spawn*": PROC, "os.kill": PROC, "os.killpg": PROC,
    "os.register_at_fork": PROC,
    # files, environment, network
    "os": FILE, "pathlib": FILE, "io": FILE, "shutil": FILE, "tempfile": FILE, "glob": FILE, "fnmatch": FILE,
    "pickle": FILE, "shelve": FILE, "marshal": FILE, "dbm": FILE, "sqlite3": FILE, "mmap": FILE, "fcntl": FILE,
    "socket": FILE, "urllib": FILE, "http": FILE, "requests": FILE, "ssl": FILE, "zipfile": FILE,
    "tarfile": FILE, "torch.load": FILE, "torch.save": FILE, "torch.from_file": FILE, "torch.hub": FILE,
    "sys.argv": FILE, "sys.orig_argv": FILE, "sys.stdin": FILE, "__module__.__file__": FILE,
    # introspection of the process: frames, the heap, raw memory, the allocator
    "sys": INTRO, "inspect": INTRO, "gc": INTRO, "traceback": INTRO, "ctypes": INTRO, "cffi": INTRO,
    "tracemalloc": INTRO, "weakref": INTRO, "dis": INTRO, "faulthandler": INTRO, "torch._C": INTRO,
    "torch.cuda.memory": INTRO, "torch.cuda.memory_snapshot": INTRO, "torch.cuda.caching_allocator_alloc": INTRO,
    "torch.cuda.caching_allocator_delete": INTRO, "torch.UntypedStorage": INTRO, "torch.TypedStorage": INTRO,
    "torch.frombuffer": INTRO,
    "triton.language.pointer_type": INTRO, "triton.language.core.pointer_type": INTRO,  # forged pointers
    # code that cannot be read before it runs
    "importlib": DYN, "runpy": DYN, "code": DYN, "codeop": DYN, "types": DYN, "ast": DYN, "pkgutil": DYN,
    "zipimport": DYN, "torch.utils.cpp_extension": DYN, "__module__.__loader__": DYN, "__module__.__spec__": DYN,
    # the timer's own tools
    "time": TIMING, "timeit": TIMING, "triton.testing": TIMING, "torch.utils.benchmark": TIMING,
    "torch.cuda.Event": TIMING, "torch.Event": TIMING, "torch.profiler": TIMING, "torch.autograd.profiler": TIMING,
    "torch.cuda._sleep": TIMING,
    # patching frameworks and dispatch overrides
    "unittest": MONKEY, "torch.library": MONKEY, "torch.overrides": MONKEY, "torch.utils._python_dispatch": MONKEY,
    # streams and graphs
    "torch.cuda.Stream": STREAM, "torch.cuda.stream": STREAM, "torch.cuda.ExternalStream": STREAM,
    "torch.cuda.set_stream": STREAM, "torch.cuda.current_stream": STREAM, "torch.cuda.default_stream": STREAM,
    "torch.cuda.StreamContext": STREAM, "torch.cuda.streams": STREAM, "torch.Stream": STREAM,
    "torch.cuda.graph": STREAM, "torch.cuda.graphs": STREAM, "torch.cuda.CUDAGraph": STREAM,
    "torch.cuda.make_graphed_callables": STREAM,
    # other libraries and compilers: the baselines being beaten
    "torch.compile": LIB, "torch._dynamo": LIB, "torch._inductor": LIB, "torch.jit": LIB, "liger_kernel": LIB,
    "apex": LIB, "flash_attn": LIB, "xformers": LIB, "transformer_engine": LIB,
    # tensors that are not what they seem
    "torch.Tensor._make_subclass": ALIAS, "torch.Tensor.set_": ALIAS, "torch.utils.swap_tensors": ALIAS,
    # global precision switches (a downcast only where fp32 is in play; otherwise plain torch on the hot path)
    "torch.set_float32_matmul_precision": PREC, "torch.set_default_dtype": PREC,
    "torch.backends.cuda.matmul.allow_tf32": PREC, "torch.backends.cudnn.allow_tf32": PREC,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": PREC,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": PREC,
}
_EXACT = {tuple(k.split(".")): v for k, v in _NAME_RULES.items() if not k.endswith("*")}
_STEMS = {tuple(k[:-1].split(".")): v for k, v in _NAME_RULES.items() if k.endswith("*")}

_BUILTIN_RULES = {"exec": DYN, "eval": DYN, "compile": DYN, "__import__": DYN, "breakpoint": DYN,
                  "open": FILE, "input": FILE, "globals": INTRO, "locals": INTRO, "vars": INTRO,
                  "setattr": MONKEY, "delattr": MONKEY, "id": GLOBAL}
_BUILTIN_NAMES = frozenset(dir(builtins))
_MODULE_DUNDERS = frozenset({"__file__", "__loader__", "__spec__", "__name__", "__path__", "__cached__"})

# Library implementations of each op (any component of a torch-rooted name, or a tensor method).
_NORMS = {"layer_norm", "native_layer_norm", "LayerNorm", "rms_norm", "RMSNorm", "_fused_rms_norm",
          "fused_rms_norm", "fused_layer_norm", "group_norm", "native_group_norm", "GroupNorm", "instance_norm",
          "batch_norm", "native_batch_norm", "_native_batch_norm_legit"}
_LIBRARY_NAMES = {
    "layernorm": _NORMS,
    "rmsnorm": _NORMS | {"normalize"},
    "softmax": {"softmax", "_softmax", "log_softmax", "_log_softmax", "Softmax", "LogSoftmax", "softmin",
                "Softmin", "_safe_softmax", "scaled_dot_product_attention"},
}

_TORCH_METADATA = frozenset({
    "torch.Tensor", "torch.Size", "torch.dtype", "torch.device", "torch.finfo", "torch.iinfo", "torch.is_tensor",
    "torch.is_floating_point", "torch.get_default_dtype", "torch.no_grad", "torch.inference_mode",
    "torch.__version__", "torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.current_device",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
    "torch.cuda.device", "torch.cuda.synchronize",
    # a random-number generator object (e.g. a launch's one-off flag value from `torch.Generator().seed()`): it
    # computes no tensor; drawing tensors with it still goes through torch.rand* and friends
    "torch.Generator"})

# Tensor methods and attributes that only read metadata or make an allocation-free view.
_VIEW_METHODS = frozenset({"view", "view_as", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "t",
                           "transpose", "permute", "expand", "expand_as", "narrow", "select", "movedim", "detach",
                           "unbind", "chunk", "split"})
_META_METHODS = frozenset({"stride", "size", "numel", "nelement", "dim", "ndimension", "element_size",
                           "is_contiguous", "data_ptr", "get_device", "is_floating_point", "is_complex",
                           "storage_offset", "is_pinned", "is_shared"})
_META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "itemsize", "nbytes",
                         "requires_grad", "is_leaf", "names", "is_sparse", "is_quantized", "is_meta", "grad_fn",
                         "output_nr", "T", "mT", "H", "mH"})
_HARMLESS_DUNDERS = frozenset({"__init__", "__len__", "__repr__", "__str__", "__format__", "__sizeof__",
                                "__class__", "__dir__", "__doc__", "__module__", "__init_subclass__",
                                "__subclasshook__", "__new__", "__hash__"})
# Every tensor method and property, explicit dunder calls included (`y.__setitem__(...)`, `x.__matmul__(w)`).
_TENSOR_METHODS = frozenset(dir(torch.Tensor)) - _HARMLESS_DUNDERS
# Tensor methods that plain Python containers also have: a hit only when the receiver is known to be a tensor.
_AMBIGUOUS = _TENSOR_METHODS & frozenset(n for t in (dict, list, str, set, tuple, bytes, int, float) for n in dir(t))
_ALIAS_METHODS = frozenset({"set_", "resize_", "resize_as_", "as_strided_", "share_memory_", "_set_grad_enabled",
                            "swap_"})
_ALIAS_ATTRS = frozenset({"data", "grad", "_base", "__class__", "__dict__"})
_INTRO_METHODS = frozenset({"untyped_storage", "storage", "_typed_storage", "_cdata"})
_INTRO_ATTRS = frozenset({"f_back", "f_locals", "f_globals", "f_builtins", "f_code", "gi_frame", "cr_frame",
                          "ag_frame", "tb_frame", "tb_next", "__globals__", "__code__", "__closure__",
                          "__subclasses__", "__dict__", "__builtins__"})
_DYN_ATTRS = frozenset({"__getattribute__", "__import__"})
_MONKEY_ATTRS = frozenset({"__setattr__", "__delattr__"})
# Builtins that compute on a tensor argument (`sum(rows)`, `abs(x)`, `float(x[0, 0])`).
_COMPUTE_BUILTINS = frozenset({"sum", "max", "min", "abs", "pow", "round", "divmod", "float", "int", "bool",
                               "complex", "any", "all", "sorted"})
_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add",
                       "discard", "remove", "appendleft", "extendleft", "popleft", "move_to_end", "sort", "reverse",
                       "__setitem__", "__delitem__", "write"})
_NON_TENSOR_RESULTS = _META_METHODS | {"item", "tolist", "type", "equal", "is_set_to", "untyped_storage",
                                       "storage", "__len__", "numpy"}
_CACHES = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property"})
_JIT = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit",
                  "triton.runtime.autotuner.autotune", "triton.runtime.autotuner.heuristics",
                  # Gluon (Triton's tile-level language): its kernels and its compile-time helpers
                  "triton.experimental.gluon.jit", "triton.experimental.gluon._runtime.jit",
                  "triton.experimental.gluon.constexpr_function",
                  "triton.experimental.gluon._runtime.constexpr_function"})
_TF32_PRECISIONS = frozenset({"tf32", "tf32x3", "bf16", "bf16x3", "bf16x6"})

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_MISSING = object()


def _dtype_family(qual: str) -> str | None:
    """fp16/bf16/fp8 for a narrow floating dtype's qualified name (triton.language or torch), else None."""
    parts = qual.split(".")
    if parts[:2] == ["triton", "language"]:
        leaf = parts[-1]
        if leaf in ("float16", "fp16"):
            return "fp16"
        if leaf in ("bfloat16", "bf16"):
            return "bf16"
        return "fp8" if leaf.startswith(("float8", "fp8")) else None
    if parts[0] == "torch":
        leaf = parts[-1]
        if leaf in ("float16", "half", "HalfTensor"):
            return "fp16"
        if leaf in ("bfloat16", "BFloat16Tensor"):
            return "bf16"
        return "fp8" if leaf.startswith("float8") else None
    return None


def _torch_object(qual: str):
    """The object a torch-rooted name denotes, without triggering lazy imports; _MISSING when unknown."""
    parts = qual.split(".")
    obj = torch
    for i, p in enumerate(parts[1:], start=2):
        try:
            if isinstance(obj, types.ModuleType):
                nxt = vars(obj).get(p, _MISSING)
                if nxt is _MISSING:
                    nxt = sys.modules.get(".".join(parts[:i]), _MISSING)
            else:
                nxt = inspect.getattr_static(obj, p, _MISSING)
        except Exception:  # noqa: BLE001 - exotic descriptors: treat as unknown
            return _MISSING
        if nxt is _MISSING:
            return _MISSING
        obj = nxt
    return obj


def _is_main_guard(test: ast.AST) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    pair = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant) and b.value == "__main__"
               for a, b in (pair, pair[::-1]))


def _flat_targets(t: ast.AST) -> Iterator[ast.AST]:
    if isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _flat_targets(e)
    elif isinstance(t, ast.Starred):
        yield from _flat_targets(t.value)
    else:
        yield t


def _chain_root(e: ast.AST) -> ast.Name | None:
    """The Name at the bottom of an attribute/subscript/call chain (`a` of `a.b[c].d()`)."""
    while True:
        if isinstance(e, (ast.Attribute, ast.Subscript, ast.Starred)):
            e = e.value
        elif isinstance(e, ast.Call):
            e = e.func
        else:
            return e if isinstance(e, ast.Name) else None


def _param_names(f: ast.AST) -> list[str]:
    a = f.args
    names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    names += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return names


class _Module:
    """One parsed candidate: parents, scopes, jit functions, resolved names, inferred tensors."""

    def __init__(self, source: str, tree: ast.Module, spec: OpSpec, dtypes: Iterable[DType]):
        self.lines = source.splitlines()
        self.spec = spec
        self.dtypes = {DType(d) for d in dtypes}
        self.library_names = _LIBRARY_NAMES.get(spec.name, {spec.name})
        self.parent: dict[ast.AST, ast.AST | None] = {}
        self.scope: dict[ast.AST, ast.AST | None] = {}
        self.nodes: list[ast.AST] = []
        self._index(tree)
        self.by_scope: dict[ast.AST | None, list[ast.AST]] = {}
        for n in self.nodes:
            self.by_scope.setdefault(self.scope[n], []).append(n)
        self.funcs = [n for n in self.nodes if isinstance(n, _FUNCS)]
        self.aliases, self.bound = self._names()
        self.jit = self._jit_functions()
        self.locals = {f: self._locals(f) for f in self.funcs}
        self.module_funcs = {n.name: n for n in self.nodes
                             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and self.scope[n] is None}
        self.launchers = self._launchers()
        self.tensor_params, self.tensors = self._infer_tensors()
        self.name_hits = self._name_hits()

    # -- structure ------------------------------------------------------------------------------------------
    def _index(self, tree: ast.Module) -> None:
        stack: list[tuple[ast.AST, ast.AST | None, ast.AST | None]] = [(tree, None, None)]
        while stack:
            node, parent, scope = stack.pop()
            self.parent[node], self.scope[node] = parent, scope
            if node is not tree:
                self.nodes.append(node)
            if isinstance(node, ast.If) and _is_main_guard(node.test):
                children = [(c, scope) for c in [node.test, *node.orelse]]
            elif isinstance(node, _FUNCS):
                a = node.args
                outer = [*getattr(node, "decorator_list", []), *a.defaults, *(d for d in a.kw_defaults if d),
                         *([node.returns] if getattr(node, "returns", None) else [])]
                outer += [x.annotation for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                          if x is not None and x.annotation is not None]
                inner = [x for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x is not None]
                body = node.body if isinstance(node.body, list) else [node.body]
                children = [(c, scope) for c in outer] + [(c, node) for c in [*inner, *body]]
            elif isinstance(node, ast.arg):
                children = []
            else:
                children = [(c, scope) for c in ast.iter_child_nodes(node)]
            for c, s in reversed(children):
                stack.append((c, node, s))

    def enclosing(self, scope: ast.AST | None) -> Iterator[ast.AST | None]:
        while scope is not None:
            yield scope
            scope = self.scope[scope]
        yield None

    def in_jit(self, node: ast.AST) -> bool:
        """Whether a node is (inside) a @triton.jit function."""
        return node in self.jit or any(s in self.jit for s in self.enclosing(self.scope.get(node)))

    # -- names ----------------------------------------------------------------------------------------------
    def _names(self) -> tuple[dict[str, str], set[str]]:
        aliases: dict[str, str] = {}
        bound: set[str] = set()
        assigns: list[tuple[str, ast.AST]] = []
        assigned: set[str] = set()
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom):
                for a in n.names:
                    if a.name == "*":
                        continue
                    if n.level or not n.module:
                        bound.add(a.asname or a.name)
                    else:
                        aliases[a.asname or a.name] = f"{n.module}.{a.name}"
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                bound.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if n.value is None:
                    continue
                for t in targets:
                    if isinstance(t, ast.Name):
                        assigns.append((t.id, n.value))
                        assigned.add(t.id)
                    elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(n.value, (ast.Tuple, ast.List)) \
                            and len(t.elts) == len(n.value.elts):
                        for te, ve in zip(t.elts, n.value.elts):
                            if isinstance(te, ast.Name):
                                assigns.append((te.id, ve))
                                assigned.add(te.id)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bound.add(n.id)
            elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                bound.add(n.name)
        bound -= assigned  # decided below, from what they are assigned
        self.aliases, self.bound = aliases, bound
        for _ in range(3):
            for name, value in assigns:
                q = self.resolve(value)
                if q is not None and name not in aliases:
                    aliases[name] = q
        for name, _value in assigns:
            if name not in aliases:
                bound.add(name)
        return aliases, bound

    def resolve(self, e: ast.AST) -> str | None:
        """Qualified name an expression denotes ('torch.nn.functional.layer_norm'), or None."""
        if isinstance(e, ast.Name):
            if e.id in self.aliases:
                return self.aliases[e.id]
            if e.id in self.bound:
                return None
            if e.id == "__builtins__":
                return "builtins"
            if e.id in _MODULE_DUNDERS:
                return "__module__." + e.id
            return "builtins." + e.id if e.id in _BUILTIN_NAMES else None
        if isinstance(e, ast.Attribute):
            base = self.resolve(e.value)
            return f"{base}.{e.attr}" if base else None
        if self.is_const_getattr(e):
            base = self.resolve(e.args[0])
            return f"{base}.{e.args[1].value}" if base else None
        return None

    def is_const_getattr(self, e: ast.AST) -> bool:
        return (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and self.resolve(e.func) == "builtins.getattr"
                and len(e.args) >= 2 and isinstance(e.args[1], ast.Constant) and isinstance(e.args[1].value, str))

    def chain_inner(self, node: ast.AST) -> bool:
        p = self.parent.get(node)
        return (isinstance(p, ast.Attribute) and p.value is node) or \
            (self.is_const_getattr(p) and p.args[0] is node)

    def receiver_method(self, call: ast.Call) -> tuple[ast.AST, str] | None:
        f = call.func
        if isinstance(f, ast.Attribute):
            return f.value, f.attr
        if self.is_const_getattr(f):
            return f.args[0], f.args[1].value
        return None

    def classify(self, qual: str, *, importing: bool = False) -> str | None:
        parts = tuple(qual.split("."))
        if parts[0] == "builtins":
            return DYN if len(parts) == 1 else _BUILTIN_RULES.get(parts[1])
        found = None
        for i in range(len(parts), 0, -1):
            found = _EXACT.get(parts[:i])
            if found is None:
                found = next((r for stem, r in _STEMS.items()
                              if len(stem) == i and parts[:i - 1] == stem[:-1] and parts[i - 1].startswith(stem[-1])),
                             None)
            if found:
                break
        if found == PREC and DType.fp32 not in self.dtypes:
            found = HOT
        if found:
            return found
        if parts[0] == "torch" and self.library_names & set(parts[1:]):
            return LIB
        if parts[0] != "torch" or importing:
            return None
        if qual in _TORCH_METADATA or parts[:2] == ("torch", "version"):
            return None
        obj = _torch_object(qual)
        if isinstance(obj, (types.ModuleType, torch.dtype)):
            return None
        return HOT

    def _name_hits(self) -> list[tuple[str, ast.AST, str]]:
        hits = []
        for n in self.nodes:
            if isinstance(n, (ast.Name, ast.Attribute)) or self.is_const_getattr(n):
                if self.chain_inner(n) or (isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)):
                    continue
                q = self.resolve(n)
                r = self.classify(q) if q else None
                if r:
                    hits.append((r, n, q))
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                if isinstance(n, ast.ImportFrom) and (n.level or not n.module):
                    hits.append((IMPORT, n, "relative import"))
                    continue
                quals = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                    [n.module] + [f"{n.module}.{a.name}" for a in n.names if a.name != "*"]
                if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
                    hits.append((IMPORT, n, f"from {n.module} import * (names cannot be resolved)"))
                rules = [(self.classify(q, importing=True), q) for q in quals]
                specific = [(r, q) for r, q in rules if r]
                if specific:
                    hits.extend((r, n, q) for r, q in specific)
                elif quals[0].split(".")[0] not in ALLOWED_IMPORT_ROOTS:
                    hits.append((IMPORT, n, quals[0]))
        return hits

    # -- functions ------------------------------------------------------------------------------------------
    def _jit_functions(self) -> set[ast.AST]:
        jit = set()
        for f in self.funcs:
            for d in getattr(f, "decorator_list", []):
                if self.resolve(d.func if isinstance(d, ast.Call) else d) in _JIT:
                    jit.add(f)
        by_name = {f.name: f for f in self.funcs if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for n in self.nodes:  # k = triton.jit(fn)
            if isinstance(n, ast.Call) and self.resolve(n.func) in _JIT:
                for a in n.args:
                    if isinstance(a, ast.Name) and a.id in by_name:
                        jit.add(by_name[a.id])
        return jit

    def _locals(self, f: ast.AST) -> set[str]:
        names = set(_param_names(f))
        declared: set[str] = set()
        for n in self.by_scope.get(f, []):
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                names.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(n.name)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name.split(".")[0]) for a in n.names)
            elif isinstance(n, ast.ExceptHandler) and n.name:
                names.add(n.name)
            elif isinstance(n, (ast.Global, ast.Nonlocal)):
                declared.update(n.names)
        return names - declared

    def _launchers(self) -> set[ast.AST]:
        out = set()
        for n in self.nodes:
            if self.scope[n] is not None:
                continue
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "launch":
                out.add(n)
            elif isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "launch" for t in n.targets):
                if isinstance(n.value, ast.Lambda):
                    out.add(n.value)
                elif isinstance(n.value, ast.Name) and n.value.id in self.module_funcs:
                    out.add(self.module_funcs[n.value.id])
        return out

    def visible(self, scope: ast.AST | None, tensors: dict | None = None) -> set[str]:
        tensors = self.tensors if tensors is None else tensors
        out: set[str] = set()
        for s in self.enclosing(scope):
            out |= tensors.get(s, set())
        return out

    def _workspace_lookup(self, e: ast.AST) -> bool:
        """`config["scratch"]`, `config.get("scratch")` or `.pop` on a launcher's **kwargs: the harness's workspace."""
        kw = {f.args.kwarg.arg for f in self.launchers if f.args.kwarg}
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name) and e.value.id in kw:
            return isinstance(e.slice, ast.Constant) and e.slice.value == "scratch"
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in ("get", "pop") \
                and isinstance(e.func.value, ast.Name) and e.func.value.id in kw:
            return bool(e.args) and isinstance(e.args[0], ast.Constant) and e.args[0].value == "scratch"
        return False

    def is_tensor(self, e: ast.AST, names: set[str]) -> bool:
        """Whether a host expression evaluates to a tensor (inferred; metadata and shapes are not tensors)."""
        if self._workspace_lookup(e):
            return True
        if isinstance(e, ast.Name):
            return e.id in names
        if isinstance(e, (ast.Starred, ast.Subscript, ast.NamedExpr)):
            return self.is_tensor(e.value, names)
        if isinstance(e, ast.Attribute):
            return self.resolve(e) is None and e.attr not in _META_ATTRS and self.is_tensor(e.value, names)
        if isinstance(e, ast.Call):
            q = self.resolve(e.func)
            if q is not None:
                return q.startswith("torch.") and self.classify(q) in (HOT, LIB, PREC, ALIAS)
            rm = self.receiver_method(e)
            return bool(rm) and rm[1] not in _NON_TENSOR_RESULTS and self.is_tensor(rm[0], names)
        if isinstance(e, ast.BinOp):
            return self.is_tensor(e.left, names) or self.is_tensor(e.right, names)
        if isinstance(e, ast.UnaryOp):
            return self.is_tensor(e.operand, names)
        if isinstance(e, ast.IfExp):
            return self.is_tensor(e.body, names) or self.is_tensor(e.orelse, names)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):  # a container of tensors: its items are tensors
            return any(self.is_tensor(x, names) for x in e.elts)
        if isinstance(e, ast.Dict):
            return any(self.is_tensor(x, names) for x in e.values)
        return False

    def _bind(self, target: ast.AST, value: ast.AST | None, names: set[str], out: set[str], whole: bool) -> None:
        if isinstance(target, ast.Name):
            if whole or (value is not None and self.is_tensor(value, names)):
                out.add(target.id)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value, names, out, whole)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._bind(t, v, names, out, whole)
            else:
                tensor = whole or (value is not None and self.is_tensor(value, names))
                for t in target.elts:
                    self._bind(t, None, names, out, tensor)

    def _infer_tensors(self) -> tuple[dict, dict]:
        host = [f for f in self.funcs if not self.in_jit(f)]
        params: dict = {f: set() for f in host}
        for f in self.launchers:
            a = f.args
            # the op's tensors come positionally; the harness's workspace comes as the keyword `scratch`
            params[f] = {x.arg for x in [*a.posonlyargs, *a.args]} | ({a.vararg.arg} if a.vararg else set()) \
                | {x.arg for x in a.kwonlyargs if x.arg == "scratch"}
        tensors: dict = {}
        for _ in range(4):
            tensors = {s: set(params.get(s, ())) for s in [None, *host]}
            for _ in range(2):
                for n in self.nodes:
                    s = self.scope[n]
                    if s is not None and s not in tensors:
                        continue
                    names = self.visible(s, tensors)
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            self._bind(t, n.value, names, tensors[s], False)
                    elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) and n.value is not None:
                        self._bind(n.target, n.value, names, tensors[s], False)
                    elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
                        self._bind(n.target, None, names, tensors[s], self.is_tensor(n.iter, names))
                    elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                        self._bind(n.optional_vars, n.context_expr, names, tensors[s], False)
            changed = False
            for n in self.nodes:
                if not (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in self.module_funcs):
                    continue
                s = self.scope[n]
                if s is not None and s not in tensors:
                    continue
                callee = self.module_funcs[n.func.id]
                if callee not in params:
                    continue
                names = self.visible(s, tensors)
                pos = [x.arg for x in [*callee.args.posonlyargs, *callee.args.args]]
                for i, arg in enumerate(n.args):
                    if self.is_tensor(arg, names):
                        name = pos[i] if i < len(pos) and not isinstance(arg, ast.Starred) else \
                            (callee.args.vararg.arg if callee.args.vararg else None)
                        if name and name not in params[callee]:
                            params[callee].add(name)
                            changed = True
                for kw in n.keywords:
                    if kw.arg and self.is_tensor(kw.value, names) and kw.arg not in params[callee]:
                        params[callee].add(kw.arg)
                        changed = True
            if not changed:
                break
        return params, tensors

    def narrow(self, e: ast.AST | None) -> str | None:
        """The narrow floating dtype named inside an expression, if it is below a dtype the candidate runs on."""
        if e is None:
            return None
        for sub in ast.walk(e):
            if isinstance(sub, (ast.Name, ast.Attribute)):
                q = self.resolve(sub)
                fam = _dtype_family(q) if q else None
                if fam and self.below(fam):
                    return q
        return None

    def below(self, family: str) -> bool:
        """Whether a value cast to this narrow family loses precision for some dtype the candidate runs on."""
        return family == "fp8" or any(d.value != family for d in self.dtypes)

    def host_attrs(self) -> Iterator[tuple[ast.AST, ast.AST, str]]:
        """(node, receiver, attribute) for every attribute read on an unresolved receiver in host code.

        Attribute reads, not only calls: `f = y.copy_; f(x)` is the same as `y.copy_(x)`."""
        for n in self.nodes:
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load):
                recv, attr = n.value, n.attr
            elif self.is_const_getattr(n):
                recv, attr = n.args[0], n.args[1].value
            else:
                continue
            if isinstance(recv, ast.Constant) or self.resolve(recv) is not None or self.in_jit(n):
                continue
            yield n, recv, attr

    def host_calls(self) -> Iterator[ast.Call]:
        for n in self.nodes:
            if isinstance(n, ast.Call) and not self.in_jit(n):
                yield n

    def store_targets(self) -> Iterator[tuple[ast.AST, ast.AST]]:
        """(statement, target) for every assignment, augmented assignment and deletion target."""
        for n in self.nodes:
            if isinstance(n, ast.Assign):
                targets = n.targets
            elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
                targets = [n.target]
            elif isinstance(n, ast.Delete):
                targets = n.targets
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                targets = [n.target]
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                targets = [n.optional_vars]
            else:
                continue
            for t in targets:
                for flat in _flat_targets(t):
                    yield n, flat

    def hits_for(self, rule_id: str) -> Iterator[tuple[ast.AST, str]]:
        for r, node, qual in self.name_hits:
            if r == rule_id:
                yield node, qual


# ---- the rules, most specific first --------------------------------------------------------------------------

@rule(LIB, """The candidate calls the library implementation of the op it is meant to replace (torch's
    layer_norm/rms_norm/softmax under any alias, torch.compile, Liger-Kernel, apex, ...). It would pass
    verification by being the baseline and then claim the baseline's speed, or a faster library's, as its own.""")
def _library_op(m: _Module):
    yield from m.hits_for(LIB)
    for node, _recv, attr in m.host_attrs():
        if attr in m.library_names:
            yield node, f".{attr}"


@rule(ALIAS, """The output must be the buffer the harness allocated, filled by the kernel. Rebinding its storage
    (set_, resize_, .data =), changing its class, or subclassing torch.Tensor with __torch_function__ or
    __torch_dispatch__ makes the result aliased or lazy: it is computed when the harness reads it, outside the
    timed call, or it is simply another tensor's memory.""")
def _output_aliasing(m: _Module):
    yield from m.hits_for(ALIAS)
    for n in m.nodes:
        if isinstance(n, ast.ClassDef):
            for b in n.bases:
                if m.resolve(b) in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"):
                    yield n, f"class {n.name} subclasses torch.Tensor"
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ("__torch_function__",
                                                                                   "__torch_dispatch__"):
            yield n, f"defines {n.name}"
    for node, _recv, attr in m.host_attrs():
        if attr in _ALIAS_METHODS:
            yield node, f".{attr}"
    for _stmt, t in m.store_targets():
        if not isinstance(t, ast.Attribute):
            continue
        root = _chain_root(t)
        if root is None or m.resolve(root) is not None:
            continue  # stores into modules are monkey-patching
        dunder = t.attr.startswith("__") and t.attr.endswith("__")
        if dunder or (t.attr in _ALIAS_ATTRS and m.is_tensor(t.value, m.visible(m.scope[t]))):
            yield t, f"assigns .{t.attr}"


@rule(STREAM, """Kernels must run on the caller's current stream. Work launched on a new or side stream, or
    replayed from a CUDA graph, is not ordered with the timer's events: the timed region closes before the work
    is done, so the kernel looks free.""")
def _new_stream(m: _Module):
    yield from m.hits_for(STREAM)


@rule(PROC, """Threads, processes and asynchronous tasks run work outside the call: launch returns before the
    result exists, escaping the timer, and a second process can also reach files, devices or the controller.""")
def _thread_or_process(m: _Module):
    yield from m.hits_for(PROC)


@rule(TIMING, """Timing belongs to the controller. A candidate that reads clocks or creates timing events can
    detect that it is being benchmarked (rapid repeated calls) and behave differently, and the same modules are
    what a patched timer is built from.""")
def _timing_access(m: _Module):
    yield from m.hits_for(TIMING)


@rule(MONKEY, """Assigning attributes of imported modules or classes (torch, triton, time, CUDA events,
    builtins), setattr/delattr, patching frameworks and dispatch overrides change the harness's own code in the
    worker process: a patched timer reports any time it likes, a patched torch function changes the reference or
    the checks.""")
def _monkey_patch(m: _Module):
    yield from m.hits_for(MONKEY)
    for _stmt, t in m.store_targets():
        if isinstance(t, (ast.Attribute, ast.Subscript)):
            root = _chain_root(t)
            q = m.resolve(root) if root is not None else None
            if q is not None:
                where = m.resolve(t) if isinstance(t, ast.Attribute) else m.resolve(t.value)
                yield t, f"assigns {where or q}" + ("[...]" if isinstance(t, ast.Subscript) else "")
        elif isinstance(t, ast.Name) and t.id in _MODULE_DUNDERS | {"__builtins__"}:
            yield t, f"rebinds {t.id}"
    for n in m.nodes:
        if isinstance(n, ast.Attribute) and n.attr in _MONKEY_ATTRS:
            yield n, f".{n.attr}"


@rule(INTRO, """Reading the process instead of the inputs: stack frames (sys._getframe, inspect), the heap
    (gc.get_objects), raw memory (ctypes, storages) or the allocator can find the expected answer or the
    harness's buffers and copy them instead of computing.""")
def _introspection(m: _Module):
    yield from m.hits_for(INTRO)
    for n in m.nodes:
        if isinstance(n, ast.Attribute) and n.attr in _INTRO_ATTRS:
            yield n, f".{n.attr}"
    for node, _recv, attr in m.host_attrs():
        if attr in _INTRO_METHODS:
            yield node, f".{attr}"


@rule(FILE, """A kernel needs nothing outside its arguments. Files, the environment, argv and the network can
    reveal the job directory, earlier outputs, the reference or a benchmark-mode flag, and let behaviour depend on
    where it runs rather than on the inputs.""")
def _file_or_env(m: _Module):
    yield from m.hits_for(FILE)


@rule(DYN, """Code built at run time (exec, eval, compile, __import__, importlib, getattr with a computed name,
    inline C++ extensions) cannot be checked by these rules before it runs, so it is refused outright.""")
def _dynamic_code(m: _Module):
    yield from m.hits_for(DYN)
    for n in m.nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and m.resolve(n.func) == "builtins.getattr" \
                and not m.is_const_getattr(n):
            yield n, "getattr with a computed attribute name"
        elif isinstance(n, ast.Attribute) and n.attr in _DYN_ATTRS:
            yield n, f".{n.attr}"


@rule(PREC, """Computing below the precision of the op's dtype (casts to fp16/bf16/fp8 when the op runs in a
    wider type, TF32 matmuls for fp32) buys speed with accuracy the spec did not give away; with loose tolerances
    or benign inputs it can pass the checks and then be wrong on real data.""")
def _precision_downcast(m: _Module):
    yield from m.hits_for(PREC)
    fp32 = DType.fp32 in m.dtypes
    for n in m.nodes:
        if isinstance(n, _FUNCS) and n in m.jit:
            for d in [*n.args.defaults, *(d for d in n.args.kw_defaults if d)]:
                q = m.narrow(d)
                if q:
                    yield d, f"kernel parameter defaults to {q}"
        if not isinstance(n, ast.Call):
            continue
        rm = m.receiver_method(n)
        meth = rm[1] if rm and m.resolve(n.func) is None else None
        kws = {k.arg: k.value for k in n.keywords if k.arg}
        candidates: list[ast.AST] = [kws[k] for k in ("dtype", "out_dtype") if k in kws]
        if meth in ("to", "type"):
            candidates += n.args[:1]
        if m.resolve(n.func) in ("triton.language.cast", "triton.language.core.cast"):
            candidates += n.args[1:2]
        if isinstance(n.func, ast.Subscript):  # a kernel launch k[grid](...)
            candidates += [*n.args, *kws.values()]
        for c in candidates:
            q = m.narrow(c)
            if q:
                yield n, f"casts to {q}"
                break
        else:
            if meth in ("half", "bfloat16") and not m.in_jit(n) and \
                    m.below("fp16" if meth == "half" else "bf16"):
                yield n, f".{meth}()"
            elif fp32 and (isinstance(kws.get("allow_tf32"), ast.Constant) and kws["allow_tf32"].value is True
                           or isinstance(kws.get("input_precision"), ast.Constant)
                           and kws["input_precision"].value in _TF32_PRECISIONS):
                yield n, "reduced-precision (TF32/bf16) dot for an fp32 op"


@rule(GLOBAL, """State that survives the call (global/nonlocal, module-level containers or objects mutated by a
    function, mutable default arguments, attributes stored on functions or tensors, identity keys, caches around
    tensor arguments) is how results get cached across timed calls (by pointer, id or content) and how behaviour
    changes after N calls; a kernel call must be a pure function of its arguments.""")
def _global_state(m: _Module):
    yield from m.hits_for(GLOBAL)
    for n in m.nodes:
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            yield n, f"{type(n).__name__.lower()} {', '.join(n.names)}"
        elif isinstance(n, _FUNCS):
            for d in [*n.args.defaults, *(d for d in n.args.kw_defaults if d)]:
                if _mutable_literal(m, d):
                    yield d, "mutable default argument"
            for d in getattr(n, "decorator_list", []):
                q = m.resolve(d.func if isinstance(d, ast.Call) else d)
                if q in _CACHES and _impure_cache(m, n, q):
                    yield d, f"{q} around {n.name}"
        elif isinstance(n, ast.Call) and m.resolve(n.func) in _CACHES and n.args:
            target = n.args[0]
            f = m.module_funcs.get(target.id) if isinstance(target, ast.Name) else None
            if f is None or _impure_cache(m, f, m.resolve(n.func)):
                yield n, f"{m.resolve(n.func)} applied at run time"
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Call) and m.resolve(n.func.func) in _CACHES and n.args:
            target = n.args[0]
            f = m.module_funcs.get(target.id) if isinstance(target, ast.Name) else None
            if f is None or _impure_cache(m, f, m.resolve(n.func.func)):
                yield n, f"{m.resolve(n.func.func)} applied at run time"
    for _stmt, t in m.store_targets():
        if not isinstance(t, (ast.Subscript, ast.Attribute)):
            continue
        root = _chain_root(t)
        if root is None or m.resolve(root) is not None:
            continue
        scope = m.scope[t]
        if scope is None:
            if isinstance(t, ast.Attribute):
                yield t, f"module-level state stored on {root.id}.{t.attr}"
            continue
        if root.id not in m.locals.get(scope, set()) or root.id in _defaulted_params(scope):
            yield t, f"stores into {root.id!r}, which outlives the call"
        elif _mutates_self(m, scope, root):
            yield t, "stores state on self outside __init__"
        elif isinstance(t, ast.Attribute) and t.attr not in _ALIAS_ATTRS and not t.attr.startswith("__") and \
                m.is_tensor(t.value, m.visible(scope)):
            yield t, f"stores .{t.attr} on a tensor"
    for node, recv, attr in m.host_attrs():
        scope = m.scope[node]
        root = _chain_root(recv)
        if scope is None or root is None or m.resolve(root) is not None:
            continue
        mutating = attr in _MUTATORS or (attr.endswith("_") and not attr.startswith("_"))
        if mutating and (root.id not in m.locals.get(scope, set()) or _mutates_self(m, scope, root)
                         or root.id in _defaulted_params(scope)):
            yield node, f"{root.id}.{attr} mutates state that outlives the call"
    for n in m.nodes:
        if isinstance(n, ast.Call) and m.resolve(n.func) == "functools.partial":
            for a in [*n.args[1:], *(k.value for k in n.keywords)]:
                if _mutable_literal(m, a):
                    yield a, "functools.partial binds a mutable container that outlives the call"


def _mutable_literal(m: _Module, e: ast.AST) -> bool:
    return isinstance(e, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)) or \
        (isinstance(e, ast.Call) and m.resolve(e.func) in ("builtins.dict", "builtins.list", "builtins.set",
                                                           "builtins.bytearray"))


def _defaulted_params(f: ast.AST) -> set[str]:
    """Parameters with a default value: the default object is shared by every call."""
    a = f.args
    pos = [*a.posonlyargs, *a.args]
    names = {x.arg for x in pos[len(pos) - len(a.defaults):]} if a.defaults else set()
    return names | {x.arg for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None}


def _mutates_self(m: _Module, scope: ast.AST, root: ast.Name) -> bool:
    """`self.x = ...` in a method other than a constructor: instance state that survives calls."""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(m.parent.get(scope),
                                                                                       ast.ClassDef):
        return False
    params = _param_names(scope)
    return bool(params) and root.id == params[0] and scope.name not in ("__init__", "__post_init__", "__new__")


def _impure_cache(m: _Module, f: ast.AST, qual: str) -> bool:
    """A cache decorator is allowed only on a pure compile-time helper (see the module docstring)."""
    if qual == "functools.cached_property" or f in m.launchers or m.tensor_params.get(f):
        return True
    for n in m.nodes:
        if not any(s is f for s in m.enclosing(m.scope.get(n))):
            continue
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript):
            return True  # launches a kernel
        if isinstance(n, (ast.Name, ast.Attribute)) and not m.chain_inner(n):
            q = m.resolve(n)
            if q and q.split(".")[0] == "torch":
                return True
    return False


@rule(TRY, """A try/except around the kernel turns its failures into a silent fallback (usually the library op),
    so the verifier never sees the kernel fail and the timer may time the fallback. A kernel that fails must
    fail visibly.""")
def _try_except(m: _Module):
    for n in m.nodes:
        if isinstance(n, (ast.Try, getattr(ast, "TryStar", ast.Try))) and n.handlers:
            h = n.handlers[0]
            yield h, "except " + (ast.unparse(h.type) if h.type is not None else "(bare)")


@rule(IMPORT, """Only triton, triton.language, math, typing, functools and torch (for metadata) may be imported;
    anything else (numpy, collections, itertools, random, star or relative imports, ...) is not needed by a
    kernel and cannot be reviewed by these rules.""")
def _disallowed_import(m: _Module):
    yield from m.hits_for(IMPORT)


@rule(HOT, """The candidate must be a kernel. Host code may use torch only for metadata (shape, stride, numel,
    dtype, device, data_ptr) and allocation-free views; torch compute, allocation, copies, casts or tensor
    arithmetic there (or in a kernel body) means the result comes from torch, not from the kernel being judged,
    and scratch allocations can pick up freed memory that still holds an answer.""")
def _torch_on_hot_path(m: _Module):
    yield from m.hits_for(HOT)
    for node, recv, attr in m.host_attrs():
        if attr not in _TENSOR_METHODS or attr in _META_METHODS or attr in _VIEW_METHODS or attr in _META_ATTRS \
                or (attr.startswith("is_") and attr not in _AMBIGUOUS):
            continue
        call = m.parent.get(node)
        if attr == "type" and not (isinstance(call, ast.Call) and call.func is node and (call.args or call.keywords)):
            continue  # x.type() names the type; x.type(T) converts
        if attr not in _AMBIGUOUS or m.is_tensor(recv, m.visible(m.scope[node])):
            yield node, f".{attr}"
    jit_names = {f.name for f in m.jit if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for n in m.nodes:  # a kernel body run as plain Python on the host (`k(x, y)`, `k.fn(x, y)`) is no kernel
        if not (isinstance(n, ast.Name) and n.id in jit_names and isinstance(n.ctx, ast.Load)) or m.in_jit(n):
            continue
        p = m.parent.get(n)
        if isinstance(p, ast.Call) and p.func is n:
            yield n, f"calls the kernel {n.id} directly, not through a launch grid"
        elif isinstance(p, ast.Attribute) and p.attr in ("fn", "__wrapped__", "__call__", "__code__"):
            yield n, f"{n.id}.{p.attr}: the kernel's Python body"
    for call in m.host_calls():
        q = m.resolve(call.func)
        if q and q.startswith("builtins.") and q.split(".")[1] in _COMPUTE_BUILTINS:
            names = m.visible(m.scope[call])
            if any(m.is_tensor(a, names) for a in call.args):
                yield call, f"{q.split('.')[1]}() of a tensor"
    for n in m.nodes:
        if m.in_jit(n):
            continue
        names = None
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.AugAssign)):
            names = m.visible(m.scope[n])
        if isinstance(n, ast.BinOp) and (isinstance(n.op, ast.MatMult) or m.is_tensor(n.left, names)
                                         or m.is_tensor(n.right, names)):
            yield n, "tensor arithmetic on the host"
        elif isinstance(n, ast.UnaryOp) and not isinstance(n.op, ast.Not) and m.is_tensor(n.operand, names):
            yield n, "tensor arithmetic on the host"
        elif isinstance(n, ast.Compare) and any(not isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                                                for op in n.ops) and \
                any(m.is_tensor(e, names) for e in [n.left, *n.comparators]):
            yield n, "tensor comparison on the host"
        elif isinstance(n, ast.AugAssign) and m.is_tensor(n.target, names):
            yield n, "in-place tensor update on the host"
    for stmt, t in m.store_targets():
        if isinstance(t, ast.Subscript) and not m.in_jit(t) and m.is_tensor(t.value, m.visible(m.scope[t])):
            yield t, "writes tensor elements on the host"


# ---- entry point ---------------------------------------------------------------------------------------------

def check_source(source: str, spec: OpSpec, *, dtypes: Iterable[DType | str] | None = None) -> list[StaticRuleHit]:
    """Every static rule the source breaks, one hit per rule and line, in source order.

    `dtypes`: the element types the candidate will run on (default: all of the spec's); they decide what counts
    as a precision downcast. A source that does not parse has no hits (its import fails in the worker).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    try:
        m = _Module(source, tree, spec, dtypes if dtypes is not None else spec.dtypes)
        found = [(order, r, node, detail) for order, r in enumerate(RULES) for node, detail in r.check(m)]
    except RecursionError:
        return [StaticRuleHit(rule=DYN, line=1, col=0, snippet=(source.splitlines() or [""])[0].strip()[:200],
                              rationale=RULE_BY_ID[DYN].rationale, detail="source too deeply nested to analyse")]
    hits, seen = [], set()
    for order, r, node, detail in sorted(found, key=lambda h: (getattr(h[2], "lineno", 1), h[0],
                                                                 getattr(h[2], "col_offset", 0))):
        line = getattr(node, "lineno", 1)
        if (r.id, line) in seen:
            continue
        seen.add((r.id, line))
        snippet = m.lines[line - 1].strip()[:200] if 0 < line <= len(m.lines) else ""
        hits.append(StaticRuleHit(rule=r.id, line=line, col=getattr(node, "col_offset", 0), snippet=snippet,
                                  rationale=r.rationale, detail=detail))
    return hits


RULE_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
RULE_IDS: tuple[str, ...] = tuple(RULE_BY_ID)
