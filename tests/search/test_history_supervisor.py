import numpy as np

from kernelloop.search.encoding import SpaceEncoding
from kernelloop.search.history import BadRegions, TransferPrior
from kernelloop.search.supervisor import Supervisor
from search_spaces import grid_space, grid_value


def test_supervisor_counts_only_gains_beyond_noise():
    s = Supervisor(patience=3, min_improvement=0.01)
    s.observe(10.0)
    for v in (9.95, 9.99, None):          # 0.5 % better, worse, failed: not real gains
        s.observe(v)
    assert s.stagnating
    s.intervened()
    assert not s.stagnating and s.interventions == 1
    s.observe(9.0)
    assert s.since == 0 and s.reference == 9.0


def test_bad_regions_mark_values_that_only_fail():
    space = grid_space()
    enc = SpaceEncoding(space)
    rows = np.arange(len(space))
    vals = np.array([np.inf if c["kind"] == "row" else grid_value(c) for c in space])
    bad = BadRegions(enc, min_count=4, quantile=0.9)
    newly = bad.update(rows, vals)
    assert (enc.names.index("kind"), enc.params[enc.names.index("kind")].levels.index("row")) in newly
    assert {"param": "kind", "value": "row"} in bad.describe()
    assert all(space[i]["kind"] == "col" for i in np.flatnonzero(bad.mask()))


def test_transfer_prior_ranks_a_new_space_by_what_another_taught():
    source = grid_space()
    prior = TransferPrior(source, [grid_value(c) for c in source])
    target = [c for c in grid_space() if c["by"] != 4]            # another "shape": a different pruned space
    top = prior.top(target, 3)
    assert target[top[0]] == {"bx": 128, "by": 2, "flag": 1, "kind": "col"}
    scores = prior.scores(target)
    assert scores[top[0]] == scores.min()
