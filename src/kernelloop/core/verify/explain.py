"""Why a trial failed: a short reason for grouping, and the view of a verdict a proposer may be given.

The archive keeps the full verdict and, as a `failure` event, the case it failed on (shape, dtype, value
distribution, seed, check index, stage, signal): that is the user's record (`kernelloop show`). Proposers -- the
`submit` answer, the MCP tools, `agent status`, the LLM proposer's feedback, anything the controller `tell`s --
get `proposer_verdict`: seeds never; for a held-out case only that a held-out case failed, its class (which
axes moved and in which direction, the value distribution's class) and the reason, with no element counts,
indices, messages or logs that could carry its shape.
"""

from __future__ import annotations

import re

from ...base.records import ErrorMetrics, Status, Trial, Verdict, Workload

DISTRIBUTION_CLASS = {
    "normal": "a normal distribution with a non-zero mean",
    "large": "a large-magnitude distribution",
    "mixed": "a mixed-scale distribution (rows of very different magnitudes)",
    "near_zero": "a near-zero distribution",
    "heavy_tail": "a heavy-tailed distribution",
}

_SEED = re.compile(r"\s*seed=\d+")
WITHHELD_LOG = ("withheld: the failure happened on a held-out case; its shape, values and log are in the user's "
                "record (kernelloop show), not in answers to proposers")


def failure_reason(v: Verdict) -> str:
    """A short, shape-free reason that groups failures: e.g. 'values outside tolerance', 'killed by SIGSEGV'."""
    m = v.message or ""
    timed = m.startswith("timed call: ")
    body = m.removeprefix("timed call: ")
    s = v.status
    if s is Status.PASSED:
        return "passed"
    if s is Status.REJECTED:
        rule = re.match(r"([a-z][a-z0-9-]+)( at line \d+)?:", body)
        return f"rejected: {rule.group(1)}" if rule else "rejected"
    if s is Status.COMPILE_ERROR:
        return "import failed" if "import" in m else "compile error"
    if s is Status.TIMEOUT:
        return "timeout"
    if s is Status.TAMPERED:
        return "archive row edited (fails its MAC)"
    if s is Status.RUNTIME_ERROR:
        sig = re.search(r"killed by signal (\w+)", m)
        if sig:
            reason = f"killed by {sig.group(1)}"
        elif "exited with code" in m:
            reason = "worker exited"
        else:
            exc = re.match(r"([A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Exit|Interrupt))\b", body)
            reason = f"raised {exc.group(1)}" if exc else "runtime error"
    elif s is Status.WRONG_VALUES:
        reason = "degenerate output" if "degenerate" in m else "values outside tolerance"
    else:
        reason = {Status.WRONG_INCOMPLETE: "elements never written",
                  Status.WRONG_NONFINITE: "NaN/Inf where the reference is finite",
                  Status.WRONG_INPUT_MUTATED: "input mutated",
                  Status.WRONG_NONDETERMINISTIC: "nondeterministic",
                  Status.WRONG_SHAPE: "output replaced or aliased" if ("replaced" in m or "shares memory" in m)
                  else "wrong shape or dtype"}[s]
    return ("timed call: " if timed else "") + reason


def is_heldout(v: Verdict, workload: Workload, failure: dict | None) -> bool:
    """Whether the verdict's failing case was held out (from the archived failure; for trials archived without
    one, from the case's shape label)."""
    case = (failure or {}).get("case")
    if case:
        return case.get("kind") == "held-out"
    return bool(v.case) and not (v.case == workload.label or v.case.startswith(workload.label + " ")
                                 or v.case.startswith(workload.label + ":"))


def _output_name(v: Verdict) -> str:
    if v.metrics:
        return v.metrics[0].output
    head = re.match(r"(?:timed call: )?([A-Za-z_][A-Za-z0-9_]*): ", v.message or "")
    return head.group(1) if head else ""


def proposer_verdict(v: Verdict, workload: Workload, failure: dict | None = None) -> Verdict:
    """The verdict as a proposer may see it (see the module doc)."""
    if v.status is Status.PASSED:
        return v.model_copy(update={"case": "", "log": _SEED.sub("", v.log)})
    if not is_heldout(v, workload, failure):
        return v.model_copy(update={"case": _SEED.sub("", v.case), "message": _SEED.sub("", v.message),
                                    "log": _SEED.sub("", v.log)})
    case = (failure or {}).get("case") or {}
    held = case.get("heldout") or {}
    cls = held.get("class") or "a held-out case"
    dist = DISTRIBUTION_CLASS.get(case.get("distribution", ""), "")
    index = case.get("index")
    text = f"{workload.label}: {cls}" + (f", {dist}" if dist else "") + (f" (check {index})" if index is not None
                                                                         else "")
    out = _output_name(v)
    reason = failure_reason(v)
    message = (f"{out}: " if out else "") + f"{reason} on a held-out case ({cls}); element counts, positions, " \
        "values and the log are withheld"
    metrics = [ErrorMetrics(output=m.output, max_abs=m.max_abs, max_rel=m.max_rel, mismatched=0, total=0,
                            matched_ratio=0.0, error_cap_ratio=m.error_cap_ratio, worst_index=[])
               for m in v.metrics]
    return v.model_copy(update={"case": text, "message": message, "metrics": metrics, "log": WITHHELD_LOG})


def proposer_trial(trial: Trial, workload: Workload, failure: dict | None = None) -> Trial:
    """The trial with its verdict as a proposer may see it."""
    return trial.model_copy(update={"verdict": proposer_verdict(trial.verdict, workload, failure)})


def failures_by_trial(archive, run_id: str) -> dict[str, dict]:
    """The archived `failure` events of a run, by trial id (the last one wins)."""
    out = {}
    for e in archive.events(run_id, "failure"):
        p = e.get("payload", e)
        if p.get("trial"):
            out[p["trial"]] = p
    return out


__all__ = ["DISTRIBUTION_CLASS", "failure_reason", "failures_by_trial", "is_heldout", "proposer_trial",
           "proposer_verdict"]
