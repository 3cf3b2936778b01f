"""The options of commands that call an LLM (`kernelloop agent llm`, `kernelloop ptx propose|prove|time --llm`):
which model, where, with which key (a config file, the KERNELLOOP_LLM_* variables, then these options), or a
recording replayed. `llm_config` turns them into one `LLMConfig`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from ..propose.llm import LLMConfig

LlmConfigOpt = Annotated[Optional[Path], typer.Option(
    "--config", help="LLM config TOML (\\[llm] provider, model, base_url, api_key_env; \\[prices.MODEL]); "
                     "KERNELLOOP_LLM_* variables override it, and the options below override both.")]
LlmProviderOpt = Annotated[Optional[str], typer.Option(
    "--provider", help="LLM provider: openai (any OpenAI-compatible server) or anthropic.")]
LlmModelOpt = Annotated[Optional[str], typer.Option("--model", help="LLM model name, as the server knows it.")]
LlmBaseUrlOpt = Annotated[Optional[str], typer.Option("--base-url", help="LLM endpoint (vLLM, SGLang, Ollama, ...).")]
LlmKeyEnvOpt = Annotated[Optional[str], typer.Option(
    "--api-key-env", help="Name of the environment variable holding the LLM API key (default OPENAI_API_KEY / "
                          "ANTHROPIC_API_KEY); the key itself is never an option.")]
LlmReplayOpt = Annotated[Optional[Path], typer.Option(
    "--replay", help="Replay the calls recorded in this folder (a run's llm/ folder): no network.")]


def llm_config(config: Path | None, provider: str | None = None, model: str | None = None,
               base_url: str | None = None, api_key_env: str | None = None) -> "LLMConfig":
    """The LLM settings: the file (or $KERNELLOOP_LLM_CONFIG), the KERNELLOOP_LLM_* variables, then the options
    given. Raises LLMConfigError on a missing or bad setting."""
    from ..propose.llm import load_llm_config
    return load_llm_config(config, provider=provider, model=model, base_url=base_url, api_key_env=api_key_env)


__all__ = ["LlmBaseUrlOpt", "LlmConfigOpt", "LlmKeyEnvOpt", "LlmModelOpt", "LlmProviderOpt", "LlmReplayOpt",
           "llm_config"]
