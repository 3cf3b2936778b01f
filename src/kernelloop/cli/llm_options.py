"""The options of commands that call an LLM (`kernelloop agent llm`, `kernelloop ptx propose|prove|time --llm`):
which model, where, with which key (a config file, the KERNELLOOP_LLM_* variables, then these options), or a
recording replayed. `llm_config` turns them into one `LLMConfig`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

if TYPE_CHECKING:
    from ..tune.propose.llm import LLMConfig

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
    "--replay", help="Replay the calls recorded in this folder (a run's llm/ folder): no network. The provider "
                     "and model come from the recording unless --provider/--model name them.")]
NO_MODEL = ("no LLM model is configured: give --provider and --model (with --base-url for a local server), the "
            "KERNELLOOP_LLM_PROVIDER and KERNELLOOP_LLM_MODEL variables, or --config FILE ([llm] provider, model)")


def llm_config(config: Path | None, provider: str | None = None, model: str | None = None,
               base_url: str | None = None, api_key_env: str | None = None,
               replay: Path | None = None) -> "LLMConfig":
    """The LLM settings: the file (or $KERNELLOOP_LLM_CONFIG), the KERNELLOOP_LLM_* variables, then the options
    given; with `replay` (a recording), the provider and model its calls were made with unless the options name
    them. Raises LLMConfigError on a missing or bad setting (NO_MODEL when no provider or model is given)."""
    from ..tune.propose.llm import LLMConfigError, load_llm_config
    if replay is not None:
        recorded = _recorded_models(replay)
        if len(recorded) > 1 and not (provider and model):
            raise LLMConfigError(f"--replay {replay}: the recording holds calls to several models "
                                 f"({', '.join(f'{p}:{m}' for p, m in sorted(recorded))}): name one with --provider "
                                 f"and --model")
        if len(recorded) == 1:
            (rec_provider, rec_model), = recorded
            provider, model = provider or rec_provider, model or rec_model
    try:
        return load_llm_config(config, provider=provider, model=model, base_url=base_url, api_key_env=api_key_env)
    except LLMConfigError as e:
        if str(e).endswith((": llm.provider: Field required", ": llm.model: Field required")):
            raise LLMConfigError(NO_MODEL) from None
        raise


def _recorded_models(folder: Path) -> set[tuple[str, str]]:
    """The (provider, model) pairs of the calls recorded in `folder` (a cassette); LLMConfigError when there is no
    recording there."""
    from ..tune.propose.llm import Cassette, LLMConfigError
    try:
        exchanges = Cassette(folder, "replay").exchanges()
    except (OSError, ValueError) as e:
        raise LLMConfigError(f"--replay {folder}: {e}") from None
    return {(e["request_body"]["provider"], e["request_body"]["model"]) for e in exchanges}


__all__ = ["NO_MODEL", "LlmBaseUrlOpt", "LlmConfigOpt", "LlmKeyEnvOpt", "LlmModelOpt", "LlmProviderOpt", "LlmReplayOpt",
           "llm_config"]
