"""Cost accounting of LLM calls: per call, per trial, per run, computed from the archive's `llm-call` events.

Each event holds one call's tokens (input including cached, output, cached, cache-written), latency, price
(USD, None when the model has no configured price) and the candidates its step led to. A step's calls (planner
and coder, or debugger, with every retry and repair) are split evenly over the candidates the step produced;
a trial carries the share of its candidate on its workload. Calls of steps that produced nothing are
`unattributed`. A call recorded twice (a resumed run retracing its steps) counts once.
"""

from __future__ import annotations

from collections import defaultdict

from ....base.records.events import ArchivedEvent
from ....base.records.llm import LLMCallPayload, LLMCost, LLMProposerPayload, LLMSection, LLMStopPayload

FIELDS = ("input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "latency_s")


def _blank() -> dict:
    return {"calls": 0, "errors": 0, **{f: 0 for f in FIELDS}, "usd": 0.0, "unpriced_calls": 0}


def _add(acc: dict, e: LLMCallPayload, share: float = 1.0) -> None:
    acc["calls"] += share
    acc["errors"] += share if e.error else 0
    for f in FIELDS:
        acc[f] += share * getattr(e, f)
    if e.usd is None:
        acc["unpriced_calls"] += share
    else:
        acc["usd"] += share * e.usd


def _cost(acc: dict) -> LLMCost:
    return LLMCost(**{k: (round(v, 6) if isinstance(v, float) else v) for k, v in acc.items()})


def _payloads(events: list[ArchivedEvent], kind: str, record: type) -> list:
    """The payloads of one kind as records (a misfit payload an older kernelloop wrote raises ValidationError)."""
    return [record.model_validate(e.payload) for e in events if e.kind == kind]


def summarize_llm(events: list[ArchivedEvent], trials: list) -> LLMSection | None:
    """The `llm` section of a run summary from its events (`Archive.event_records`) and trials."""
    calls, seen = [], set()
    for p in _payloads(events, "llm-call", LLMCallPayload):
        if (p.key, p.occurrence) not in seen:
            seen.add((p.key, p.occurrence))
            calls.append(p)
    proposers = _payloads(events, "llm-proposer", LLMProposerPayload)
    if not calls and not proposers:
        return None
    total, by_role, by_model, unattributed = _blank(), defaultdict(_blank), defaultdict(_blank), _blank()
    trial_of = {(t.candidate_id, t.workload_id): t.id for t in trials}
    per_trial: dict[str, dict] = defaultdict(_blank)
    for p in calls:
        _add(total, p)
        _add(by_role[p.role], p)
        _add(by_model[p.model], p)
        targets = [t for t in (trial_of.get((c, p.workload)) for c in p.candidates) if t is not None]
        if not p.candidates:
            _add(unattributed, p)
        for t in targets:
            _add(per_trial[t], p, 1.0 / len(p.candidates))
    return LLMSection(
        total=_cost(total), by_role={k: _cost(v) for k, v in sorted(by_role.items())},
        by_model={k: _cost(v) for k, v in sorted(by_model.items())},
        per_trial={k: _cost(v) for k, v in sorted(per_trial.items())}, unattributed=_cost(unattributed),
        replayed_calls=sum(1 for p in calls if p.replayed),
        inexact_replays=sum(1 for p in calls if p.replayed and not p.exact),
        prompt_hashes=sorted({p.prompt_hash for p in calls + proposers if p.prompt_hash}),
        proposers=sorted({p.name for p in proposers}), stops=_payloads(events, "llm-stop", LLMStopPayload))


def render_llm(section: LLMSection | None, console) -> None:
    """A terminal view of the `llm` section (for `kernelloop show`)."""
    if not section:
        return
    from rich.table import Table
    t = Table(title="LLM calls (tokens, latency, price)")
    for col in ("", "calls", "errors", "tokens in", "cached", "tokens out", "latency s", "USD"):
        t.add_column(col, justify="right")

    def row(name: str, a: LLMCost) -> None:
        usd = f"{a.usd:.4f}" + (f" (+{a.unpriced_calls:g} unpriced)" if a.unpriced_calls else "")
        t.add_row(name, f"{a.calls:g}", f"{a.errors:g}", f"{a.input_tokens:,.0f}", f"{a.cached_tokens:,.0f}",
                  f"{a.output_tokens:,.0f}", f"{a.latency_s:.1f}", usd)

    for role, a in section.by_role.items():
        row(role, a)
    row("total", section.total)
    console.print(t)
    console.print(f"prompts: {', '.join(h[:12] for h in section.prompt_hashes)}; "
                  f"replayed calls {section.replayed_calls} (inexact {section.inexact_replays})")


__all__ = ["render_llm", "summarize_llm"]
