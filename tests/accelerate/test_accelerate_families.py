"""gpt2-tiny and a transformers family built here from AutoConfig (Mistral, random weights; nothing in kernelloop
names it) through accelerate's first steps: capture maps every card, and the loop's plan accepts each op's workloads
with something to try at each. The full path (runs, export, e2e, training) is tests/accelerate/test_accelerate.py's
on llama-tiny: about two minutes per model on 2 cores."""

import os

import pytest
import torch

pytest.importorskip("transformers")

import kernelloop  # noqa: E402
from kernelloop.deliver import api  # noqa: E402
from kernelloop.deliver.capture import write_workloads  # noqa: E402
from kernelloop.deliver.capture.models import build  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


def _mistral():
    """A transformers family picked here, not named anywhere in kernelloop: a tiny Mistral from AutoConfig."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model("mistral", hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=64, intermediate_size=128, vocab_size=128,
                               use_cache=False, attn_implementation="sdpa", max_position_embeddings=256)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).eval()
    return model, (torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(0)),)


@pytest.mark.parametrize("family, ops", [
    ("gpt2-tiny", {"layernorm", "gemm_bias", "gemm_nt", "attention_causal"}),
    ("mistral", {"rmsnorm", "gemm_nt", "attention_causal"}),
])
def test_other_families_capture_and_plan(tmp_path, family, ops):
    """accelerate's first two steps: every card mapped, and each op's workloads accepted by the loop's plan with
    something to try at every workload."""
    model, example = _mistral() if family == "mistral" else build(family)
    report = kernelloop.capture(model, example)
    assert report.unmapped == []
    files = write_workloads(report, tmp_path / "cards")
    assert set(files) == ops
    for op, path in files.items():
        p = api.plan(op, path, 1, "interpret", out=tmp_path / "runs" / op)
        assert p.workloads and p.empty == {}, (op, p.empty)
