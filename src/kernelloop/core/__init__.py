"""kernelloop.core: the core floor: specs, references, builds, workers, the verifier, the timer, the archive."""
