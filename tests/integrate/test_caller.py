"""Which path an applied module's call takes (deliver/integrate/apply.py `kernel_caller`): the dispatcher itself in eager
inference; the package's torch op under autograd, inside a dispatch mode, and when torch.compile traces it."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelloop.deliver.integrate.apply import kernel_caller


class Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class FakeKernel:
    n_inputs, scalar_names = 1, ["eps"]

    def __init__(self):
        self.direct, self.op = [], []
        self.torch_op = lambda x, eps: self.op.append(eps) or x * 2

    def __call__(self, x, *, eps):
        self.direct.append(eps)
        return x if eps < 0 else x * 2    # eps < 0: an identity, handing back its input


def test_eager_inference_calls_the_dispatcher_directly():
    k = FakeKernel()
    call = kernel_caller(k)
    x = torch.ones(3)
    with torch.no_grad():
        assert torch.equal(call(x, 0.5), x * 2)
    assert k.direct == [0.5] and k.op == []


def test_an_output_that_is_an_input_is_copied():
    k = FakeKernel()
    x = torch.ones(3)
    out = kernel_caller(k)(x, -1.0)
    assert out is not x and torch.equal(out, x)


def test_autograd_and_dispatch_modes_see_the_torch_op():
    k = FakeKernel()
    call = kernel_caller(k)
    call(torch.ones(3, requires_grad=True), 0.1)
    with Passthrough():
        call(torch.ones(3), 0.2)
    call(torch.ones(3), 0.3)                     # grad on, but nothing requires grad: direct
    assert k.op == [0.1, 0.2] and k.direct == [0.3]


def test_torch_compile_traces_the_torch_op(monkeypatch):
    k = FakeKernel()
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    call = kernel_caller(k)
    call(torch.ones(3), 0.4)
    assert k.op == [0.4] and k.direct == []
