"""kernelloop.tune: the tuning floor: search, proposers, selection, the loop, profiling, schedules, the gate, PTX."""
