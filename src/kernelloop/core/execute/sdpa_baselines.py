"""PyTorch SDPA with each CUDA backend pinned: the third-party baselines of the attention ops.

The op folders' baselines.py (ops/attention: non-causal, ops/attention_causal: causal) each list their BASELINES
table (the names `kernelloop.tune.loop.winners.op_baseline_names` reads without importing) with factories from here.
A factory imports lazily and raises (ImportError, RuntimeError) when the backend cannot run here -- no CUDA
device, a torch build without the backend -- and returns `fn(q, k, v) -> o`, which allocates and returns its own
output as it would in real use.

GQA (H > HKV): `enable_gqa=True` where the pinned backend accepts it (decided on the first call of a shape,
which the harness makes untimed); otherwise k and v are `repeat_interleave`d to H heads inside the call, as a
user of that backend would have to, so that copy is part of the measured time (the name gets no suffix:
the choice is a property of the backend in this torch build).
"""

from __future__ import annotations

import warnings
from typing import Callable

def sdpa_factory(backend_name: str, causal: bool) -> Callable[[], Callable]:
    """A factory of `fn(q, k, v) -> o`: SDPA with the backend `backend_name` (an `SDPBackend` member's name)
    pinned, `is_causal=causal`."""
    def factory() -> Callable:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if not torch.cuda.is_available():
            raise RuntimeError("SDPA backend baselines are measured on CUDA only")
        backend = getattr(SDPBackend, backend_name)
        native_gqa: dict[tuple, bool] = {}

        def fn(q, k, v):
            with sdpa_kernel(backend):
                if q.shape[1] == k.shape[1]:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                key = (tuple(q.shape), tuple(k.shape), q.dtype)
                if key not in native_gqa:
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                        native_gqa[key] = True
                        return out
                    except RuntimeError:
                        native_gqa[key] = False
                if native_gqa[key]:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                group = q.shape[1] // k.shape[1]
                return F.scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1),
                                                      v.repeat_interleave(group, dim=1), is_causal=causal)

        return fn

    return factory

