"""Why each operator card was patched or not: the card's mapping, its op's run, export's left-outs and apply's
sites, read in that order (the first that says no is the reason)."""

from __future__ import annotations

from ..capture import CaptureReport, OperatorCard
from ..integrate.e2e import E2EReport
from .records import CardOutcome, CardStatus, Verdict


def _same(card: OperatorCard, axes: dict, dtype: str) -> bool:
    return dict(axes) == dict(card.axes) and dtype == card.dtype.value


def _run_says(card: OperatorCard, outcome, run, workloads, empty: dict[str, str]):
    """(workload label, (status, detail) from the op's run and export, or None when they leave the card to apply).
    Workloads are matched by axes and dtype, labels taken from the run's summary (as export's left-outs are)."""
    planned = next((w.label for w in workloads if _same(card, w.axes, w.dtype.value)), None)
    if outcome.error:
        nothing = "every configuration" in outcome.error or "nothing to try" in outcome.error
        return planned, ((CardStatus.NO_SPACE if nothing else CardStatus.RUN_FAILED), outcome.error)
    if planned in empty:
        return planned, (CardStatus.NO_SPACE, empty[planned])
    ws = next((w for w in run.workloads if _same(card, w.axes, w.dtype)), None) if run is not None else None
    label = ws.label if ws is not None else planned
    if ws is None or ws.best is None:
        return label, (CardStatus.NO_CANDIDATE, f"no candidate passed at {label} in {outcome.run_dir}")
    for line in outcome.left_out:
        if line.startswith(f"{label}:"):
            return label, ((CardStatus.SLOWER if "SLOWER" in line else CardStatus.NOT_PACKAGED), line)
    return label, None


def _apply_says(card: OperatorCard, sites: list[dict], counts: dict) -> tuple[CardStatus, str]:
    """(status, detail) from apply's sites: a module card by its paths; an ATen card (softmax, attention) by its
    op's function site and whether a call of it reached a kernel in the check."""
    if card.kind == "module":
        mine = [s for s in sites if s["path"] in card.paths]
        if any(s["replaced"] for s in mine):
            return CardStatus.PATCHED, ""
        why = "; ".join(sorted({s["reason"] for s in mine if s["reason"]})) or "apply found no call site of it"
        return CardStatus.NOT_APPLIED, why
    fn = [s for s in sites if s["kind"] == "function" and s["op"] == card.op]
    if not any(s["replaced"] for s in fn):
        return CardStatus.NOT_APPLIED, "; ".join(s["reason"] for s in fn) or f"apply routes no function to {card.op}"
    op = counts.get("ops", {}).get(card.op, {})
    if sum((op.get("entries") or {}).values()):
        return CardStatus.PATCHED, ""
    fell = ", ".join(f"{k} ({v})" for k, v in (op.get("fallbacks") or {}).items())
    return CardStatus.NOT_APPLIED, f"its calls ran the reference: {fell or 'no call reached the op'}"


def card_outcomes(report: CaptureReport, runs: dict, package, checked: E2EReport | None) -> list[CardOutcome]:
    """One CardOutcome per card; `runs`: op -> (OpOutcome, Run or None, its workloads, {label: why empty})."""
    out = []
    sites = checked.sites.get("sites", []) if checked is not None else []
    for card in report.cards:
        base = dict(card=card.id, module_class=card.short_class + (f" ({card.overload})" if card.overload else ""),
                    paths=list(card.paths), calls=card.calls, op=card.op)
        if card.op is None:
            out.append(CardOutcome(**base, status=CardStatus.NOT_MAPPED, detail=card.reason or ""))
            continue
        outcome, run, workloads, empty = runs[card.op]
        label, said = _run_says(card, outcome, run, workloads, empty)
        if said is None and (package is None or card.op not in package.kernels):
            said = CardStatus.NOT_PACKAGED, f"{card.op} is not in the package"
        if said is None:
            said = _apply_says(card, sites, checked.counts if checked is not None else {})
        out.append(CardOutcome(**base, workload=label, status=said[0], detail=said[1]))
    return out


def verdict_of(package, checked: E2EReport | None) -> Verdict:
    if package is None or checked is None or not checked.patched:
        return Verdict.NOTHING_PATCHED
    if not checked.outputs_ok:
        return Verdict.OUT_OF_TOLERANCE
    if checked.delivered is False:
        return Verdict.SLOWER
    return Verdict.ACCELERATED
