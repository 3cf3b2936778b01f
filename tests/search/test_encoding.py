import numpy as np

from kernelloop.tune.search.encoding import SpaceEncoding
from search_spaces import grid_space, mixed_space


def test_levels_are_sorted_numerically_and_rows_round_trip():
    space = grid_space()
    enc = SpaceEncoding(space)
    bx = enc.params[enc.names.index("bx")]
    assert bx.levels == (16, 32, 64, 128, 256, 512) and bx.ordinal
    assert not enc.params[enc.names.index("kind")].ordinal
    for i, c in enumerate(space):
        assert enc.row_of(c) == i
    assert enc.row_of({**space[0], "bx": 3}) is None
    assert enc.row_of({**space[0], "extra": 1}) is None


def test_step_neighbours_move_one_parameter_to_the_nearest_valid_level():
    space = grid_space()
    enc = SpaceEncoding(space)
    row = enc.row_of({"bx": 64, "by": 2, "flag": 0, "kind": "row"})
    got = {tuple(sorted((k, v) for k, v in space[r].items())) for r in enc.step_neighbours(row)}
    want = [{"bx": 32, "by": 2, "flag": 0, "kind": "row"}, {"bx": 128, "by": 2, "flag": 0, "kind": "row"},
            {"bx": 64, "by": 1, "flag": 0, "kind": "row"}, {"bx": 64, "by": 4, "flag": 0, "kind": "row"},
            {"bx": 64, "by": 2, "flag": 1, "kind": "row"}, {"bx": 64, "by": 2, "flag": 0, "kind": "col"}]
    assert got == {tuple(sorted(w.items())) for w in want}
    near = enc.neighbours(row, radius=1)
    assert set(near.tolist()) >= set(enc.step_neighbours(row).tolist())
    assert np.all(enc.hamming(row, near) == 1)


def test_mixed_templates_get_an_absent_level():
    enc = SpaceEncoding(mixed_space())
    assert "<absent>" in enc.params[enc.names.index("TILE")].levels
    assert len({tuple(r) for r in enc.X.tolist()}) == len(mixed_space())
