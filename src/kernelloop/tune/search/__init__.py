"""Ask/tell search strategies. They see configurations and numbers only: never the GPU, compiler or archive."""

from .base import Exhaustive, RandomSearch, SearchStrategy, Strategy, make_strategy, STRATEGIES, takes_prior
from .encoding import SpaceEncoding, config_key
from .optuna_strategies import OptunaCmaEs, OptunaNSGAII, OptunaRandom, OptunaTPE
from .annealing import Annealing
from .evolution import Evolution
from .mcts import MCTS
from .staged import Staged

for _cls in (Staged, Evolution, Annealing, MCTS, OptunaTPE, OptunaCmaEs, OptunaNSGAII, OptunaRandom):
    STRATEGIES[_cls.name] = _cls

DEFAULT_STRATEGY = Staged.name

__all__ = ["Annealing", "DEFAULT_STRATEGY", "Evolution", "Exhaustive", "MCTS", "OptunaCmaEs", "OptunaNSGAII", "OptunaRandom",
           "OptunaTPE", "RandomSearch", "SearchStrategy", "SpaceEncoding", "Staged", "Strategy", "config_key",
           "make_strategy", "STRATEGIES", "takes_prior"]
