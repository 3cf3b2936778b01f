"""Export's explicit causal masks given back to SDPA as is_causal (deliver/fuse/masks.py): only where provably the same."""

from __future__ import annotations

import pytest
import torch

from kernelloop.deliver.fuse.graph import export_program
from kernelloop.deliver.fuse.masks import SDPA, _is_causal, causal_sdpa

transformers = pytest.importorskip("transformers")


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, num_hidden_layers=2, vocab_size=128, rms_norm_eps=1e-5,
                      attn_implementation="sdpa", use_cache=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval()


def _sdpa_calls(gm):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is SDPA]


def test_llama_masks_become_is_causal_and_the_logits_stay():
    model = _llama()
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    ep = export_program(model, (ids,))
    gm = ep.module()
    before = [n.args[3] for n in _sdpa_calls(gm)]
    assert before and all(m is not None for m in before), "export is expected to pass the causal mask explicitly"
    found = causal_sdpa(gm, "2x9")
    gm.graph.eliminate_dead_code()
    gm.recompile()
    assert [m.replaced for m in found] == [True, True], [m.reason for m in found]
    assert all(n.args[3] is None and n.args[5] is True for n in _sdpa_calls(gm))
    other = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(other).logits
        got = gm(other).logits
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_mask_that_depends_on_the_inputs_is_kept():
    model = _llama()
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    pad = torch.ones(2, 9, dtype=torch.long)
    pad[0, :3] = 0   # left padding: the mask is not the triangle and is an input of the graph
    ep = export_program(model, (ids,), {"attention_mask": pad})
    gm = ep.module()
    found = causal_sdpa(gm, "2x9")
    assert found and not any(m.replaced for m in found)
    assert all("inputs" in m.reason for m in found)
    assert all(n.args[3] is not None for n in _sdpa_calls(gm))


def test_only_the_exact_causal_triangle_passes():
    q, k = torch.empty(1, 2, 5, 4), torch.empty(1, 2, 5, 4)
    tril = torch.ones(5, 5, dtype=torch.bool).tril()
    assert _is_causal(tril[None, None], q, k) == ""
    window = tril & ~torch.ones(5, 5, dtype=torch.bool).tril(-3)   # sliding window of 3
    assert "not the causal triangle" in _is_causal(window[None, None], q, k)
    additive = torch.zeros(5, 5).masked_fill(~tril, float("-inf"))
    assert _is_causal(additive[None, None], q, k) == ""
    assert "not 0 on the causal triangle" in _is_causal(additive.masked_fill(~tril, -1.0)[None, None], q, k)
    assert "differs from key length" in _is_causal(torch.ones(5, 7, dtype=torch.bool)[None, None], q,
                                                   torch.empty(1, 2, 7, 4))
