"""The worker's own copy of a case's inputs (taken before the candidate's call, CPU tensors) against the controller's
regeneration: a one-ulp drift between the two processes' draws is judged on what the kernel was given and noted;
anything larger, or a change during the call, is WRONG_INPUT_MUTATED."""

import torch

from kernelloop.core.bench.policy import INTERPRETER_WALLCLOCK
from kernelloop.core.execute.evaluate import Evaluator
from kernelloop.base.records import Status, Workload
from kernelloop.core.reference.inputs import TORCH_DTYPES, make_inputs
from kernelloop.core.reference.truth import truth
from kernelloop.core.verify.compare import input_drift

W = Workload(op="layernorm", axes={"M": 6, "N": 200}, dtype="fp16")
CASE = {"workload": W, "seed": 1234, "distribution": "normal"}


def bump(t: torch.Tensor, where: slice, ulps: int) -> torch.Tensor:
    out = t.clone()
    flat = out.view(torch.int16).view(-1)
    flat[where] += ulps
    return out


def test_input_drift_counts_elements_and_ulps():
    a = [torch.linspace(0.5, 1.5, 100, dtype=torch.float16), torch.arange(4)]
    assert input_drift(a, [t.clone() for t in a]) == (0, 0)
    assert input_drift(a, [bump(a[0], slice(10, 13), 1), a[1]]) == (3, 1)
    assert input_drift(a, [bump(a[0], slice(0, 1), -7), a[1]]) == (1, 7)
    assert input_drift(a, [-a[0], a[1]])[1] == 2 ** 31                      # sign changes are far
    assert input_drift(a, [a[0], a[1] + 1])[1] == 2 ** 31                   # integers: any difference is far
    assert input_drift(a, [a[0].float(), a[1]])[1] == 2 ** 31               # another dtype
    assert input_drift(a, a[:1])[1] == 2 ** 31                              # a missing input


def judge(layernorm, tmp_path, seen, after, outputs_from):
    ev = Evaluator(layernorm, "interpret", None, INTERPRETER_WALLCLOCK, secret="drift")
    refs = truth(layernorm.spec, layernorm.folder / layernorm.spec.reference, outputs_from)
    runs = [[refs[0].to(TORCH_DTYPES[W.dtype])]]
    return ev._judge_case(CASE, {"runs": runs, "inputs_before": seen, "inputs_after": after})


def test_a_one_ulp_regeneration_drift_is_judged_on_the_workers_inputs_and_noted(layernorm, tmp_path):
    regen = make_inputs(layernorm.spec, W, CASE["seed"], "cpu", CASE["distribution"])
    drifted = [bump(regen[0], slice(5, 40), 1), *regen[1:]]
    v = judge(layernorm, tmp_path, drifted, drifted, drifted)
    assert v.status is Status.PASSED, v
    assert "drift" in v.log and "35 element(s)" in v.log
    # identical copies: nothing noted; and cases without a copy (GPU tensors) are judged as before
    assert judge(layernorm, tmp_path, regen, regen, regen).log == ""
    assert judge(layernorm, tmp_path, None, regen, regen).status is Status.PASSED


def test_a_larger_difference_before_the_call_or_any_change_during_it_is_a_mutation(layernorm, tmp_path):
    regen = make_inputs(layernorm.spec, W, CASE["seed"], "cpu", CASE["distribution"])
    far = [bump(regen[0], slice(5, 6), 3), *regen[1:]]
    v = judge(layernorm, tmp_path, far, far, far)
    assert v.status is Status.WRONG_INPUT_MUTATED and "before its call" in v.message, v
    changed = [bump(regen[0], slice(5, 6), 1), *regen[1:]]
    v = judge(layernorm, tmp_path, regen, changed, regen)
    assert v.status is Status.WRONG_INPUT_MUTATED and "changed during the call" in v.message, v
    # drift before the call, and a further one-ulp change during it: still caught
    v = judge(layernorm, tmp_path, changed, [bump(changed[0], slice(7, 8), 1), *changed[1:]], changed)
    assert v.status is Status.WRONG_INPUT_MUTATED and "changed during the call" in v.message, v
