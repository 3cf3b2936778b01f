"""Named timing policies. The policy object is stored with every measurement and hashed into the manifest."""

from __future__ import annotations

from ...base.records import TimingPolicy

# Kernel time with a cold L2: a 256 MiB flush (> 2x the 50-60 MB L2 of Hopper) is written before every
# sample, then a device-side sleep (~0.5 ms at 1.98 GHz) keeps the GPU busy while the host launches the
# call, so the start event and the kernel run back to back: host overhead stays out of kernel time.
# The candidate writes three output sets in turn (output_sets): where its outputs lie in memory is spread over
# the samples instead of fixed per run (A/A runs on the H200 saw a ~7 µs kernel differ from its own twin by up to
# +-5 % within one comparison).
COLD_L2_EVENTS = TimingPolicy(name="cold-l2-events", clock="cuda-events", warmup=10, samples=60,
                              flush_bytes=256 * 2**20, sleep_cycles=1_000_000, bootstrap=2000, output_sets=3)

# The final comparison of each workload's winner against every baseline: more samples.
COLD_L2_EVENTS_CONFIRM = COLD_L2_EVENTS.model_copy(update={"name": "cold-l2-events-confirm", "samples": 200})

# Triton interpreter on CPU tensors: wall-clock of the Python interpreter, not kernel performance.
INTERPRETER_WALLCLOCK = TimingPolicy(name="interpreter-wallclock", clock="wallclock", warmup=1, samples=5,
                                     flush_bytes=0, sleep_cycles=0, bootstrap=500)


def policies_for(device) -> tuple[TimingPolicy, TimingPolicy]:
    """(search policy, confirmation policy) for a device (a records.Device or its text)."""
    from ...base.records.device import Device
    if Device.of(device).is_cuda:
        return COLD_L2_EVENTS, COLD_L2_EVENTS_CONFIRM
    return INTERPRETER_WALLCLOCK, INTERPRETER_WALLCLOCK
