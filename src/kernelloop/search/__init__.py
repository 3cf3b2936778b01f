"""Ask/tell search strategies. They see configurations and numbers only: never the GPU, compiler or archive."""

from .base import Exhaustive, RandomSearch, Strategy, make_strategy, STRATEGIES

__all__ = ["Exhaustive", "RandomSearch", "Strategy", "make_strategy", "STRATEGIES"]
