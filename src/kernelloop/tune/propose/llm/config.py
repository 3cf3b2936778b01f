"""Which model, where, with which key, at what price: read from a config file and the environment, never code.

A config file (TOML) holds an `[llm]` table and optional `[prices."MODEL"]` tables:

    [llm]
    provider = "openai"                 # or "anthropic"
    model = "qwen2.5-coder-32b"
    base_url = "http://127.0.0.1:8000/v1"   # any OpenAI-compatible server: vLLM, SGLang, Ollama, OpenRouter
    api_key_env = "VLLM_API_KEY"        # the *name* of the variable holding the key; the key is never stored
    timeout_s = 120

    [prices."qwen2.5-coder-32b"]        # USD per million tokens
    input = 0.0
    output = 0.0

Environment variables override the file: KERNELLOOP_LLM_PROVIDER, KERNELLOOP_LLM_MODEL, KERNELLOOP_LLM_BASE_URL,
KERNELLOOP_LLM_API_KEY_ENV, KERNELLOOP_LLM_TIMEOUT_S, KERNELLOOP_LLM_MAX_TOKENS; KERNELLOOP_LLM_CONFIG names the
file when no path is given.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ....base.records.llm import LLMSettings

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
ENV = {"provider": "KERNELLOOP_LLM_PROVIDER", "model": "KERNELLOOP_LLM_MODEL", "base_url": "KERNELLOOP_LLM_BASE_URL",
       "api_key_env": "KERNELLOOP_LLM_API_KEY_ENV", "timeout_s": "KERNELLOOP_LLM_TIMEOUT_S",
       "max_tokens": "KERNELLOOP_LLM_MAX_TOKENS"}


class LLMConfigError(ValueError):
    """A missing or malformed LLM setting; the message names the file or variable."""


class Price(BaseModel):
    """USD per million tokens. Cached input defaults to the input price; cache writes too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, description="Uncached input tokens.")
    output: float = Field(ge=0, description="Output tokens.")
    cached_input: float | None = Field(None, ge=0, description="Input tokens served from the provider's cache.")
    cache_write: float | None = Field(None, ge=0, description="Input tokens written to the cache (Anthropic).")

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0, cache_write_tokens: int = 0) -> float:
        """USD of one call; `input_tokens` counts every input token, cached and cache-written ones included."""
        plain = max(0, input_tokens - cached_tokens - cache_write_tokens)
        cached = self.cached_input if self.cached_input is not None else self.input
        write = self.cache_write if self.cache_write is not None else self.input
        return (plain * self.input + cached_tokens * cached + cache_write_tokens * write
                + output_tokens * self.output) / 1e6


class LLMConfig(LLMSettings):
    """Provider, model, endpoint and request settings of the LLM proposer (the archived `LLMSettings`) and the
    prices of its models."""

    prices: dict[str, Price] = Field(default_factory=dict, description="Model -> price per million tokens.")

    def api_key(self, env: Mapping[str, str] | None = None) -> str:
        """The key from the environment. A local server (base_url given) may run without one."""
        env = os.environ if env is None else env
        name = self.api_key_env or DEFAULT_KEY_ENV[self.provider]
        key = env.get(name, "")
        if key:
            return key
        if self.base_url:
            return "EMPTY"  # vLLM / SGLang / Ollama accept any key when started without one
        raise LLMConfigError(f"no API key: set the environment variable {name} (or api_key_env in the config)")

    def price(self, model: str | None = None) -> Price | None:
        """The configured price of a model (the configured one by default); None when unknown."""
        return self.prices.get(model or self.model)

    def public(self) -> LLMSettings:
        """What may be archived: everything but the prices (the key is never in the config anyway)."""
        return LLMSettings.model_validate(self.model_dump(exclude={"prices"}))


def load_llm_config(path: str | Path | None = None, env: Mapping[str, str] | None = None,
                    **overrides) -> LLMConfig:
    """The config from `path` (or $KERNELLOOP_LLM_CONFIG), the KERNELLOOP_LLM_* variables, then `overrides`."""
    env = os.environ if env is None else env
    path = path or env.get("KERNELLOOP_LLM_CONFIG")
    data: dict = {}
    prices: dict = {}
    if path:
        p = Path(path)
        try:
            doc = tomllib.loads(p.read_text())
        except FileNotFoundError:
            raise LLMConfigError(f"{p}: file not found") from None
        except tomllib.TOMLDecodeError as e:
            raise LLMConfigError(f"{p}: not valid TOML: {e}") from None
        data = dict(doc.get("llm", {}))
        prices = dict(doc.get("prices", {}))
    for field, var in ENV.items():
        if env.get(var):
            data[field] = env[var]
    data.update({k: v for k, v in overrides.items() if v is not None})
    if prices:
        data["prices"] = {**prices, **data.get("prices", {})}
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as e:
        where = str(path) if path else "environment"
        first = e.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise LLMConfigError(f"{where}: llm.{field}: {first['msg']}") from None


__all__ = ["LLMConfig", "LLMConfigError", "Price", "load_llm_config"]
