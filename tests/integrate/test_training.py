"""A patched model trains as the unpatched one does: every packaged op has a backward (the reference's gradient,
recomputed on the saved inputs), and a norm's eps changed after apply reaches the guard at call time.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import copy  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import kernelloop  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")


class TinyLM(nn.Module):
    """embedding -> LayerNorm -> RMSNorm -> softmax gate -> Linear (no bias): every op of the package, and an embedding
    whose gradient must flow back through all of them."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(32, 64)
        self.ln = nn.LayerNorm(64)
        self.rms = nn.RMSNorm(64, eps=1e-6)
        self.head = nn.Linear(64, 32, bias=False)

    def forward(self, ids, labels):
        h = self.rms(self.ln(self.emb(ids)))
        h = h * F.softmax(h, dim=-1) * 64          # a softmax gate over the 64 features
        logits = self.head(h).float()
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def _train(model, batches, steps):
    """(losses, the first step's gradients by name) of `steps` SGD steps."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses, first = [], None
    for ids, labels in batches[:steps]:
        opt.zero_grad()
        loss = model(ids, labels)
        loss.backward()
        if first is None:
            first = {n: None if p.grad is None else p.grad.detach().float().clone()
                     for n, p in model.named_parameters()}
        opt.step()
        losses.append(float(loss.detach()))
    return losses, first


def test_a_patched_model_trains_like_the_unpatched_one(package_dir):
    pkg = kernelloop.load_package(package_dir)
    torch.manual_seed(0)
    base = TinyLM().half()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, 32, (2, 6), generator=g), torch.randint(0, 32, (2, 6), generator=g))] * 4
    plain = copy.deepcopy(base)
    want_losses, want_grads = _train(plain, batches, 4)
    patched = copy.deepcopy(base)
    with kernelloop.apply(patched, pkg) as applied:
        assert {s.path for s in applied.report.replaced} >= {"ln", "rms", "head"}
        got_losses, got_grads = _train(patched, batches, 4)
    counts = pkg.counts()["ops"]
    for op in ("layernorm", "rmsnorm", "gemm_nt", "softmax"):   # the kernels ran forward, the reference backward
        assert sum(counts[op]["entries"].values()) == 4 and counts[op]["backward_by_reference"] == 4, counts[op]
    assert all(g is not None for g in got_grads.values()), [n for n, g in got_grads.items() if g is None]
    for name, want in want_grads.items():
        got = got_grads[name]
        cos = F.cosine_similarity(got.flatten().double(), want.flatten().double(), dim=0)
        assert cos > 0.999 and (got - want).abs().max() <= 2e-2 * want.abs().max() + 1e-3, name
    assert got_losses == pytest.approx(want_losses, rel=2e-2)
    assert want_losses[-1] < want_losses[0] / 2   # it did train (one batch, four steps)
    for p_got, p_want in zip(patched.parameters(), plain.parameters()):
        assert (p_got.float() - p_want.float()).abs().max() < 2e-2


@pytest.mark.parametrize("module, attr", [("rms", "eps"), ("ln", "eps")])
def test_an_eps_changed_after_apply_runs_the_reference(package_dir, module, attr):
    pkg = kernelloop.load_package(package_dir)
    torch.manual_seed(0)
    m = TinyLM().half()
    ids = torch.randint(0, 32, (2, 6))
    x = m.emb(ids).detach()
    norm = getattr(m, module)
    op = "rmsnorm" if module == "rms" else "layernorm"
    with torch.no_grad(), kernelloop.apply(m, pkg):
        norm(x)
        assert pkg[op].hits.total() == 1 and not pkg[op].fallbacks
        setattr(norm, attr, 0.5)
        got = norm(x)
    with torch.no_grad():
        want = norm(x)            # unpatched, eps = 0.5
    assert (got.float() - want.float()).abs().max() < 1e-2
    assert pkg[op].hits.total() == 1
    assert list(pkg[op].fallbacks) == [f"scalar eps=0.5 differs from the verified {1e-6 if module == 'rms' else 1e-5}"]
