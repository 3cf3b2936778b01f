"""The static-input decode step that `e2e --generate` captures in a CUDA graph, run eagerly on the CPU: after its
own prefill it gives generate()'s first token and the logits of generate()'s first decode step, every run the same
(the cache's write position is rewound), and the bytes it must read leave out only an untied embedding table."""

import pytest
import torch

from kernelloop.deliver.capture.models import gpt2_tiny, llama_tiny
from kernelloop.deliver.integrate.decode_graph import DecodeStep, weight_bytes


def _generated(model, ids, n):
    return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                          do_sample=False, cache_implementation="static", use_cache=True,
                          return_dict_in_generate=True, output_logits=True, pad_token_id=0)


@pytest.mark.parametrize("factory", [llama_tiny, gpt2_tiny])
def test_the_decode_step_gives_generates_first_decode_step_every_time(factory):
    model, (ids,) = factory(dtype="fp32", batch=2, seq=6)
    out = _generated(model, ids, 2)
    step = DecodeStep(model, ids, max_len=8)
    assert torch.equal(step.token.flatten(), out.sequences[:, 6])
    with torch.no_grad():
        first, again = step.run(), step.run()
    assert torch.equal(first, again)
    assert torch.allclose(first.float(), out.logits[1], atol=1e-5)


def test_the_bytes_of_a_step():
    model, (ids,) = llama_tiny(dtype="fp16", batch=2, seq=6)
    step = DecodeStep(model, ids, max_len=10)
    params = sum(p.numel() for p in model.parameters())
    table = model.get_input_embeddings().weight.numel()
    wb, kb = step.step_bytes()
    assert wb == (params - table) * 2                       # untied: the lm_head is its own weight
    # 2 layers x (keys + values) x batch 2 x 2 kv heads x 7 positions (prompt + the new token) x dim 64, fp16
    assert kb == 2 * 2 * 2 * 2 * 7 * 64 * 2
    gpt2, _ = gpt2_tiny(dtype="fp16")
    assert gpt2.lm_head.weight.data_ptr() == gpt2.get_input_embeddings().weight.data_ptr()
    assert weight_bytes(gpt2) == sum(p.numel() for p in gpt2.parameters()) * 2   # tied: the table is the LM head
