import numpy as np

from kernelloop.tune.replay import RecordedSpace
from kernelloop.tune.search.encoding import SpaceEncoding, config_key
from kernelloop.tune.search.history import BadRegions, TransferPrior
from kernelloop.tune.search.supervisor import Supervisor
from search_spaces import grid_space, grid_value, mixed_space


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


def test_pooled_prior_divides_each_workload_by_its_best():
    space = grid_space()
    wide = [c for c in space if c["bx"] >= 64]                    # another shape, with another pruned space
    fast = RecordedSpace("small", space, [grid_value(c) for c in space], ["ok"] * len(space))
    slow = RecordedSpace("large", wide, [1000 * grid_value(c) for c in wide], ["ok"] * len(wide))
    pooled = TransferPrior.from_spaces([fast, slow])
    assert pooled.configurations == len(space)
    best = {"bx": 128, "by": 2, "flag": 1, "kind": "col"}
    assert space[pooled.top(space, 1)[0]] == best
    # pooled as measured, the large shape's cost would be blamed on the wide blocks it was measured with
    raw = TransferPrior(fast.configs + slow.configs, fast.values + slow.values)
    assert space[raw.top(space, 1)[0]]["bx"] < 64


def test_warm_start_puts_the_recordings_measured_best_first():
    """A recording that varied two parameters around a tuned optimum: the model predicts the mean for every value it
    never saw, so it ranks unseen configurations above the measured best; the warm start does not."""
    space = [{"template": "t", "M": m, "N": n, "S": s} for m in (32, 64, 128) for n in (32, 64) for s in (2, 3, 4)]
    measured = [c for c in space if c["M"] == 128 and c["N"] == 64]          # only S varied, M and N fixed
    values = [{2: 1.0, 3: 1.3, 4: 1.6}[c["S"]] for c in measured]
    prior = TransferPrior(measured, values)
    best = {"template": "t", "M": 128, "N": 64, "S": 2}
    assert space[prior.top(space, 1)[0]] != best, "the additive model alone prefers an unseen configuration"
    warm = prior.warm_start(space, 4)
    assert [space[i] for i in warm[:2]] == [best, {**best, "S": 3}], "half of k from the measured best, in order"
    assert len(set(warm)) == 4 and all(space[i] not in measured for i in warm[2:])
    # a space that holds none of the measured configurations gets the model's picks
    other = [c for c in space if c["M"] != 128]
    assert prior.warm_start(other, 3) == prior.top(other, 3)
    assert prior.warm_start(space, 1) == [space.index(best)]


def test_transfer_prior_over_templates_with_different_parameters():
    space = mixed_space()
    values = [2.0 + c["BLOCK"] / 256 + c["WARPS"] / 4 if c["template"] == "rows" else 1.0 + abs(c["TILE"] - 16) / 16
              for c in space]
    prior = TransferPrior(space, values)
    assert space[prior.top(space, 1)[0]] == {"template": "tiles", "TILE": 16}
    # what the recording never saw (a parameter, a value, a template) contributes nothing
    tile = {"template": "tiles", "TILE": 16}
    assert prior.predict({**tile, "STAGES": 3}) == prior.predict(tile)
    assert prior.predict({"template": "cols", "WIDTH": 8}) == prior.mean


def _recorded(name, wid, axes, scores):
    """A RecordedSpace of workload `wid` (shape `axes`) whose configurations {"template": "t", "X": x} took
    scores[x]."""
    configs = [{"template": "t", "X": x} for x in scores]
    return RecordedSpace(name, configs, list(scores.values()), ["ok"] * len(configs),
                         meta={"workload": wid, "axes": axes})


def test_each_workload_starts_from_its_own_recorded_best():
    """A suite of a small and a large shape whose best configurations differ: pooled, both would start from the
    configuration best on average; per workload, each starts from what it measured best itself."""
    small = _recorded("r1:ws", "ws", {"M": 512, "N": 1024}, {1: 1.0, 2: 1.5, 3: 3.0, 4: 4.0})
    large = _recorded("r1:wl", "wl", {"M": 8192, "N": 8192}, {1: 40.0, 2: 30.0, 3: 10.0, 4: 10.5})
    prior = TransferPrior.from_spaces([small, large])
    space = [{"template": "t", "X": x} for x in (1, 2, 3, 4)]
    assert prior.source == "pooled" and set(prior.workloads) == {"ws", "wl"}
    mine = prior.for_workload("ws")
    assert mine.source == "ws" and [space[i]["X"] for i in mine.warm_start(space, 4)[:2]] == [1, 2]
    assert [space[i]["X"] for i in prior.for_workload("wl").warm_start(space, 4)[:2]] == [3, 4]
    # the model is the pooled one in every view
    assert prior.for_workload("ws").predict(space[0]) == prior.predict(space[0])
    # an unrecorded shape starts from the nearest recorded one (log distance over the same axes)
    assert prior.nearest(None, {"M": 1024, "N": 2048}) == "ws"
    assert prior.nearest("w-new", {"M": 4096, "N": 14336}) == "wl"
    assert prior.for_workload("w-new", {"M": 4096, "N": 14336}).source == "wl"
    # other axis names, no shape, or a non-positive axis: the pooled prior
    assert prior.for_workload("w-new", {"B": 8, "S": 4096}) is prior
    assert prior.for_workload("w-new") is prior
    assert prior.nearest(None, {"M": 0, "N": 8}) is None


def test_a_workload_recorded_twice_is_merged_at_its_faster_times():
    """Two recordings of one workload (e.g. a first run and a later one that found split-K): one workload, each
    configuration at its faster time, normalised by the merged best."""
    old = _recorded("r1:w", "w", {"M": 512}, {1: 2.0, 2: 3.0, 3: 4.0})
    new = _recorded("r2:w", "w", {"M": 512}, {3: 1.0, 2: 5.0, 4: 1.2})
    prior = TransferPrior.from_spaces([old, new])
    assert set(prior.workloads) == {"w"} and prior.configurations == 4
    own = prior.workloads["w"]
    assert min(own, key=own.get) == config_key({"template": "t", "X": 3})
    space = [{"template": "t", "X": x} for x in (1, 2, 3, 4)]
    assert [space[i]["X"] for i in prior.for_workload("w").warm_start(space, 6)[:3]] == [3, 4, 1]
    assert np.isclose(own[min(own, key=own.get)], 0.0)
    assert np.isclose(max(own.values()), np.log(3.0 / 1.0))   # X=2 at its faster 3.0, over the best 1.0


def test_a_workload_on_two_devices_is_normalised_per_device():
    """One workload recorded on two GPUs: raw times are not comparable across them, so each device's times are
    divided by that device's best and the workload's table is the mean of those logs."""
    h100 = RecordedSpace("a:w", [{"template": "t", "X": x} for x in (1, 2)], [10.0, 11.0], ["ok"] * 2,
                         meta={"workload": "w", "device": "H100"})
    a100 = RecordedSpace("b:w", [{"template": "t", "X": x} for x in (1, 2, 3, 4)], [30.0, 33.0, 40.0, 20.0],
                         ["ok"] * 4, meta={"workload": "w", "device": {"name": "A100"}})
    prior = TransferPrior.from_spaces([h100, a100])
    own = prior.workloads["w"]
    key = lambda x: config_key({"template": "t", "X": x})  # noqa: E731
    assert np.isclose(own[key(4)], 0.0) and np.isclose(own[key(3)], np.log(2.0))
    assert np.isclose(own[key(1)], (0.0 + np.log(1.5)) / 2) and np.isclose(own[key(2)], (np.log(1.1) + np.log(1.65)) / 2)
    space = [{"template": "t", "X": x} for x in (1, 2, 3, 4)]
    assert [space[i]["X"] for i in prior.for_workload("w").warm_start(space, 8)] == [4, 1, 2, 3]


def test_spaces_that_name_no_workload_are_never_merged():
    """Two Kernel Tuner caches with the same file stem (the space's name) but different problem sizes: each is
    normalised by its own best, as if read alone, and neither is a per-workload table."""
    small = RecordedSpace("gemm", [{"template": "t", "X": x} for x in (1, 2)], [1.0, 2.0], ["ok"] * 2)
    large = RecordedSpace("gemm", [{"template": "t", "X": x} for x in (3, 4)], [100.0, 120.0], ["ok"] * 2)
    prior = TransferPrior.from_spaces([small, large])
    assert prior.workloads == {}
    assert np.isclose(prior.measured[config_key({"template": "t", "X": 3})], 0.0)
    assert prior.for_workload("gemm", {"M": 1}) is prior


def test_malformed_axes_are_ignored_and_dtype_is_preferred():
    bad = [RecordedSpace(f"r:{w}", [{"template": "t", "X": 1}, {"template": "t", "X": 2}], [1.0, 2.0], ["ok"] * 2,
                         meta={"workload": w, "axes": axes}) for w, axes in
           (("list", [8, 1000]), ("text", "8x1000"), ("flag", {"M": True}))]
    prior = TransferPrior.from_spaces(bad)
    assert set(prior.workloads) == {"list", "text", "flag"} and prior.axes == {}
    assert prior.for_workload("new", {"M": 8}) is prior
    # the same shape in fp32 and a near shape in fp16: an fp16 target starts from the fp16 one
    same = _recorded("r:f32", "f32", {"M": 512, "N": 512}, {1: 1.0, 2: 2.0})
    same.meta["dtype"] = "fp32"
    near = _recorded("r:f16", "f16", {"M": 1024, "N": 512}, {1: 2.0, 2: 1.0})
    near.meta["dtype"] = "fp16"
    prior = TransferPrior.from_spaces([same, near])
    assert prior.nearest(None, {"M": 512, "N": 512}, "fp16") == "f16"
    assert prior.nearest(None, {"M": 512, "N": 512}, "fp32") == "f32"
    assert prior.nearest(None, {"M": 512, "N": 512}) == "f32"
