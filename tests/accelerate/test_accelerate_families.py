"""The full `kernelloop.accelerate` path on gpt2-tiny (GPT2LMHeadModel: LayerNorm, Conv1D projections with a bias,
a tied lm_head) and on a transformers family built here from AutoConfig (Mistral, random weights; nothing in
kernelloop names it): capture -> a run per op (budget 1, the Triton interpreter) -> export -> e2e -> apply. Each
family is run once (a module fixture, about 30 s on 2 cores) and checked for what it patched, by op; the verdict;
the patched model's loss beside the original's; and gradients through the patched model. llama-tiny's full path,
resumption and training over steps are tests/accelerate/test_accelerate.py's.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import copy  # noqa: E402
from collections import Counter  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

pytest.importorskip("transformers")

import kernelloop  # noqa: E402
from kernelloop.deliver.accelerate import CardStatus, Verdict  # noqa: E402
from kernelloop.deliver.capture.models import build  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")]

# call sites patched per op: gpt2-tiny's 2 blocks (ln_1, ln_2, c_attn, c_proj, c_fc, mlp.c_proj each), ln_f, the
# lm_head and SDPA (one patched function); Mistral's 1 layer (q, k, v, o, gate, up, down), 3 norms, lm_head, SDPA
SITES = {"gpt2-tiny": {"layernorm": 5, "gemm_bias": 8, "gemm_nt": 1, "attention_causal": 1},
         "mistral": {"gemm_nt": 8, "rmsnorm": 3, "attention_causal": 1}}


def _mistral():
    """A transformers family picked here, not named anywhere in kernelloop: a tiny Mistral from AutoConfig."""
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model("mistral", hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=64, intermediate_size=256, vocab_size=128,
                               use_cache=False, attn_implementation="sdpa", max_position_embeddings=256)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).eval()
    return model, (torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(0)),)


@pytest.fixture(scope="module", params=sorted(SITES))
def accelerated(request, tmp_path_factory):
    """(family, patched model, its unpatched copy, example, Accelerated)."""
    family = request.param
    model, example = _mistral() if family == "mistral" else build(family)
    plain = copy.deepcopy(model)
    result = kernelloop.accelerate(model, example, budget=1, out=tmp_path_factory.mktemp(family) / "out",
                                   device="cpu")
    yield family, model, plain, example, result
    if result.applied is not None:
        result.applied.undo()   # the patched functions (attention) are global while applied


def test_every_card_is_patched_and_the_verdict_is_patched(accelerated):
    family, _, _, _, result = accelerated
    s = result.summary
    assert s.verdict is Verdict.ACCELERATED and s.outputs_ok and result.e2e.patched, s
    assert [c for c in s.cards if c.status is not CardStatus.PATCHED] == []
    assert {o.op for o in s.ops} == set(SITES[family]) and all(o.passed == o.workloads > 0 for o in s.ops)
    assert Counter(r.split(" -> ")[1] for r in s.replaced) == SITES[family]
    assert all(c.cosine > 0.999 for c in result.e2e.checks)


def test_the_patched_model_runs_the_package_with_the_originals_loss(accelerated):
    _, model, plain, (ids,), result = accelerated
    pkg = result.package
    for k in pkg.kernels.values():
        k.reset_counts()
    with torch.no_grad():
        got, want = float(model(ids, labels=ids).loss), float(plain(ids, labels=ids).loss)
    assert got == pytest.approx(want, rel=5e-3, abs=5e-3)
    ops = pkg.counts()["ops"]
    assert {op for op, c in ops.items() if sum(c["entries"].values()) > 0} == set(pkg.kernels)


def test_backward_through_the_patched_model_gives_the_originals_gradients(accelerated):
    _, model, plain, (ids,), result = accelerated

    def grads(m):
        m.zero_grad(set_to_none=True)
        m(ids, labels=ids).loss.backward()
        return {n: p.grad for n, p in m.named_parameters()}
    want, got = grads(plain), grads(model)
    assert [n for n, g in got.items() if g is None] == [] and want.keys() == got.keys()
    for name, w in want.items():
        g = got[name]
        assert torch.isfinite(g).all(), name
        cos = F.cosine_similarity(g.flatten().double(), w.flatten().double(), dim=0)
        assert cos > 0.99 and (g - w).abs().max() <= 5e-2 * w.abs().max() + 1e-3, name
    counts = result.package.counts()["ops"]
    assert all(c["backward_by_reference"] > 0 for op, c in counts.items() if op != "attention_causal"), counts
