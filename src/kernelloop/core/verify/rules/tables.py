"""The name tables the rules look names up in: qualified-name prefixes per rule, builtins, each op's library
implementations, torch's metadata, and the tensor methods and attributes by what they do."""

from __future__ import annotations

import ast
import builtins

import torch

from .registry import ALIAS, DYN, FILE, GLOBAL, INTRO, LIB, MONKEY, PREC, PROC, STREAM, TIMING

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
    "rmsnorm_offset": _NORMS | {"normalize"},
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
