"""Static checks of an edited PTX against the seeded mutation generator: every breaking edit is refused with
the rule it breaks, every harmless one accepted (on row-wise, persistent and TMA warp-specialised kernels)."""

import pytest

from kernelloop.tune.ptx import check_edit, mutations

KERNELS = ["rmsnorm/rowwise", "softmax/persistent", "gemm/persistent_ws"]
BREAKING = {"rename_entry", "add_param", "remove_param", "retype_param", "change_reqntid", "add_maxnreg",
            "add_global", "add_extern", "huge_shared"}


@pytest.mark.parametrize("name", KERNELS)
def test_breaking_edits_are_refused_and_harmless_ones_accepted(kernels, name):
    k = kernels[name]
    seen = set()
    for seed in (0, 1):
        for m in mutations(k.ptx, seed, k.shared_bytes or 0):
            seen.add(m.kind)
            violations = check_edit(k.ptx, m.ptx, metadata=k.metadata)
            rules = {v.rule for v in violations}
            if m.breaking:
                assert m.expect in rules, (m.kind, m.description, violations)
            else:
                assert violations == [], (m.kind, m.description, violations)
    assert BREAKING <= seen and {"swap", "comment"} <= seen


def test_the_mutations_are_seeded(kernels):
    k = kernels["rmsnorm/rowwise"]
    assert mutations(k.ptx, 3) == mutations(k.ptx, 3)
    assert [m.ptx for m in mutations(k.ptx, 3)] != [m.ptx for m in mutations(k.ptx, 4)]
    assert "cache_hint" in {m.kind for m in mutations(k.ptx, 0)}


def test_ptxas_errors_and_register_limits(kernels):
    k = kernels["rmsnorm/rowwise"]
    broken = k.ptx.replace("ld.global.v4.b32", "ld.global.v4.b32.nonesuch", 1)
    (v,) = check_edit(k.ptx, broken, metadata=k.metadata)
    assert v.rule == "assembles" and "ptxas" in v.message and "kernel.ptx" in v.message
    assert check_edit(k.ptx, k.ptx, metadata=k.metadata) == []
    # an original with .maxnreg: the same limit kept is accepted (ptxas assembles within it)
    limited = k.ptx.replace(f".reqntid {k.threads}", f".reqntid {k.threads}\n.maxnreg 24", 1)
    assert check_edit(limited, limited, metadata=k.metadata) == []


def test_shared_memory_counts_the_launch(kernels):
    k = kernels["gemm/persistent_ws"]
    small = k.ptx.replace(".address_size 64", ".address_size 64\n.shared .align 16 .b8 extra[1024];", 1)
    assert check_edit(k.ptx, small, metadata=k.metadata, assemble_it=False) == []
    (v,) = check_edit(k.ptx, small, metadata={**k.metadata, "shared": 232000}, assemble_it=False)
    assert v.rule == "shared_memory" and "232000" in v.message
