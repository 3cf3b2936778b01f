"""A run's throughput read from its archive (what is measured: kernelloop.base.records.run)."""

from __future__ import annotations

from ...base.records import BuildArtifact, Trial
from ...base.records.run import DeviceBusy, Throughput

SESSION_EVENT = "search-session"   # payload: {"started", "finished"} (wall-clock seconds), "evaluated", "replayed",
                                   # and since the build stage "devices" and "build_wait_s"


def _fraction(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def compiled_on_device(trial: Trial) -> float:
    """Compile seconds spent inside the trial's verification request on its device (the first call compiled):
    0 when the build stage compiled ahead or nothing was compiled (the interpreter)."""
    build = trial.build
    if isinstance(build, BuildArtifact) and build.compiled_by != "first call":
        return 0.0
    return trial.costs.compile_s


def compute(trials: list[Trial], sessions: list[dict], device: str) -> Throughput:
    """Throughput of `trials` over the search sessions (`search-session` payloads); `device`: the model's name (the
    GPU's, or 'interpret'), for trials that do not name their device."""
    wall = 0.0
    covered: set[int] = set()
    for s in sessions:
        lo, hi = float(s["started"]), float(s["finished"])
        wall += max(0.0, hi - lo)
        covered |= {t.index for t in trials if lo <= t.started <= hi}
    orphans = [t for t in trials if t.index not in covered]
    if orphans:   # no session covers them (an older archive, an invocation killed before logging its session)
        wall += max(0.0, max(t.finished for t in orphans) - min(t.started for t in orphans))
    per_device: dict[str, list[Trial]] = {}
    for t in trials:
        if t.device or t.costs.verify_s or t.costs.bench_s:   # neither: ended in the build stage
            per_device.setdefault(t.device or device, []).append(t)
    devices = []
    for name, mine in sorted(per_device.items()):
        verify = sum(max(0.0, t.costs.verify_s - compiled_on_device(t)) for t in mine)
        bench = sum(t.costs.bench_s for t in mine)
        transports: dict[str, int] = {}
        for t in mine:
            if t.transport:
                transports[t.transport] = transports.get(t.transport, 0) + 1
        devices.append(DeviceBusy(device=name, model=device, trials=len(mine),
                                  transports=dict(sorted(transports.items())), verify_s=verify, bench_s=bench,
                                  busy_fraction=_fraction(verify + bench, wall)))
    if not devices and sessions:
        devices = [DeviceBusy(device=device, model=device, trials=0, verify_s=0.0, bench_s=0.0,
                              busy_fraction=_fraction(0.0, wall))]
    measured = [s for s in sessions if "build_wait_s" in s]
    # builds compiled on the device are in its critical path; the build stage's wait is measured per session
    build = sum(compiled_on_device(t) for t in trials) + sum(float(s["build_wait_s"]) for s in measured)
    return Throughput(
        trials=len(trials), wall_s=wall, sessions=len(sessions),
        trials_per_minute=len(trials) * 60.0 / wall if wall > 0 else None,
        devices=devices, build_wait_s=build, build_wait_fraction=_fraction(build, wall))


def device_name(environment: dict) -> str:
    """The GPU's name from an archived environment, or its device ('interpret')."""
    return environment.get("gpu") or environment.get("device") or "unknown"


def throughput(archive, run_id: str) -> Throughput:
    """The run's throughput from its archived trials and `search-session` events."""
    run = archive.get_run(run_id)
    sessions = [e["payload"] for e in archive.events(run_id, SESSION_EVENT)]
    return compute(archive.trials(run_id), sessions, device_name(run["environment"]))


__all__ = ["SESSION_EVENT", "compiled_on_device", "compute", "device_name", "throughput"]
