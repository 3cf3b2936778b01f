"""The LLM proposer: providers (openai / anthropic SDKs), versioned prompts, record/replay, roles, costs.

    config   = load_llm_config("llm.toml")               # model, endpoint, key variable, prices
    run_id   = kernelloop.tune.loop.llm.run_llm(bundle, workloads, options, run_dir, config, mode="record")
    # offline, bit-for-bit the same answers:
    run_llm(bundle, workloads, options, run_dir2, config, mode="replay", cassette_dir=run_dir / "llm")

Modules: `config` (settings and price table), `providers` (SDK calls, failures as data), `recorder`
(content-addressed cassette, LLMClient), `prompts` (versioned templates and their hash), `context` (what the
roles are shown), `roles` (planner, coder, debugger; validation and repair), `proposer` (the Proposer the
controller drives), `costs` (per call / trial / run), `sink` (the archive sink of its events). The run (controller + proposer +
sink) is `kernelloop.tune.loop.llm.run_llm`: the loop drives proposers, so it sits above them.
"""

from .config import LLMConfig, LLMConfigError, Price, load_llm_config
from .costs import render_llm, summarize_llm
from .prompts import PromptSet, load_prompts
from .proposer import LLMBudget, LLMProposer
from .providers import AnthropicProvider, ChatRequest, ChatResponse, Message, OpenAIProvider, Usage, make_provider
from .recorder import Cassette, Exchange, LLMClient, ReplayMiss
from .roles import Limits, PlanStep
from .sink import ArchiveSink

__all__ = ["AnthropicProvider", "ArchiveSink", "Cassette", "ChatRequest", "ChatResponse", "Exchange", "LLMBudget",
           "LLMClient", "LLMConfig", "LLMConfigError", "LLMProposer", "Limits", "Message", "OpenAIProvider",
           "PlanStep", "Price", "PromptSet", "ReplayMiss", "Usage", "load_llm_config", "load_prompts",
           "make_provider", "render_llm", "summarize_llm"]
