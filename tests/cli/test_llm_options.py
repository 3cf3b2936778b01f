"""The LLM options shared by `kernelloop agent llm` and `kernelloop ptx ... --llm`: the file, then the
KERNELLOOP_LLM_* variables, then the options."""

import pytest

from kernelloop.cli.llm_options import llm_config
from kernelloop.tune.propose.llm import LLMConfigError


def test_options_override_the_file_and_the_environment(tmp_path, monkeypatch):
    for var in ("KERNELLOOP_LLM_CONFIG", "KERNELLOOP_LLM_PROVIDER", "KERNELLOOP_LLM_BASE_URL",
                "KERNELLOOP_LLM_API_KEY_ENV"):
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "llm.toml").write_text('[llm]\nprovider = "openai"\nmodel = "from-file"\nbase_url = "http://a/v1"\n')
    monkeypatch.setenv("KERNELLOOP_LLM_MODEL", "from-env")
    cfg = llm_config(tmp_path / "llm.toml")
    assert (cfg.provider, cfg.model, cfg.base_url) == ("openai", "from-env", "http://a/v1")
    cfg = llm_config(tmp_path / "llm.toml", provider="anthropic", model="opt", base_url="http://b",
                     api_key_env="MY_KEY")
    assert (cfg.provider, cfg.model, cfg.base_url, cfg.api_key_env) == ("anthropic", "opt", "http://b", "MY_KEY")
    with pytest.raises(LLMConfigError, match="llm.provider"):
        llm_config(None, provider="nope", model="m")


def _no_llm_environment(monkeypatch):
    for var in ("KERNELLOOP_LLM_CONFIG", "KERNELLOOP_LLM_PROVIDER", "KERNELLOOP_LLM_MODEL", "KERNELLOOP_LLM_BASE_URL",
                "KERNELLOOP_LLM_API_KEY_ENV"):
        monkeypatch.delenv(var, raising=False)


def _recording(folder, *models):
    from kernelloop.tune.propose.llm import Cassette, ChatRequest, ChatResponse
    from kernelloop.tune.propose.llm.providers import Message
    cassette = Cassette(folder, "record")
    for i, (provider, model) in enumerate(models):
        request = ChatRequest(provider=provider, model=model, system="s", messages=[Message(role="user", content="u")],
                              max_tokens=16)
        cassette.record(f"k{i}", 0, request, ChatResponse(text="t"))
    return folder


def test_no_model_configured_says_how_to_give_one(monkeypatch):
    _no_llm_environment(monkeypatch)
    with pytest.raises(LLMConfigError) as e:
        llm_config(None)
    said = str(e.value)
    assert said.startswith("no LLM model is configured") and "Field required" not in said
    assert all(way in said for way in ("--provider", "--model", "KERNELLOOP_LLM_MODEL", "--config"))


def test_a_replay_takes_the_provider_and_model_from_the_recording(tmp_path, monkeypatch):
    _no_llm_environment(monkeypatch)
    one = _recording(tmp_path / "one", ("anthropic", "recorded-model"))
    cfg = llm_config(None, replay=one)
    assert (cfg.provider, cfg.model) == ("anthropic", "recorded-model")
    cfg = llm_config(None, provider="openai", model="named", replay=one)     # the options still win
    assert (cfg.provider, cfg.model) == ("openai", "named")
    two = _recording(tmp_path / "two", ("openai", "a"), ("openai", "b"))
    with pytest.raises(LLMConfigError, match="several models .*openai:a, openai:b.*--provider and --model"):
        llm_config(None, replay=two)
    (tmp_path / "empty").mkdir()
    with pytest.raises(LLMConfigError, match="no recording at"):
        llm_config(None, replay=tmp_path / "empty")
