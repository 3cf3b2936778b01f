"""Providers through real HTTP (the official `openai` and `anthropic` SDKs against the scripted server), the
cassette (content addressing, occurrences, replay without a provider), prompts and config."""

import json

import pytest

from llm_script import ScriptedLLMServer
from kernelloop.tune.propose.llm import (AnthropicProvider, Cassette, ChatRequest, LLMClient, LLMConfig, LLMConfigError,
                                    Message, OpenAIProvider, Price, ReplayMiss, load_llm_config, load_prompts)


def request(client, text="hello"):
    return client.request("system prompt", [Message(role="user", content=text)])


def chat(cfg):
    return ChatRequest(provider=cfg.provider, model=cfg.model, system="system prompt",
                       messages=[Message(role="user", content="hello")], max_tokens=cfg.max_tokens,
                       temperature=cfg.temperature, seed=cfg.seed, json_mode=cfg.json_mode)


def test_openai_provider_usage_cached_tokens_and_errors():
    script = [{"content": "hi", "usage": {"input": 1200, "output": 30, "cached": 1000}},
              {"status": 500, "content": "boom"}, {"content": "late", "delay": 1.5}]
    with ScriptedLLMServer(script) as server:
        cfg = LLMConfig(provider="openai", model="m1", base_url=server.base_url, timeout_s=0.5, seed=7,
                        max_tokens=99, max_tokens_field="max_completion_tokens", json_mode=True)
        p = OpenAIProvider(cfg)
        ok = p.complete(chat(cfg))
        assert ok.ok and ok.text == "hi" and ok.model == "m1" and ok.finish_reason == "stop"
        assert (ok.usage.input_tokens, ok.usage.output_tokens, ok.usage.cached_tokens) == (1200, 30, 1000)
        body = server.requests[0]["body"]
        assert body["messages"][0] == {"role": "system", "content": "system prompt"}
        assert body["max_completion_tokens"] == 99 and body["seed"] == 7 and body["temperature"] == 0.0
        assert body["response_format"] == {"type": "json_object"}
        err = p.complete(chat(cfg))
        assert err.error.startswith("http 500")
        slow = p.complete(chat(cfg))
        assert slow.error.startswith("timeout") and slow.text == ""


def test_anthropic_provider_counts_cache_reads_as_input():
    with ScriptedLLMServer([{"content": "bonjour", "usage": {"input": 900, "output": 12, "cached": 600}}]) as server:
        cfg = LLMConfig(provider="anthropic", model="claude-x", base_url=server.anthropic_url, api_key_env="NOPE_KEY")
        r = AnthropicProvider(cfg).complete(chat(cfg))
    assert r.ok and r.text == "bonjour" and r.finish_reason == "end_turn"
    assert (r.usage.input_tokens, r.usage.cached_tokens, r.usage.output_tokens) == (900, 600, 12)
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/messages" and body["system"] == "system prompt"
    assert body["messages"] == [{"role": "user", "content": "hello"}]


def test_cassette_records_content_addressed_and_replays_without_network(tmp_path):
    cfg = LLMConfig(provider="openai", model="m1", base_url="http://127.0.0.1:9/v1",
                    prices={"m1": Price(input=3.0, output=15.0, cached_input=0.3)})
    with ScriptedLLMServer([{"content": "one", "usage": {"input": 100, "output": 10, "cached": 50}},
                            {"content": "two"}]) as server:
        live = LLMClient(cfg.model_copy(update={"base_url": server.base_url}), Cassette(tmp_path, "record"),
                         OpenAIProvider(cfg.model_copy(update={"base_url": server.base_url})))
        a = live.call(request(live), "state-1")
        b = live.call(request(live), "state-1")     # the same state again (a retry): occurrence 1
    assert (a.occurrence, b.occurrence, a.response.text, b.response.text) == (0, 1, "one", "two")
    assert a.usd == pytest.approx((50 * 3.0 + 50 * 0.3 + 10 * 15.0) / 1e6)
    assert a.request_sha == request(live).sha, "requests are stored under their content hash"
    assert json.loads((tmp_path / "objects" / f"{a.response_sha}.json").read_text())["text"] == "one"
    lines = (tmp_path / "exchanges.jsonl").read_text().splitlines()
    assert [json.loads(x)["occurrence"] for x in lines] == [0, 1]

    replay = LLMClient(cfg, Cassette(tmp_path, "replay"))
    r0 = replay.call(request(replay), "state-1")
    r1 = replay.call(request(replay, "a different prompt"), "state-1")
    assert (r0.response, r1.response) == (a.response, b.response) and r0.replayed
    assert r0.exact and not r1.exact, "exact says whether the request was byte-identical"
    with pytest.raises(ReplayMiss):
        replay.call(request(replay), "state-1")
    with pytest.raises(ValueError, match="must not have a provider"):
        LLMClient(cfg, Cassette(tmp_path, "replay"), provider=object())
    with pytest.raises(FileNotFoundError):
        Cassette(tmp_path / "empty", "replay")
    (tmp_path / "objects" / f"{a.response_sha}.json").write_text('{"text": "tampered"}')
    with pytest.raises(ValueError, match="corrupt"):
        LLMClient(cfg, Cassette(tmp_path, "replay")).call(request(live), "state-1")


def test_record_mode_reuses_recorded_calls_on_resume(tmp_path):
    cfg = LLMConfig(provider="openai", model="m1", base_url="http://127.0.0.1:9/v1")
    with ScriptedLLMServer([{"content": "first"}, {"content": "second"}]) as server:
        url = {"base_url": server.base_url}
        c1 = LLMClient(cfg, Cassette(tmp_path, "record"), OpenAIProvider(cfg.model_copy(update=url)))
        c1.call(request(c1), "k")
        c2 = LLMClient(cfg, Cassette(tmp_path, "record"), OpenAIProvider(cfg.model_copy(update=url)))
        again, new = c2.call(request(c2), "k"), c2.call(request(c2), "k")
    assert again.response.text == "first" and again.replayed and len(server.requests) == 2
    assert new.response.text == "second" and not new.replayed


def test_prompt_set_hash_and_placeholders(tmp_path):
    p = load_prompts()
    assert set(p.templates) >= {"system", "planner", "coder", "debugger", "repair"}
    assert p.tag == f"v1@{p.hash[:12]}"
    with pytest.raises(KeyError, match="needs a value for 'error'"):
        p.render("repair")
    assert "boom" in p.render("repair", error="boom")
    copy = tmp_path / "v1"
    copy.mkdir()
    for name, text in p.templates.items():
        (copy / f"{name}.md").write_text(text)
    assert load_prompts("v1", tmp_path).hash == p.hash
    (copy / "coder.md").write_text(p.templates["coder"] + "\nOne more line.\n")
    assert load_prompts("v1", tmp_path).hash != p.hash
    (copy / "planner.md").unlink()
    with pytest.raises(FileNotFoundError, match="planner.md"):
        load_prompts("v1", tmp_path)


def test_config_from_file_and_environment(tmp_path):
    f = tmp_path / "llm.toml"
    f.write_text('[llm]\nprovider = "openai"\nmodel = "qwen"\nbase_url = "http://h:8000/v1"\napi_key_env = "MY_KEY"\n'
                 '[prices.qwen]\ninput = 0.5\noutput = 1.5\n')
    cfg = load_llm_config(f, env={"KERNELLOOP_LLM_MODEL": "qwen", "KERNELLOOP_LLM_TIMEOUT_S": "30"})
    assert (cfg.model, cfg.timeout_s, cfg.price().output) == ("qwen", 30.0, 1.5)
    assert cfg.api_key({"MY_KEY": "sk-1"}) == "sk-1"
    assert cfg.api_key({}) == "EMPTY", "a local server runs without a key"
    assert "prices" not in cfg.public().model_dump() and "sk-1" not in cfg.public().model_dump_json()
    env = load_llm_config(None, env={"KERNELLOOP_LLM_PROVIDER": "anthropic", "KERNELLOOP_LLM_MODEL": "claude"})
    assert env.provider == "anthropic" and env.price() is None
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        env.api_key({})
    with pytest.raises(LLMConfigError, match="llm.provider"):
        load_llm_config(None, env={"KERNELLOOP_LLM_PROVIDER": "bard", "KERNELLOOP_LLM_MODEL": "x"})
    with pytest.raises(LLMConfigError, match="file not found"):
        load_llm_config(tmp_path / "missing.toml", env={})
