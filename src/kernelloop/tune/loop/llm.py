"""Run the controller with the LLM proposer: record (live provider) or replay (cassette only, no network).

    run_id = run_llm(bundle, workloads, RunOptions(device="interpret", checks=1), run_dir,
                     load_llm_config("llm.toml"), mode="record")
    # later, anywhere, offline:
    run_llm(bundle, workloads, options, other_dir, config, mode="replay", cassette_dir=run_dir / "llm")

The loop (kernelloop.tune.loop.run: the options checked, then the controller) is the one that freezes the manifest, evaluates and archives; this
module only builds the proposer (kernelloop.tune.propose.llm), its client and cassette, and the sink that appends the
proposer's events to the run's archive (kernelloop.tune.propose.llm.sink.ArchiveSink).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Literal

from ..propose.llm.config import LLMConfig
from ..propose.llm.prompts import DEFAULT_VERSION, load_prompts
from ..propose.llm.proposer import LLMBudget, LLMProposer
from ..propose.llm.providers import Provider, make_provider
from ..propose.llm.recorder import Cassette, LLMClient
from ..propose.llm.roles import Limits
from ..propose.llm.sink import ArchiveSink, default_knowledge
from ...base.records import Workload
from ...core.spec import OpBundle
from .options import Progress, RunOptions


def run_llm(bundle: OpBundle, workloads: list[Workload], options: RunOptions, run_dir: str | Path,
            config: LLMConfig, *, mode: Literal["record", "replay"] = "record", cassette_dir: str | Path | None = None,
            prompts_version: str = DEFAULT_VERSION, prompts_root: str | Path | None = None,
            budget: LLMBudget = LLMBudget(), limits: Limits = Limits(), kb="default", resume: bool = False,
            provider: Provider | None = None, on_progress: Callable[[Progress], None] | None = None) -> str:
    """One run of the loop with the LLM proposer; returns the run id. Calls are stored in `cassette_dir`
    (default: RUN_DIR/llm); replay mode reads them from there and opens no connection."""
    run_dir = Path(run_dir)
    cassette = Cassette(cassette_dir or run_dir / "llm", mode)
    if mode == "record" and provider is None:
        provider = make_provider(config)
    client = LLMClient(config, cassette, provider if mode == "record" else None)
    proposer = LLMProposer(bundle, workloads, client, load_prompts(prompts_version, prompts_root),
                           device=options.device, kb=default_knowledge() if kb == "default" else kb, budget=budget,
                           limits=limits, sink=ArchiveSink(run_dir / "archive.sqlite"))
    import kernelloop.tune.loop as entry        # the package attribute: the one way into the loop (tune/loop/entry.py)
    run_id = entry.run(bundle, workloads, options, run_dir, resume=resume, on_progress=on_progress,
                       proposer=proposer).run_id
    proposer.finish(run_id)
    return run_id


__all__ = ["run_llm"]
