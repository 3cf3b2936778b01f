"""Benchmarking: timing statistics (bootstrap CIs, paired A/B speed-ups)."""
