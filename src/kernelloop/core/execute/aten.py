"""The ATen operations a candidate's launch issues, recorded during verification (never on the timed path).

A second line of defence beside the static rules: a library call those rules cannot see (from a helper module, a
string built at run time, code the rules do not parse) still reaches ATen, where a `TorchDispatchMode` around each
verification call sees it. Triton kernels launched from Python are no ATen operations; allocations, views, copies
and fills are what an honest launch wrapper (and Triton's interpreter) issues. Any other operation computes values
with torch: the verdict is REJECTED, naming the first such operation, and the op's library implementations
(`LIBRARY`) are named as such.

What it does not see: work done without ATen (numpy, plain Python on `.tolist()`), and code that leaves the mode
(`torch._C._unset_dispatch_mode`), which the static rules forbid (`torch._C`, `torch.utils._python_dispatch`).
"""

from __future__ import annotations

from contextlib import contextmanager

from pydantic import Field

from ...base.records.base import Record

# Operations that compute nothing: allocation, metadata, views, copies and conversions, fills.
ALLOWED = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "scalar_tensor", "arange", "lift_fresh",
    "lift_fresh_copy", "view", "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand",
    "unsqueeze", "squeeze", "select", "slice", "narrow", "unbind", "split", "split_with_sizes", "chunk", "alias",
    "detach", "flatten", "unflatten", "movedim", "view_as_real", "view_as_complex", "_reshape_alias",
    "clone", "copy_", "_to_copy", "to", "contiguous", "_copy_from", "_copy_from_and_resize", "fill_", "zero_",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "_local_scalar_dense",
    "resolve_conj", "resolve_neg", "set_", "record_stream", "is_pinned", "_has_compatible_shallow_copy_type"})
# The library implementations of kernelloop's ops (and their usual building blocks), named as such in a verdict.
LIBRARY = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation", "addmv", "mv", "dot", "vdot",
    "einsum", "tensordot", "_scaled_mm", "_int_mm", "native_layer_norm", "layer_norm", "native_group_norm",
    "native_batch_norm", "_native_batch_norm_legit", "rms_norm", "_fused_rms_norm", "_softmax", "softmax",
    "_log_softmax", "log_softmax", "_safe_softmax", "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward", "_efficient_attention_forward",
    "gelu", "silu", "convolution", "_convolution"})


class AtenCall(Record):
    """One forbidden ATen operation seen during a verification call."""

    op: str = Field(description="The operation, e.g. 'aten.native_layer_norm.default'.")
    case: int = Field(description="Index of the verification case whose call issued it; -1: the import.")
    library: bool = Field(description="Whether it is a library implementation of an op (LIBRARY).")


class AtenReport(Record):
    """What the launches of one verification issued."""

    seen: list[str] = Field(default_factory=list, description="Every distinct operation, in first-seen order.")
    forbidden: list[AtenCall] = Field(default_factory=list, description="Operations outside ALLOWED.")

    @property
    def message(self) -> str:
        first = self.forbidden[0]
        kind = "the library implementation" if first.library else "a torch computation"
        others = sorted({c.op for c in self.forbidden[1:]} - {first.op})
        where = "at import" if first.case < 0 else f"during verification case {first.case}"
        who = "the import" if first.case < 0 else "the launch"
        return (f"aten-op: {who} issued {first.op} ({kind}) {where}"
                + (f"; also {', '.join(others[:8])}" if others else "") + "; compute the outputs in Triton kernels")


def _name(func) -> tuple[str, str]:
    """('aten.mm.default', 'mm')."""
    packet = getattr(func, "_overloadpacket", None)
    return str(func), getattr(packet, "__name__", None) or str(func).split(".")[-2]


class AtenRecorder:
    """`with recorder.case(k): launch(...)` records the operations of case k's call."""

    def __init__(self):
        self._seen: dict[str, None] = {}
        self._forbidden: list[AtenCall] = []

    @contextmanager
    def case(self, k: int):
        from torch.utils._python_dispatch import TorchDispatchMode
        recorder = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                full, base = _name(func)
                if full not in recorder._seen:
                    recorder._seen[full] = None
                    if base not in ALLOWED and full.startswith("aten."):
                        recorder._forbidden.append(AtenCall(op=full, case=k, library=base.rstrip("_") in LIBRARY))
                return func(*args, **(kwargs or {}))

        with _Mode():
            yield

    def report(self) -> AtenReport:
        return AtenReport(seen=list(self._seen), forbidden=self._forbidden)
