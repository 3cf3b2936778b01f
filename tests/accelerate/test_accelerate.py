"""`kernelloop.accelerate` and `kernelloop accelerate`: one call from a model to a patched, checked model.

One accelerate run of llama-tiny (budget 1, the Triton interpreter) is shared by the module: it is checked for what
it patched and why, trained two steps beside the unpatched model, called again to show that the finished runs are
reused (API and CLI), called with fuse=True (its fused graph beside the patches, the runs reused), and refused where
its folder holds other workloads. gpt2-tiny and a Mistral built from
AutoConfig go the full path once each in test_accelerate_families.py (patched sites by op, verdict, loss,
gradients).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import copy  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from rich.console import Console  # noqa: E402

pytest.importorskip("transformers")

import kernelloop  # noqa: E402
from kernelloop.base.records.measurement import Comparison, Ratio  # noqa: E402
from kernelloop.cli.accelerate import render_fusion  # noqa: E402
from kernelloop.deliver import api  # noqa: E402
from kernelloop.deliver.accelerate import (AccelerateSummary, CardStatus, FolderState, FusionStatus,  # noqa: E402
                                           Verdict, fusion)
from kernelloop.deliver.capture.models import build  # noqa: E402
from kernelloop.deliver.fuse.compose import FusedModel  # noqa: E402
from kernelloop.deliver.integrate.e2e import Tolerance, compare, fresh_inputs, output_logits  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")]

UNMAPPED = """import torch


class Gate(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.softmax(x, dim=0) * 2   # over the first dim: no kernelloop op computes it


def make():
    return Gate(), torch.randn(4, 8)
"""


def kl(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    return subprocess.run([sys.executable, "-m", "kernelloop.cli.app", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """(patched model, its unpatched copy, example, Accelerated, progress lines, out folder)."""
    out = tmp_path_factory.mktemp("accelerate") / "llama"
    model, example = build("llama-tiny")
    plain = copy.deepcopy(model)
    lines: list[str] = []
    result = kernelloop.accelerate(model, example, budget=1, out=out, device="cpu", on_progress=lines.append)
    yield model, plain, example, result, lines, out
    result.applied.undo()   # the patched functions (attention) are global while applied


def test_llama_is_patched_checked_and_every_card_accounted_for(llama):
    model, _, _, result, lines, out = llama
    s = result.summary
    assert s.verdict is Verdict.ACCELERATED and s.outputs_ok and s.delivered is None
    assert s.speed == "not measured (interpreter)" and s.fusion.status is FusionStatus.NOT_TRIED
    assert result.fused is None and not (out / "fuse").exists()
    assert {o.op for o in s.ops} == {"rmsnorm", "gemm_nt", "attention_causal"}
    assert all(not o.reused and not o.error and o.trials >= o.workloads for o in s.ops)
    # every card is patched or says why not; what is patched is what apply replaced and e2e saw run
    for card in s.cards:
        assert card.status is CardStatus.PATCHED or card.detail, card
    patched = {p for c in s.cards if c.status is CardStatus.PATCHED for p in c.paths}
    norms = {f"model.layers.{i}.{n}" for i in (0, 1) for n in ("input_layernorm", "post_attention_layernorm")}
    assert norms | {"model.norm"} <= patched
    assert {r.split(" -> ")[0] for r in s.replaced} >= norms and "model.norm -> rmsnorm" in s.replaced
    assert len(result.applied.report.replaced) == len(s.replaced)
    pkg = result.package   # left patched on the model: a forward reaches the package
    before = pkg["rmsnorm"].hits.total()
    with torch.no_grad():
        model(llama[2][0])
    assert pkg["rmsnorm"].hits.total() == before + 5
    assert result.e2e.patched and all(c.cosine > 0.999 for c in result.e2e.checks)
    # written: the summary, the e2e report, the state; progress said each step
    assert AccelerateSummary.model_validate_json((out / "accelerate.json").read_text()) == s
    assert json.loads((out / "e2e" / "e2e.json").read_text())["outputs_ok"]
    assert all(st.finished for st in FolderState.model_validate_json((out / "state.json").read_text()).ops.values())
    for op in ("rmsnorm", "gemm_nt", "attention_causal"):
        assert any(line.startswith(f"{op}: optimizing") for line in lines)
        assert any(line.startswith(f"{op}: trial 1/") for line in lines)
    assert lines[-1].startswith("done: patched")


def test_the_patched_llama_trains_like_the_unpatched_one(llama):
    """Before the second call: loading the same package again in this process re-registers its torch ops (the ones
    a call under autograd goes through) for the second Package object, whose counts this test would then miss."""
    model, plain, (ids,), result, _, _ = llama
    pkg = result.package
    for k in pkg.kernels.values():
        k.reset_counts()

    def train(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        losses, grads = [], None
        for _ in range(2):
            opt.zero_grad()
            loss = m(ids, labels=ids).loss
            loss.backward()
            grads = grads or {n: None if p.grad is None else p.grad.float().clone() for n, p in m.named_parameters()}
            opt.step()
            losses.append(float(loss.detach()))
        return losses, grads
    want_losses, want_grads = train(plain)
    got_losses, got_grads = train(model)
    assert [n for n, g in got_grads.items() if g is None] == []
    for name, want in want_grads.items():
        got = got_grads[name]
        cos = F.cosine_similarity(got.flatten().double(), want.flatten().double(), dim=0)
        assert cos > 0.99 and (got - want).abs().max() <= 5e-2 * want.abs().max() + 1e-3, name
    assert got_losses == pytest.approx(want_losses, rel=2e-2)
    counts = pkg.counts()["ops"]
    for op in ("rmsnorm", "gemm_nt"):   # the kernels ran forward, the reference's gradient backward
        assert sum(counts[op]["entries"].values()) > 0 and counts[op]["backward_by_reference"] > 0, counts[op]


def _again(llama, lines: list[str]):
    """accelerate called again on a fresh llama-tiny of the same shape, in the fixture's folder; left unpatched."""
    first, out = llama[3], llama[5]
    model, example = build("llama-tiny")
    first.applied.undo()   # the patches of functions (attention) are global while applied
    try:
        again = kernelloop.accelerate(model, example, budget=1, out=out, device="cpu", on_progress=lines.append)
        again.applied.undo()
    finally:
        first.applied.redo()
    return again.summary


def test_a_second_call_reuses_the_finished_runs(llama):
    first = llama[3]
    trials = {o.op: len(api.Run.load(o.run_dir).trials()) for o in first.summary.ops}
    lines: list[str] = []
    s = _again(llama, lines)
    assert all(o.reused for o in s.ops) and s.package_reused, lines
    assert not any(": trial " in line or ": optimizing" in line for line in lines), lines
    assert {o.op: len(api.Run.load(o.run_dir).trials()) for o in s.ops} == trials
    assert s.verdict is Verdict.ACCELERATED and s.replaced == first.summary.replaced
    assert [c.status for c in s.cards] == [c.status for c in first.summary.cards]


def test_an_interrupted_run_is_continued(llama):
    """A run the state does not mark finished (as after Ctrl-C) is resumed, not started anew; its budget is spent,
    so it ends with the trials it had, and the package made from them is reused."""
    out = llama[5]
    state = FolderState.model_validate_json((out / "state.json").read_text())
    ops = {**state.ops, "rmsnorm": state.ops["rmsnorm"].model_copy(update={"finished": False})}
    (out / "state.json").write_text(state.model_copy(update={"ops": ops}).model_dump_json())
    trials = len(api.Run.load(out / "runs" / "rmsnorm").trials())
    lines: list[str] = []
    s = _again(llama, lines)
    (rms,) = [o for o in s.ops if o.op == "rmsnorm"]
    assert rms.resumed and not rms.reused and any(line.startswith("rmsnorm: continuing") for line in lines), lines
    assert all(o.reused for o in s.ops if o.op != "rmsnorm") and s.package_reused
    assert len(api.Run.load(out / "runs" / "rmsnorm").trials()) == trials
    assert FolderState.model_validate_json((out / "state.json").read_text()).ops["rmsnorm"].finished


def test_the_cli_reuses_the_folder_and_exits_0(llama):
    out = llama[5]
    p = kl("accelerate", "llama-tiny", "--device", "cpu", "--budget", "1", "--out", str(out), "--json", cwd=out.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    s = AccelerateSummary.model_validate_json(p.stdout)
    assert all(o.reused for o in s.ops) and s.verdict is Verdict.ACCELERATED
    assert "rmsnorm: reusing the finished run" in p.stderr and "done: patched" in p.stderr


def test_a_folder_with_runs_of_other_workloads_is_refused_before_any_run(llama):
    out = llama[5]
    before = (out / "state.json").read_text()
    model, example = build("llama-tiny", seq=4)   # other shapes: other workloads for every op
    with pytest.raises(api.UsageError, match="holds a run of other workloads"):
        kernelloop.accelerate(model, example, budget=1, out=out, device="cpu")
    assert (out / "state.json").read_text() == before


def test_a_folder_that_is_not_an_accelerate_folder_is_refused(tmp_path):
    (tmp_path / "runs" / "rmsnorm").mkdir(parents=True)
    (tmp_path / "runs" / "rmsnorm" / "notes.txt").write_text("a kernel engineer's run")
    model, example = build("llama-tiny")
    with pytest.raises(api.UsageError, match="not an accelerate folder"):
        kernelloop.accelerate(model, example, budget=1, out=tmp_path / "runs", device="cpu")
    with pytest.raises(api.UsageError, match="not a list of examples|of examples"):
        kernelloop.accelerate(model, [example, example], budget=1, out=tmp_path / "new", device="cpu")


def test_the_cli_exit_codes_nothing_mapped_and_a_foreign_folder(tmp_path):
    (tmp_path / "gate.py").write_text(UNMAPPED)
    p = kl("accelerate", "gate.py:make", "--device", "cpu", "--budget", "1", "--out", "gate", "--json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]   # ran to the end: nothing to patch
    s = AccelerateSummary.model_validate_json(p.stdout)
    assert s.verdict is Verdict.NOTHING_PATCHED and s.package is None and s.ops == []
    ((card,),) = [s.cards]
    assert card.status is CardStatus.NOT_MAPPED and card.detail == "softmax over dim 0, not the last"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    p = kl("accelerate", "gate.py:make", "--device", "cpu", "--out", "other", cwd=tmp_path)
    assert p.returncode == 2 and "not an accelerate folder" in p.stderr, p.stderr[-3000:]


@pytest.fixture(scope="module")
def fused(llama):
    """(model, example, Accelerated, progress lines): accelerate with fuse=True (the residual add + RMSNorm family)
    on a fresh llama-tiny in the shared folder, its finished runs reused; the model left unpatched (patch=False)."""
    first, out = llama[3], llama[5]
    model, example = build("llama-tiny")
    lines: list[str] = []
    first.applied.undo()   # the patches of functions (attention) are global while applied: export must not see them
    try:
        result = kernelloop.accelerate(model, example, budget=1, out=out, device="cpu", patch=False, fuse=True,
                                       fuse_families=["residual_add_norm"], on_progress=lines.append)
    finally:
        first.applied.redo()
    return model, example, result, lines


def test_fuse_returns_llamas_fused_graph_matching_the_original_and_names_it(fused):
    model, example, result, lines = fused
    s, f = result.summary, result.summary.fusion
    assert f.status is FusionStatus.VERIFIED and f.speed == "verified, speed not measured (interpreter)"
    assert f.vs_patched is None and f.outputs_ok is True and "inference only" in f.detail
    # residual add + RMSNorm: 3 returning both sums, 1 feeding only the final norm (as tests/fuse counts them)
    assert {p.family for p in f.patterns} == {"residual_add_norm"} and f.reasons == []
    assert sum(p.replaced for p in f.patterns) == 4 and sorted(f.fused) == sorted(p.op for p in f.patterns)
    assert isinstance(result.fused, FusedModel) and result.fused.model is model
    (graph,) = result.fused.graphs.values()
    # 5 RMSNorms: 4 composed into fused ops, the first layer's input norm (no residual add before it) left alone
    rsqrt = [n for n in graph.graph.nodes if n.target is torch.ops.aten.rsqrt.default]
    assert len(rsqrt) == 1
    tol = Tolerance()
    with torch.no_grad():
        for seed in (5, 6):
            args = fresh_inputs(example, model, seed)
            check = compare(output_logits(model(*args)), output_logits(result.fused(*args)), seed, tol)
            assert check.passed and check.cosine > 0.9999, check
    assert not result.fused.fallbacks                     # every call ran the fused graph
    # the patches' own result is what it is without fusion; the summary on disk carries the typed outcome
    assert s.verdict is Verdict.ACCELERATED and s.replaced and result.applied is None
    assert all(o.reused for o in s.ops) and s.package_reused
    assert AccelerateSummary.model_validate_json(open(f"{s.out}/accelerate.json").read()).fusion == f
    assert any(line.startswith("fuse: verified") for line in lines)


def test_the_cli_prints_the_fused_patterns(fused):
    f = fused[2].summary.fusion
    buf = io.StringIO()
    render_fusion(f, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "fusion: verified, speed not measured (interpreter)" in text
    for p in f.patterns:
        assert f"{p.op} (residual_add_norm, aten.add.Tensor + " in text and f"{p.replaced} site(s) fused" in text


def test_on_cuda_fusion_pays_only_when_faster_than_the_patched_model(fused, monkeypatch):
    """The timing is replaced (no GPU here): the model must be patched while timed and unpatched after (patch=False),
    and only a FASTER ratio is 'pays'."""
    model, example, result, _ = fused
    seen = []

    def timed(m, fused, ex, *, baseline):
        seen.append((baseline, "forward" in m.model.norm.__dict__))
        return Ratio(baseline=baseline, speedup=verdict_speed[0], ci_low=verdict_speed[0] - .01,
                     ci_high=verdict_speed[0] + .01, verdict=verdict_speed[1])
    monkeypatch.setattr(fusion, "time_fused", timed)
    f = result.summary.fusion
    for verdict_speed, want in (((1.2, Comparison.FASTER), FusionStatus.PAYS),
                                ((1.0, Comparison.SAME), FusionStatus.DOES_NOT_PAY),
                                ((0.8, Comparison.SLOWER), FusionStatus.DOES_NOT_PAY)):
        got = fusion.against_patched(f, result.fused, model, result.package, example, "cuda", False, lambda t: None)
        assert got.status is want and got.vs_patched.verdict is verdict_speed[1]
        assert got.speed.endswith(f"over the patched model ({verdict_speed[1].value})")
    assert seen == [("patched", True)] * 3 and "forward" not in model.model.norm.__dict__
    assert fusion.against_patched(f, result.fused, model, result.package, example, "interpret", False,
                                  lambda t: None) == f   # the interpreter: no speed claim
