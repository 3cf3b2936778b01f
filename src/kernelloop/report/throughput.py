"""A run's throughput read from its archive (what is measured: kernelloop.records.run)."""

from __future__ import annotations

from ..records import Trial
from ..records.run import DeviceBusy, Throughput

SESSION_EVENT = "search-session"   # payload: {"started", "finished"} (wall-clock seconds), "evaluated", "replayed"


def _fraction(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def compute(trials: list[Trial], sessions: list[dict], device: str) -> Throughput:
    """Throughput of `trials` over the search sessions (`search-session` payloads) on one device."""
    wall = 0.0
    covered: set[int] = set()
    for s in sessions:
        lo, hi = float(s["started"]), float(s["finished"])
        wall += max(0.0, hi - lo)
        covered |= {t.index for t in trials if lo <= t.started <= hi}
    orphans = [t for t in trials if t.index not in covered]
    if orphans:   # no session covers them (an older archive, an invocation killed before logging its session)
        wall += max(0.0, max(t.finished for t in orphans) - min(t.started for t in orphans))
    verify = sum(max(0.0, t.costs.verify_s - t.costs.compile_s) for t in trials)
    bench = sum(t.costs.bench_s for t in trials)
    build = sum(t.costs.compile_s for t in trials)
    return Throughput(
        trials=len(trials), wall_s=wall, sessions=len(sessions),
        trials_per_minute=len(trials) * 60.0 / wall if wall > 0 else None,
        devices=[DeviceBusy(device=device, verify_s=verify, bench_s=bench,
                            busy_fraction=_fraction(verify + bench, wall))] if trials or sessions else [],
        build_wait_s=build, build_wait_fraction=_fraction(build, wall))


def device_name(environment: dict) -> str:
    """The GPU's name from an archived environment, or its device ('interpret')."""
    return environment.get("gpu") or environment.get("device") or "unknown"


def throughput(archive, run_id: str) -> Throughput:
    """The run's throughput from its archived trials and `search-session` events."""
    run = archive.get_run(run_id)
    sessions = [e["payload"] for e in archive.events(run_id, SESSION_EVENT)]
    return compute(archive.trials(run_id), sessions, device_name(run["environment"]))


__all__ = ["SESSION_EVENT", "compute", "device_name", "throughput"]
