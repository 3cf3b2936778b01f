"""The provider layer: one chat request in, one response out, through the official SDKs.

`OpenAIProvider` speaks the Chat Completions API with the `openai` SDK, so any OpenAI-compatible server works
through `base_url` (OpenAI, vLLM, SGLang, Ollama, OpenRouter). `AnthropicProvider` uses the `anthropic` SDK's
Messages API. Transport failures are data, not exceptions: a timeout, a refused connection or an HTTP error
comes back as a `ChatResponse` with `error` set, so it can be recorded, replayed and retried like any reply.
The SDKs' own retries are off: every attempt is one recorded exchange.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ....base.records import content_hash
from .config import LLMConfig


class Message(BaseModel):
    """One turn of the conversation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["user", "assistant"]
    content: str


class ChatRequest(BaseModel):
    """Everything that is sent (the endpoint and the key are not part of it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Literal["openai", "anthropic"]
    model: str
    system: str = Field(description="System prompt.")
    messages: list[Message] = Field(min_length=1)
    max_tokens: int
    temperature: float | None = None
    seed: int | None = None
    json_mode: bool = False

    @property
    def sha(self) -> str:
        """Content address of the request."""
        return content_hash(self.model_dump(mode="json"), 64)


class Usage(BaseModel):
    """Tokens of one call. `input_tokens` counts every input token, cached and cache-written ones included."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class ChatResponse(BaseModel):
    """The reply, or the failure, of one call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = Field(0.0, ge=0, description="Wall time of the request as the client saw it.")
    model: str = Field("", description="The model the server says answered.")
    finish_reason: str = ""
    error: str | None = Field(None, description="None, or 'timeout: ...', 'connection: ...', 'http N: ...'.")

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def sha(self) -> str:
        return content_hash(self.model_dump(mode="json"), 64)


class Provider(Protocol):
    """Sends one request."""

    def complete(self, request: ChatRequest) -> ChatResponse: ...


class OpenAIProvider:
    """Chat Completions through the `openai` SDK (OpenAI or any compatible server via `base_url`)."""

    def __init__(self, config: LLMConfig):
        import openai
        self._openai = openai
        self.config = config
        self.client = openai.OpenAI(api_key=config.api_key(), base_url=config.base_url, timeout=config.timeout_s,
                                    max_retries=0)

    def complete(self, request: ChatRequest) -> ChatResponse:
        cfg, oa = self.config, self._openai
        messages = [{"role": "system", "content": request.system}] + [m.model_dump() for m in request.messages]
        kwargs: dict = {cfg.max_tokens_field: request.max_tokens}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        t0 = time.perf_counter()
        try:
            r = self.client.chat.completions.create(model=request.model, messages=messages, **kwargs)
        except oa.APITimeoutError:
            return ChatResponse(latency_s=time.perf_counter() - t0,
                                error=f"timeout: no reply within {cfg.timeout_s:g} s")
        except oa.APIConnectionError as e:
            return ChatResponse(latency_s=time.perf_counter() - t0, error=f"connection: {e}")
        except oa.APIStatusError as e:
            return ChatResponse(latency_s=time.perf_counter() - t0, error=f"http {e.status_code}: {str(e)[:500]}")
        latency = time.perf_counter() - t0
        choice = r.choices[0] if r.choices else None
        u = r.usage
        details = getattr(u, "prompt_tokens_details", None) if u is not None else None
        usage = Usage(input_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
                      output_tokens=int(getattr(u, "completion_tokens", 0) or 0),
                      cached_tokens=int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0)
        return ChatResponse(text=(choice.message.content or "") if choice else "", usage=usage, latency_s=latency,
                            model=r.model or "", finish_reason=(choice.finish_reason or "") if choice else "")


class AnthropicProvider:
    """The Messages API through the `anthropic` SDK."""

    def __init__(self, config: LLMConfig):
        import anthropic
        self._anthropic = anthropic
        self.config = config
        kwargs = {"base_url": config.base_url} if config.base_url else {}
        self.client = anthropic.Anthropic(api_key=config.api_key(), timeout=config.timeout_s, max_retries=0, **kwargs)
        # Recent SDKs dropped sampling parameters from the Messages API; send temperature only where it exists.
        import inspect
        self._accepts_temperature = "temperature" in inspect.signature(self.client.messages.create).parameters

    def complete(self, request: ChatRequest) -> ChatResponse:
        cfg, an = self.config, self._anthropic
        kwargs: dict = {}
        if request.temperature is not None and self._accepts_temperature:
            kwargs["temperature"] = request.temperature
        t0 = time.perf_counter()
        try:
            r = self.client.messages.create(model=request.model, max_tokens=request.max_tokens, system=request.system,
                                            messages=[m.model_dump() for m in request.messages], **kwargs)
        except an.APITimeoutError:
            return ChatResponse(latency_s=time.perf_counter() - t0,
                                error=f"timeout: no reply within {cfg.timeout_s:g} s")
        except an.APIConnectionError as e:
            return ChatResponse(latency_s=time.perf_counter() - t0, error=f"connection: {e}")
        except an.APIStatusError as e:
            return ChatResponse(latency_s=time.perf_counter() - t0, error=f"http {e.status_code}: {str(e)[:500]}")
        latency = time.perf_counter() - t0
        text = "".join(getattr(b, "text", "") for b in r.content if getattr(b, "type", "") == "text")
        u = r.usage
        read = int(getattr(u, "cache_read_input_tokens", 0) or 0)
        write = int(getattr(u, "cache_creation_input_tokens", 0) or 0)
        usage = Usage(input_tokens=int(u.input_tokens or 0) + read + write, output_tokens=int(u.output_tokens or 0),
                      cached_tokens=read, cache_write_tokens=write)
        return ChatResponse(text=text, usage=usage, latency_s=latency, model=r.model or "",
                            finish_reason=r.stop_reason or "")


def make_provider(config: LLMConfig) -> Provider:
    """The provider the config names."""
    return OpenAIProvider(config) if config.provider == "openai" else AnthropicProvider(config)


__all__ = ["AnthropicProvider", "ChatRequest", "ChatResponse", "Message", "OpenAIProvider", "Provider", "Usage",
           "make_provider"]
