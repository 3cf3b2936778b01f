"""Trusted side: seeded input generation, output poisoning and the reference computation."""
