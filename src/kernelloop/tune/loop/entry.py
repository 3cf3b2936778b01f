"""The one way into the loop: `run(bundle, workloads, options, run_dir, ...) -> RunResult`.

Every caller goes through it: `kernelloop.optimize` and `kernelloop optimize` (kernelloop.deliver.api), agent submissions
(kernelloop.deliver.agent.submit), the LLM proposer's runs (kernelloop.tune.loop.llm, `kernelloop agent llm`), fusion's
realisations (kernelloop.deliver.fuse.realise) and the extension regressions (kernelloop.deliver.extend.regress). It checks the
options against the op and the workloads (`RunOptions.checked`: a UsageError before anything is created or run),
then runs the controller (`Controller.run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ...base.records import Workload
from ...base.records.run import RunResult
from ...core.spec import OpBundle
from ...base.usage import UsageError
from .options import Progress, RunOptions


def run(bundle: OpBundle, workloads: list[Workload], options: RunOptions, run_dir: str | Path, *,
        resume: bool = False, on_progress: Callable[[Progress], None] | None = None, proposer=None,
        evidence=None, sanitizer=None, names: dict[str, str] | None = None) -> RunResult:
    """Check the options against the op and workloads, then run (with `resume`, continue) the loop in `run_dir`.

    proposer / evidence / sanitizer: the controller's own (None: the search of `options.strategy`, evidence and
    compute-sanitizer by device). names: how the caller names the settings in a UsageError's message
    (`kernelloop.tune.loop.checks.API_NAMES` by default). Raises UsageError for options that do not fit, and what
    `Controller.run` raises (FileExistsError, ManifestChanged, ArchiveError, RuntimeError)."""
    from .controller import Controller
    if not isinstance(options, RunOptions):
        raise UsageError(f"options: a RunOptions record, not {type(options).__name__}")
    if not workloads:
        raise UsageError("workloads: the list is empty")
    checked = options.checked(bundle, list(workloads), names)
    controller = Controller(bundle, list(workloads), checked, Path(run_dir), on_progress, proposer=proposer,
                            evidence=evidence, sanitizer=sanitizer)
    return controller.run(resume=resume)


__all__ = ["run"]
