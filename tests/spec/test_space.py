"""kernelloop.core.spec.space.selected_space: the space `optimize` searches and `record` measures."""


from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import DType, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.spec.space import prune, selected_space



def test_selected_space_by_template_and_pinned_parameters():
    spec = load_op(ops_dir() / "layernorm").spec
    w = Workload(op="layernorm", axes={"M": 4096, "N": 4096}, dtype=DType.fp16)
    every = selected_space(spec.templates, w, VIRTUAL_HOPPER)
    assert [t.name for t, _, _ in every] == [t.name for t in spec.templates]
    for t, kept, report in every:
        assert [{k: v for k, v in c.items() if k != "template"} for c in kept] == prune(t, w, VIRTUAL_HOPPER)[0]
        assert all(c["template"] == t.name for c in kept) and report.kept == len(kept)
    only = selected_space(spec.templates, w, VIRTUAL_HOPPER, names=["chunked"])
    assert [t.name for t, _, _ in only] == ["chunked"]
    # a pin keeps the templates having the parameter, and the configurations with that value (text, any case)
    pinned = selected_space(spec.templates, w, VIRTUAL_HOPPER, fixed={"BLOCK_N": "4096", "num_warps": "4"})
    assert [t.name for t, _, _ in pinned] == ["rowwise"]
    kept = pinned[0][1]
    assert kept and all(c["BLOCK_N"] == 4096 and c["num_warps"] == 4 for c in kept)
    assert selected_space(spec.templates, w, VIRTUAL_HOPPER, fixed={"nonesuch": "1"}) == []
