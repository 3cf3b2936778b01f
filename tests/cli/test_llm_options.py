"""The LLM options shared by `kernelloop agent llm` and `kernelloop ptx ... --llm`: the file, then the
KERNELLOOP_LLM_* variables, then the options."""

import pytest

from kernelloop.cli.llm_options import llm_config
from kernelloop.propose.llm import LLMConfigError


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
