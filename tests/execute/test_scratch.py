"""An op's declared workspace (`[scratch]` in spec.toml): passed to `launch` as `scratch=`, poisoned before every
verified call and every timed sample, so a kernel can neither read what it did not write nor keep anything (such
as a copy of its answer) from one call to the next."""

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.propose.interface import launch_signature, op_interface
from kernelloop.core.execute.evaluate import Timeouts
from kernelloop.base.records import Candidate, OpSpec, Status, Workload
from kernelloop.core.reference.inputs import alloc_scratch, is_poison
from kernelloop.core.spec import load_op

OPS = ops_dir()

W = Workload(op="layernorm", axes={"M": 6, "N": 200}, dtype="fp32")



def _battery_kernel() -> str:
    """test_battery's honest LayerNorm kernel (the base its candidates add a `launch` to), plus torch."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_battery", Path(__file__).with_name("test_battery.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return "import torch\n" + mod.KERNEL


KERNEL = _battery_kernel()


@pytest.fixture(scope="module")
def with_scratch(tmp_path_factory):
    """The layernorm op with a workspace of 2 * M * N fp32 elements."""
    folder = tmp_path_factory.mktemp("op") / "layernorm"
    shutil.copytree(OPS / "layernorm", folder, ignore=shutil.ignore_patterns("__pycache__"))
    spec = folder / "spec.toml"
    spec.write_text(spec.read_text() + '\n[scratch]\nname = "rows"\nnumel = "2 * M * N"\ndtype = "fp32"\n')
    return load_op(folder)


@pytest.fixture(scope="module")
def evaluator(with_scratch, evaluator_for):
    return evaluator_for(with_scratch, "scratch", samples=6, checks=2, timeouts=Timeouts(check=30.0, bench=60.0),
                         static_rules=False,
                         aten_ops=False)   # fixtures model a kernel's misbehaviour with torch ops (y.add_)


def run(evaluator, job_dir, launch_body: str):
    src = KERNEL + "\n" + textwrap.dedent(launch_body)
    return evaluator.evaluate(Candidate(op="layernorm", template="custom", source=src), W, job_dir(evaluator))


def test_every_verified_call_and_timed_sample_finds_the_workspace_poisoned(evaluator, job_dir):
    # a call that finds what an earlier call left in the workspace fails loudly, so a PASSED verdict means that no
    # call -- verified, warm-up, the untimed first one, or timed -- ever found any
    ev = run(evaluator, job_dir, """
        def launch(x, weight, bias, y, *, eps, scratch):
            assert scratch.dtype == torch.float32 and scratch.numel() == 2 * x.numel()
            if scratch[:1].view(torch.int32).item() != 0x7FC0DEAD:
                raise RuntimeError("found what an earlier call left in the workspace")
            honest(x, weight, bias, y, eps)
            scratch.fill_(1.0)
        """)
    assert ev.verdict.status is Status.PASSED, ev.verdict
    assert ev.measurement is not None


def test_a_kernel_that_reads_the_workspace_before_writing_it_fails(evaluator, job_dir):
    # it assumes a zeroed workspace (as an atomics accumulator would): the poison NaN reaches its output, payload
    # and all (so it reads as never written)
    ev = run(evaluator, job_dir, """
        def launch(x, weight, bias, y, *, eps, scratch):
            honest(x, weight, bias, y, eps)
            y.add_(scratch[: y.numel()].view(y.shape))
        """)
    assert ev.verdict.status in (Status.WRONG_NONFINITE, Status.WRONG_INCOMPLETE), ev.verdict


def test_ops_without_a_workspace_are_called_as_before(layernorm):
    assert layernorm.spec.scratch is None
    assert alloc_scratch(layernorm.spec, W, "cpu") == {}
    assert "scratch" not in launch_signature(layernorm.spec)
    assert op_interface(layernorm.spec, [W])["scratch"] is None


def test_the_workspace_is_allocated_poisoned_and_described_to_agents(with_scratch):
    spec = with_scratch.spec
    kw = alloc_scratch(spec, W, "cpu")
    assert set(kw) == {"scratch"} and kw["scratch"].numel() == 2 * 6 * 200 and kw["scratch"].dtype == torch.float32
    assert bool(is_poison(kw["scratch"]).all())
    assert launch_signature(spec) == "launch(x, weight, bias, y, *, scratch, eps, **config)"
    assert op_interface(spec, [W])["scratch"]["numel"] == "2 * M * N"


def test_a_malformed_workspace_is_refused(with_scratch):
    data = with_scratch.spec.model_dump()
    with pytest.raises(ValueError, match="unknown name"):
        OpSpec.model_validate({**data, "scratch": {"name": "x", "numel": "2 * Q"}})
    with pytest.raises(ValueError, match="may be called"):
        OpSpec.model_validate({**data, "scratch": {"name": "x", "numel": "__import__('os')"}})
    with pytest.raises(ValueError, match="not allowed"):
        OpSpec.model_validate({**data, "scratch": {"name": "x", "numel": "[M][0]"}})
    spec = OpSpec.model_validate({**data, "scratch": {"name": "x", "numel": "M - N"}})
    with pytest.raises(ValueError, match="gives -194"):
        spec.scratch_numel(W.axes)


def test_launch_interface_and_static_rules_know_the_workspace(with_scratch):
    from kernelloop.tune.propose.proposal import ProposalInvalid, check_interface
    from kernelloop.core.verify.rules import check_source
    spec = with_scratch.spec
    check_interface("def launch(x, weight, bias, y, *, eps, scratch, **config):\n    pass\n", spec, set())
    check_interface("def launch(x, weight, bias, y, **kw):\n    pass\n", spec, set())
    with pytest.raises(ProposalInvalid, match="does not accept keyword.*scratch"):
        check_interface("def launch(x, weight, bias, y, *, eps):\n    pass\n", spec, set())
    # the workspace is a tensor to the rules: host reads of it and state kept on it are hits, as on an output
    hits = check_source(textwrap.dedent("""
        import torch
        def launch(x, weight, bias, y, *, eps, scratch):
            scratch.n = getattr(scratch, "n", 0) + 1
            if int(scratch.view(torch.int32)[0]) != 0x7FC0DEAD:
                pass
        """), spec)
    assert {h.rule for h in hits} >= {"global-state", "torch-on-hot-path"}, hits
    # ... also when it arrives through **config
    for body in ('ws = config["scratch"]\n    ws.fill_(1.0)', 'config.get("scratch").zero_()',
                 'ws = config.pop("scratch")\n    ws[0] = 1.0'):
        src = f"def launch(x, weight, bias, y, *, eps, **config):\n    {body}\n"
        assert "torch-on-hot-path" in {h.rule for h in check_source(src, spec)}, body
    assert check_source("def launch(x, weight, bias, y, *, eps, **config):\n    n = config['BLOCK']\n", spec) == []

