"""Recording one forward: every ATen call (a TorchDispatchMode) attributed to the module stack (forward hooks).

The recorder keeps a stack of module frames (path, class) maintained by forward pre/post hooks on every module of
the model. The outermost module of a recognised class on the stack (see mapping.module_family) *owns* every ATen
call issued until it returns, its children's included; its mapping is decided when it returns (the mapping may look
at its output). An ATen call outside any owner is mapped on its own when kernelloop has an op for its overload
(softmax, attention). Nothing here keeps tensors beyond one module call: calls are stored as metadata.

With `profiling`, each recorded ATen call runs inside `torch.profiler.record_function("kl#<seq>")`, so the
profiler's events give the device time of each call (core.py reads them), and the mapping's own work (the numeric
checks of mapping.py) inside "kl-mapping" ranges, which core.py takes out of the model's total.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from ...base.records.base import canonical_json
from .mapping import Mapping, OpSpecs, aten_target, bind, map_aten, map_module, module_family
from .records import TensorInfo

PROFILE_PREFIX = "kl#"
CHECK_RANGE = "kl-mapping"  # the mapping's own device work (numeric checks) while profiling: not the model's time


def qualname(obj_type: type) -> str:
    """`torch.nn.modules.linear.Linear` for nn.Linear."""
    return f"{obj_type.__module__}.{obj_type.__qualname__}"


def tensor_info(t: torch.Tensor) -> TensorInfo:
    """Metadata of one tensor (no data read)."""
    try:
        stride = list(t.stride())
        contiguous = bool(t.is_contiguous())
    except (RuntimeError, NotImplementedError):  # sparse and other layouts without strides
        stride, contiguous = [], False
    return TensorInfo(shape=list(t.shape), stride=stride, dtype=str(t.dtype).removeprefix("torch."),
                      device=t.device.type, contiguous=contiguous)


def json_value(v: Any) -> Any:
    """A non-tensor ATen argument as a JSON value (see AtenVariant.args)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return json_value({torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(v)](v))
    if isinstance(v, (list, tuple, torch.Size)):
        return [json_value(x) for x in v]
    if isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(v)
    return repr(v)


def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors in an argument structure, in order (lists and dicts flattened)."""
    return [x for x in tree_leaves(value) if isinstance(x, torch.Tensor)]


@dataclass
class AtenCall:
    """One recorded ATen call (metadata only)."""

    seq: int
    overload: str
    view: bool
    tensors: tuple[TensorInfo, ...]
    args_json: str                    # canonical JSON of the explicitly passed non-tensor arguments
    owner: int | None                 # index of the owning ModuleCall, if any
    frame_path: str                   # innermost module around the call
    frame_class: str
    mapping: Mapping | None = None    # recognised ATen call outside any owner

    @property
    def key(self) -> tuple:
        return (self.overload, self.tensors, self.args_json)


@dataclass
class ModuleCall:
    """One call of a recognised module and the ATen calls it owns."""

    index: int
    path: str
    module_class: str
    family: str
    inputs: tuple[TensorInfo, ...]
    calls: list[int] = field(default_factory=list)
    mapping: Mapping | None = None


@dataclass
class _Frame:
    module_id: int
    path: str
    module_class: str
    owner: int | None


class Recorder:
    """Collects AtenCalls and ModuleCalls of one forward; `attach(model)` installs the hooks, `mode()` the
    dispatch mode."""

    def __init__(self, specs: OpSpecs, *, profiling: bool = False):
        self.specs = specs
        self.profiling = profiling
        self.calls: list[AtenCall] = []
        self.modules: list[ModuleCall] = []
        self.paused = False
        self._stack: list[_Frame] = []
        self._owner: int | None = None
        self._paths: dict[int, str] = {}
        self._handles: list = []

    # -- hooks -----------------------------------------------------------------------------------------------
    def attach(self, model: torch.nn.Module) -> None:
        for path, module in model.named_modules():
            self._paths[id(module)] = path
            self._handles.append(module.register_forward_pre_hook(self._enter, with_kwargs=True))
            self._handles.append(module.register_forward_hook(self._exit, with_kwargs=True))

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    @property
    def current_path(self) -> str | None:
        """The innermost module being run (after an exception: the one it escaped from)."""
        return self._stack[-1].path if self._stack else None

    def _enter(self, module, args, kwargs):
        owner = None
        if self._owner is None and (family := module_family(module)) is not None:
            owner = len(self.modules)
            inputs = tuple(tensor_info(t) for t in tensors_of((args, kwargs)))
            self.modules.append(ModuleCall(owner, self._paths.get(id(module), "?"), qualname(type(module)),
                                           family, inputs))
            self._owner = owner
        self._stack.append(_Frame(id(module), self._paths.get(id(module), "?"), qualname(type(module)), owner))

    def _exit(self, module, args, kwargs, output):
        # Pop up to this module's frame: a frame left by an exception the model caught is dropped with it.
        frame = None
        while self._stack:
            frame = self._stack.pop()
            if frame.module_id == id(module):
                break
        if frame is not None and frame.owner is not None and frame.module_id == id(module):
            call = self.modules[frame.owner]
            self.paused = True  # the mapping's own torch calls (numeric checks) are not the model's
            try:
                if self.profiling:
                    with torch.profiler.record_function(CHECK_RANGE):
                        call.mapping = map_module(call.family, module, args, kwargs, output, self.specs)
                else:
                    call.mapping = map_module(call.family, module, args, kwargs, output, self.specs)
            finally:
                self.paused = False
        self._owner = next((f.owner for f in self._stack if f.owner is not None), None)

    # -- ATen calls --------------------------------------------------------------------------------------------
    def record(self, func, args, kwargs) -> int:
        seq = len(self.calls)
        overload = str(func)
        bound_explicit = bind(func, args, kwargs, defaults=False)
        tensors = tuple(tensor_info(t) for t in tensors_of(list(bound_explicit.values())))
        rendered = {k: json_value(v) for k, v in bound_explicit.items() if not tensors_of(v) and
                    not isinstance(v, torch.Tensor)}
        frame = self._stack[-1] if self._stack else None
        call = AtenCall(seq, overload, bool(getattr(func, "is_view", False)), tensors, canonical_json(rendered),
                        self._owner, frame.path if frame else "", frame.module_class if frame else "")
        if self._owner is not None:
            self.modules[self._owner].calls.append(seq)
        elif aten_target(overload) is not None:
            call.mapping = map_aten(func, args, kwargs, self.specs)
        self.calls.append(call)
        return seq

    def mode(self) -> TorchDispatchMode:
        return _Mode(self)


class _Mode(TorchDispatchMode):
    """Records each ATen call into the recorder (while it is not paused), then runs it."""

    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.recorder
        if rec.paused:
            return func(*args, **kwargs)
        seq = rec.record(func, args, kwargs)
        if rec.profiling:
            with torch.profiler.record_function(f"{PROFILE_PREFIX}{seq}"):
                return func(*args, **kwargs)
        return func(*args, **kwargs)
