"""What candidate code may name: the op's allow-list (`OpSpec.code`, default `DEFAULT_CODE_POLICY`).

The static check `verify.rules.allow` holds every candidate module to it: every name a candidate reaches from an
imported module, a builtin, or an attribute of a value it cannot resolve must be declared here. This is the one
definition; an op folder may declare its own in spec.toml under `[code]` (each field replaces the default's).
"""

from __future__ import annotations

from pydantic import Field

from .base import Record

# Modules whose public attributes a candidate may use (their attributes are walked on the installed library: one
# that is itself a module must be on this list too, so `tl.math.erf` passes and `triton.language.core.os` does not).
_MODULES = (
    "__future__", "math", "typing",
    "triton.language", "triton.language.math", "triton.language.extra.libdevice",
    "triton.experimental.gluon", "triton.experimental.gluon.language",
    "triton.experimental.gluon.language.nvidia.hopper", "triton.experimental.gluon.language.nvidia.hopper.mbarrier",
    "triton.experimental.gluon.language.nvidia.hopper.tma", "triton.experimental.gluon.language.nvidia.blackwell",
    "triton.experimental.gluon.language.nvidia.blackwell.tma", "triton.experimental.gluon.nvidia.hopper",
    "triton.experimental.gluon.nvidia.blackwell", "triton.tools.tensor_descriptor",
)

# Single names (and what lies below them: `TensorDescriptor.from_tensor`) of modules that are not allowed whole.
_NAMES = (
    # Triton's launch side
    "triton.jit", "triton.cdiv", "triton.next_power_of_2", "triton.Config", "triton.autotune", "triton.heuristics",
    "triton.constexpr",
    # names of other Triton versions that templates feature-test with getattr(module, "name", default)
    "triton.experimental.gluon.language.thread_barrier", "triton.experimental.gluon.language.nvidia.hopper.tma.async_load",
    "triton.experimental.gluon.language.nvidia.hopper.tma.async_store",
    # torch: allocation, dtypes and device metadata
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
    "torch.float16", "torch.half", "torch.bfloat16", "torch.float32", "torch.float", "torch.float64", "torch.double",
    "torch.float8_e4m3fn", "torch.float8_e5m2", "torch.int8", "torch.int16", "torch.int32", "torch.int64",
    "torch.uint8", "torch.bool", "torch.dtype", "torch.device", "torch.Size", "torch.Tensor", "torch.finfo",
    "torch.iinfo", "torch.is_tensor", "torch.is_floating_point", "torch.Generator", "torch.no_grad",
    "torch.inference_mode", "torch.__version__", "torch.version.cuda", "torch.version.hip",
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.current_device",
    "torch.cuda.get_device_properties", "torch.cuda.get_device_capability", "torch.cuda.get_device_name",
    "torch.cuda.device", "triton.__version__",
    # compile-time helpers (the `global-state` rule keeps caches off tensors)
    "functools.lru_cache", "functools.cache", "functools.partial", "functools.reduce",
)

_BUILTINS = (
    "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "ord", "pow", "print",
    "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
    "classmethod", "staticmethod", "property", "NotImplemented", "Ellipsis",
    "ArithmeticError", "AssertionError", "Exception", "IndexError", "KeyError", "LookupError",
    "NotImplementedError", "OverflowError", "RuntimeError", "StopIteration", "TypeError", "ValueError",
    "ZeroDivisionError",
)

# Types whose public attributes may be read on values the check cannot resolve (tensors, dtypes, configs, ...).
_ATTRIBUTE_TYPES = (
    "builtins.str", "builtins.list", "builtins.dict", "builtins.tuple", "builtins.set", "builtins.frozenset",
    "builtins.int", "builtins.float", "builtins.bool", "builtins.range", "builtins.slice",
    "torch.dtype", "torch.device", "torch.Size", "torch.finfo", "torch.iinfo", "torch.Generator",
    "triton.Config", "triton.language.tensor", "triton.language.dtype", "triton.language.pointer_type",
    "triton.language.block_type", "triton.language.constexpr", "triton.language.tensor_descriptor",
    "triton.tools.tensor_descriptor.TensorDescriptor",
    "triton.experimental.gluon.language.shared_memory_descriptor", "triton.experimental.gluon.language.tensor",
    "triton.experimental.gluon.nvidia.hopper.TensorDescriptor",
)

# Tensor metadata, allocation-free views and device properties (torch.Tensor is not listed whole: its compute
# methods are the library a candidate must not call).
_ATTRIBUTES = (
    "shape", "dtype", "device", "ndim", "is_cuda", "is_cpu", "layout", "itemsize", "nbytes", "T", "mT",
    "stride", "size", "numel", "nelement", "dim", "element_size", "is_contiguous", "data_ptr", "get_device",
    "is_floating_point", "storage_offset", "contiguous", "view", "view_as", "reshape", "flatten", "unflatten",
    "unsqueeze", "squeeze", "t", "transpose", "permute", "expand", "expand_as", "narrow", "select", "movedim",
    "unbind", "chunk", "split", "type", "index", "name", "major", "minor", "multi_processor_count", "total_memory",
    "L2_cache_size", "warp_size", "max_threads_per_multi_processor", "regs_per_multiprocessor",
    "shared_memory_per_block_optin", "shared_memory_per_multiprocessor", "gcnArchName",
    # instance fields of Triton's types (not on their classes): dtypes, pointers, blocks, descriptors
    "element_ty", "primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "exponent_bias", "value", "base",
    "strides", "block_shape", "num_warps", "num_stages", "num_ctas", "kwargs",
)

# Dunder attributes and module names that are plain strings (every other dunder is refused).
_DUNDERS = ("__name__", "__version__", "__doc__")


class CodePolicy(Record):
    """The op's allow-list for candidate code (see the module docstring)."""

    modules: list[str] = Field(default_factory=lambda: list(_MODULES),
                               description="Modules importable whole; their public attributes may be used.")
    names: list[str] = Field(default_factory=lambda: list(_NAMES),
                             description="Single qualified names allowed (and the attributes below them).")
    builtins: list[str] = Field(default_factory=lambda: list(_BUILTINS), description="Builtins a candidate may use.")
    attribute_types: list[str] = Field(
        default_factory=lambda: list(_ATTRIBUTE_TYPES),
        description="Types whose public attributes may be read on values the check cannot resolve.")
    attributes: list[str] = Field(default_factory=lambda: list(_ATTRIBUTES),
                                  description="Further attribute names allowed on such values.")
    dunders: list[str] = Field(default_factory=lambda: list(_DUNDERS),
                               description="The only dunder names a candidate may read.")


DEFAULT_CODE_POLICY = CodePolicy()
