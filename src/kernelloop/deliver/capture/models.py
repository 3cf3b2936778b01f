"""Built-in tiny configurations of real transformers architectures: random weights, nothing downloaded.

Each factory returns (model in eval mode, (input_ids,)): the model's weights drawn from `seed`, cast to `dtype`
(bf16 by default) and moved to `device`; input_ids [batch, seq] drawn from `seed` in the vocabulary. The caches
are off (use_cache=False), so a forward is one prefill without KV-cache updates. The head dim is 64 in all three
(the attention ops implement D in [64, 128]): llama-tiny and qwen2-tiny set head_dim = 64 beside hidden 64 and
4 heads (transformers < 4.45 ignores head_dim and uses hidden / heads = 16; their attention cards are then
unmapped, D out of range); gpt2-tiny has n_embd 128 with 2 heads. Needs the `models` extra (transformers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ...base.records.spec import DType

VOCAB = 128


def _torch_dtype(dtype: str | DType | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    return getattr(torch, DType(dtype).torch_name)


def _finish(model: torch.nn.Module, *, device, dtype, seed: int, batch: int, seq: int):
    model = model.to(device=device, dtype=_torch_dtype(dtype)).eval()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g).to(device)
    return model, (ids,)


def llama_tiny(*, device: str | torch.device = "cpu", dtype: str | DType | torch.dtype = "bf16", seed: int = 0,
               batch: int = 2, seq: int = 8, attn_implementation: str = "sdpa"):
    """LlamaForCausalLM: hidden 64, 2 layers, 4 heads of dim 64, 2 kv heads (GQA), intermediate 128, vocab 128,
    rms_norm_eps 1e-6, SDPA attention ("eager": matmul + softmax instead)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=64, intermediate_size=128, vocab_size=VOCAB, rms_norm_eps=1e-6,
                      max_position_embeddings=max(256, seq), attn_implementation=attn_implementation,
                      use_cache=False, bos_token_id=0, eos_token_id=1, pad_token_id=None)
    torch.manual_seed(seed)
    return _finish(LlamaForCausalLM(cfg), device=device, dtype=dtype, seed=seed, batch=batch, seq=seq)


def qwen2_tiny(*, device: str | torch.device = "cpu", dtype: str | DType | torch.dtype = "bf16", seed: int = 0,
               batch: int = 2, seq: int = 8):
    """Qwen2ForCausalLM: as llama-tiny (its q/k/v projections have a bias), rms_norm_eps 1e-6, SDPA attention."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=64, intermediate_size=128, vocab_size=VOCAB, rms_norm_eps=1e-6,
                      max_position_embeddings=max(256, seq), attn_implementation="sdpa", use_cache=False,
                      bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)
    torch.manual_seed(seed)
    return _finish(Qwen2ForCausalLM(cfg), device=device, dtype=dtype, seed=seed, batch=batch, seq=seq)


def gpt2_tiny(*, device: str | torch.device = "cpu", dtype: str | DType | torch.dtype = "bf16", seed: int = 0,
              batch: int = 2, seq: int = 8):
    """GPT2LMHeadModel: n_embd 128, 2 layers, 2 heads of dim 64, vocab 128 (Conv1D projections, LayerNorm with
    eps 1e-5, a tied lm_head Linear without bias), SDPA attention."""
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_embd=128, n_layer=2, n_head=2, n_positions=max(64, seq), vocab_size=VOCAB,
                     attn_implementation="sdpa", use_cache=False, bos_token_id=0, eos_token_id=1)
    torch.manual_seed(seed)
    return _finish(GPT2LMHeadModel(cfg), device=device, dtype=dtype, seed=seed, batch=batch, seq=seq)


@dataclass(frozen=True)
class BuiltinModel:
    """A named factory: factory(device=, dtype=, seed=, batch=, seq=) -> (model, example_inputs)."""

    name: str
    description: str
    factory: Callable


MODELS: dict[str, BuiltinModel] = {m.name: m for m in (
    BuiltinModel("llama-tiny", "LlamaForCausalLM, 2 layers, hidden 64, GQA 4/2 heads of dim 64", llama_tiny),
    BuiltinModel("qwen2-tiny", "Qwen2ForCausalLM, 2 layers, hidden 64, GQA 4/2 heads of dim 64, qkv bias", qwen2_tiny),
    BuiltinModel("gpt2-tiny", "GPT2LMHeadModel, 2 layers, n_embd 128, 2 heads of dim 64", gpt2_tiny),
)}


def build(name: str, **kwargs):
    """The built-in model `name` (see MODELS) with the factory's keyword arguments; KeyError naming the choices."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}: the built-in ones are {', '.join(MODELS)}")
    return MODELS[name].factory(**kwargs)
