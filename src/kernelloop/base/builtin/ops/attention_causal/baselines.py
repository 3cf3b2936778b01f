"""Third-party baselines for attention_causal (is_causal=True): PyTorch SDPA with each CUDA backend pinned.

BASELINES maps a name to a zero-argument factory (kernelloop.core.execute.sdpa_baselines, shared by the attention ops:
what a factory returns, when it raises, how GQA is handled).
"""

from kernelloop.core.execute.sdpa_baselines import sdpa_factory

CAUSAL = True

BASELINES = {
    "sdpa-cudnn": sdpa_factory("CUDNN_ATTENTION", CAUSAL),
    "sdpa-flash": sdpa_factory("FLASH_ATTENTION", CAUSAL),
    "sdpa-efficient": sdpa_factory("EFFICIENT_ATTENTION", CAUSAL),
    "sdpa-math": sdpa_factory("MATH", CAUSAL),
}
