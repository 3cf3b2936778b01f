"""Who proposes candidates: the `Proposer` protocol and `TemplateSearch`, an ask/tell strategy per workload over
its pruned space (the planner, the LLM proposer and an outside agent's submissions are proposers too)."""

from __future__ import annotations

from typing import Protocol

from ...core.execute.battery import derive_seed
from ...base.records import Candidate, Status, Trial, Workload
from ..search import make_strategy
from ..search.history import TransferPrior
from ...core.spec import OpBundle


class Proposer(Protocol):
    """What the controller asks for candidates: search over templates, a rule planner, an LLM, an agent.

    A proposer only submits candidates; it never sees the verifier, the timer or the archive. `tell` hands it
    the archived trial (verdict, measurement, build) so it can learn. Results are told in the order candidates
    were asked; a proposer with `asks_ahead = True` (the template search) is asked up to `RunOptions.in_flight`
    candidates ahead of their results, any other one candidate at a time.

    A proposer that plans from evidence (the rule planner) also has `wants_evidence = True`,
    `evidence_request(candidate, workload) -> kernelloop.tune.profile.evidence.EvidenceRequest` (what it predicted)
    and `give_evidence(candidate, workload, report)`: after a PASSED trial the controller's evidence source
    builds and archives a ProfileReport and hands it over before `tell`; such a proposer is never asked ahead.
    """

    name: str

    def size(self, workload: Workload) -> int | None:
        """How many candidates it can ever propose for the workload (None = unbounded)."""

    def ask(self, workload: Workload) -> Candidate | None:
        """The next candidate for the workload, or None when it has nothing more."""

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        """The outcome of a candidate it proposed."""


def trial_value(trial: Trial) -> float | None:
    """The search objective: kernel median in µs of a PASSED, measured trial; None otherwise."""
    if trial.verdict.status is Status.PASSED and trial.measurement is not None:
        return trial.measurement.kernel.median_us
    return None


class TemplateSearch:
    """Proposes template configurations from each workload's pruned space through an ask/tell strategy."""

    asks_ahead = True   # strategies take several asks before their tells (tune/search/base.py)

    def __init__(self, bundle: OpBundle, spaces: dict[str, list[dict]], strategy: str, seed: int,
                 prior: TransferPrior | None = None, shapes: dict[str, tuple[dict, str]] | None = None):
        """`prior` warm-starts each workload's search from the recorded workload nearest to it (the same one when
        recorded; by `shapes`, each workload's axes and dtype, otherwise): `TransferPrior.for_workload`."""
        self.bundle = bundle
        self.spaces = spaces
        self.name = f"search:{strategy}"
        self.strategies = {}
        for wid, space in spaces.items():
            options = {}
            if prior is not None:
                options = {"prior": prior.for_workload(wid, *(shapes or {}).get(wid, (None, None)))}
            self.strategies[wid] = make_strategy(strategy, space, derive_seed(seed, wid), **options)
        self._configs: dict[tuple[str, str], dict] = {}
        self._seen: dict[str, int] = {}

    def size(self, workload: Workload) -> int | None:
        return len(self.spaces[workload.id])

    def ask(self, workload: Workload) -> Candidate | None:
        cfg = self.strategies[workload.id].ask()
        if cfg is None:
            return None
        template = cfg["template"]
        cand = Candidate(op=self.bundle.spec.name, template=template, source=self.bundle.template_sources[template],
                         config={k: v for k, v in cfg.items() if k != "template"}, proposer=self.name)
        self._configs[(cand.id, workload.id)] = cfg
        return cand

    def rank(self, candidate: Candidate, workload: Workload) -> float | None:
        """The strategy's predicted quantile of the candidate among the values told so far (None: no model)."""
        rank = getattr(self.strategies[workload.id], "rank", None)
        return rank(self._configs[(candidate.id, workload.id)]) if rank is not None else None

    def tell(self, candidate: Candidate, workload: Workload, trial: Trial) -> None:
        cfg = self._configs.pop((candidate.id, workload.id))
        # the failure's kind and what the evaluation cost teach the strategy where kernels fail (search.feasibility)
        self.strategies[workload.id].tell(cfg, trial_value(trial), status=trial.verdict.status.value,
                                          costs=trial.costs.model_dump())

    def drain_events(self) -> list[dict]:
        """Strategy events (supervisor interventions, stage changes) not yet archived."""
        out = []
        for wid, strat in self.strategies.items():
            events = getattr(strat, "events", None) or []
            seen = self._seen.get(wid, 0)
            out += [{"workload": wid, **e} for e in events[seen:]]
            self._seen[wid] = len(events)
        return out
