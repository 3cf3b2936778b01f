"""Third-party baselines for attention_causal (is_causal=True): PyTorch SDPA with each CUDA backend pinned.

BASELINES maps a name to a zero-argument factory. A factory imports lazily and raises (ImportError,
RuntimeError) when the backend cannot run here -- no CUDA device, a torch build without the backend -- and
returns `fn(q, k, v) -> o`, which allocates and returns its own output as it would in real use.

GQA (H > HKV): `enable_gqa=True` where the pinned backend accepts it (decided on the first call of a shape,
which the harness makes untimed); otherwise k and v are `repeat_interleave`d to H heads inside the call, as a
user of that backend would have to, so that copy is part of the measured time (the name gets no suffix:
the choice is a property of the backend in this torch build).
"""

from __future__ import annotations

import warnings
from typing import Callable

CAUSAL = True


def _sdpa(backend_name: str) -> Callable[[], Callable]:
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
                    return F.scaled_dot_product_attention(q, k, v, is_causal=CAUSAL)
                key = (tuple(q.shape), tuple(k.shape), q.dtype)
                if key not in native_gqa:
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            out = F.scaled_dot_product_attention(q, k, v, is_causal=CAUSAL, enable_gqa=True)
                        native_gqa[key] = True
                        return out
                    except RuntimeError:
                        native_gqa[key] = False
                if native_gqa[key]:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=CAUSAL, enable_gqa=True)
                group = q.shape[1] // k.shape[1]
                return F.scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1),
                                                      v.repeat_interleave(group, dim=1), is_causal=CAUSAL)

        return fn

    return factory


BASELINES: dict[str, Callable[[], Callable]] = {
    "sdpa-cudnn": _sdpa("CUDNN_ATTENTION"),
    "sdpa-flash": _sdpa("FLASH_ATTENTION"),
    "sdpa-efficient": _sdpa("EFFICIENT_ATTENTION"),
    "sdpa-math": _sdpa("MATH"),
}
