"""The LLM as a PTX-level proposer, against a scripted server: the prompt carries the hot window, its SASS and where
the time goes; an answer ptxas refuses goes back to the model with ptxas's error verbatim; a valid answer becomes a
PtxCandidate confined to the window."""

import json
from pathlib import Path

from llm_script import ScriptedLLMServer
from kernelloop.tune.propose.llm import Cassette, LLMClient, LLMConfig, OpenAIProvider
from kernelloop.tune.propose.llm.ptx import LlmPtxProposer, load_ptx_prompts
from kernelloop.tune.ptx.checks import check_edit
from kernelloop.tune.ptx.patch import edited_ptx
from kernelloop.tune.ptx.recover import from_ptx
from kernelloop.tune.ptx.windows import hot_windows

PTX = Path(__file__).parents[2] / "fixtures" / "ptx" / "scale_rows.ptx"


def _answer(kernel, window, old: str, new: str) -> str:
    lines = kernel.ptx.split("\n")[window.start:window.end + 1]
    body = "\n".join(lines).replace(old, new)
    return json.dumps({"window": window.label, "ptx": body, "hypothesis": "L1 hit rate of w up: latency down 3 %"})


def test_the_llm_edits_a_window_and_hears_ptxas_verbatim(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    k = from_ptx(PTX.read_text(), origin="ptx", metadata={"shared": 0})
    windows = hot_windows(k)
    w = windows[0]
    bad = _answer(k, w, "ld.global.b32 \t%f3", "ld.global.nonesuch.b32 \t%f3")
    good = _answer(k, w, "ld.global.b32 \t%f3", "ld.global.L1::evict_last.b32 \t%f3")
    with ScriptedLLMServer([{"content": bad}, {"content": good}]) as server:
        cfg = LLMConfig(provider="openai", model="m", base_url=server.base_url, timeout_s=5.0, retries=0)
        client = LLMClient(cfg, Cassette(tmp_path / "llm", "record"), OpenAIProvider(cfg))
        proposer = LlmPtxProposer(client)
        (cand,) = proposer.propose(k, windows, parent="c-parent", op="demo")
        first, second = (r["body"]["messages"] for r in server.requests)
    prompt = first[-1]["content"]
    assert w.label in prompt and "fma.rn.f32" in prompt and "LDG" in prompt and "estimated issue slots" in prompt
    repair = second[-1]["content"]
    assert "ptxas" in repair and "nonesuch" in repair and "kernel.ptx" in repair   # ptxas's stderr, verbatim
    assert cand.rule == "llm" and cand.proposer == f"llm:m:{load_ptx_prompts().tag}" and not cand.reorders_fp
    assert cand.parent_candidate_id == "c-parent" and all(w.start <= h.start <= w.end for h in cand.hunks)
    text = edited_ptx(cand, k.ptx)
    assert "ld.global.L1::evict_last.b32" in text and check_edit(k.ptx, text, metadata=k.metadata) == []
    assert proposer.errors == []


def test_the_prompt_carries_the_profile(tmp_path, monkeypatch):
    """Windows weighed by a source page: the prompt names the column and shows each SASS instruction's samples."""
    from kernelloop.tune.profile.source_page import read_source_csv
    from kernelloop.tune.ptx.windows import profile_samples
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    k = from_ptx(PTX.read_text(), origin="ptx", metadata={"shared": 0})
    profile = profile_samples(k, read_source_csv(PTX.parent / "handwritten-ncu-source-page.csv"))
    windows = hot_windows(k, profile)
    cfg = LLMConfig(provider="openai", model="m", base_url="http://127.0.0.1:9/v1")
    proposer = LlmPtxProposer(LLMClient(cfg, Cassette(tmp_path / "llm", "record"), OpenAIProvider(cfg)))
    _, user = proposer.prompt(k, windows[0], windows[1:], profile)
    assert "Warp Stall Sampling (All Samples) (Nsight Compute's source counters" in user and "96%" in user
    assert "@!P2 LDG.E R15, desc[UR4][R22.64]   # 40 Warp Stall Sampling (All Samples)" in user
    assert "estimated issue slots" not in user


def test_another_model_in_the_same_recording_folder_is_asked_anew(tmp_path, monkeypatch):
    """A folder's recorded answers belong to the model that gave them: asking another model calls it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    k = from_ptx(PTX.read_text(), origin="ptx", metadata={"shared": 0})
    windows = hot_windows(k)
    good = _answer(k, windows[0], "ld.global.b32 \t%f3", "ld.global.L1::evict_last.b32 \t%f3")
    for model, expected_calls in (("m", 1), ("m", 0), ("other", 1)):
        with ScriptedLLMServer([{"content": good}]) as server:
            cfg = LLMConfig(provider="openai", model=model, base_url=server.base_url, timeout_s=5.0, retries=0)
            client = LLMClient(cfg, Cassette(tmp_path / "llm", "record"), OpenAIProvider(cfg))
            (cand,) = LlmPtxProposer(client, windows=1).propose(k, windows, parent="c-parent", op="demo")
            assert len(server.requests) == expected_calls, model
        assert cand.proposer.startswith(f"llm:{model}:")
