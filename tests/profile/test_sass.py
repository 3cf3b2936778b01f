"""SASS parsing on a hand-written fixture, and on real SASS compiled offline for sm_90 when the tools exist."""

import importlib.util
from pathlib import Path

import pytest

from kernelloop.base.builtin import ops_dir
from kernelloop.tune.profile.sass import (find_tool, parse_instruction, parse_resource_usage, parse_sass,
                                     resources_from_cubin, resources_from_sass)

SASS = Path(__file__).resolve().parents[1] / "fixtures" / "sass"


@pytest.fixture(scope="module")
def hand():
    # HAND-WRITTEN fixture (see tests/fixtures/sass/README.md), not compiler output.
    return parse_sass((SASS / "handwritten-two-kernels.sass").read_text())


def test_functions_and_instruction_counts(hand):
    assert list(hand) == ["rowwise_vec", "tile_mma"]
    vec = hand["rowwise_vec"]
    assert vec.instructions == 24          # 26 lines with an address, minus 2 NOP paddings
    assert vec.opcodes["NOP"] == 0 and vec.opcodes["LDG"] == 7 and vec.opcodes["EXIT"] == 1


def test_global_access_widths(hand):
    vec = hand["rowwise_vec"]
    # LDG.E.128, LDG.E.EF.128 (predicated), LDG.E.128.CONSTANT, LDG.E.64, LDG.E, 2x LDG.E.U16
    assert dict(vec.global_loads) == {128: 3, 64: 1, 32: 1, 16: 2}
    assert dict(vec.global_stores) == {128: 2, 16: 1}
    assert dict(hand["tile_mma"].global_stores) == {32: 1}
    assert not hand["tile_mma"].global_loads  # LDGSTS is an async copy, not a register load


def test_local_shared_tensor(hand):
    vec, mma = hand["rowwise_vec"], hand["tile_mma"]
    assert (vec.local_loads, vec.local_stores) == (2, 2)   # LDL.LU, LDL.64 / STL, STL.64
    assert (vec.shared_loads, vec.shared_stores) == (1, 1)
    assert vec.tensor == 0 and mma.tensor == 2 and mma.async_copies == 1 and mma.shared_loads == 1


def test_instruction_fields():
    ins = parse_instruction("        /*0040*/              @!P1 LDG.E.EF.128 R8, desc[UR4][R2.64+0x1000] ;  /* 0x0 */")
    assert ins.address == 0x40 and ins.predicate == "@!P1" and ins.opcode == "LDG"
    assert ins.modifiers == ("E", "EF", "128") and ins.width == 128 and ins.operands.startswith("R8,")
    assert parse_instruction("        /*0000*/ LDG.E.U8 R1, desc[UR4][R2.64] ;").width == 8
    assert parse_instruction("                                 /* 0x000fe20000000800 */") is None
    assert parse_instruction("\t\tFunction : rowwise_vec") is None


def test_resource_usage_and_record(hand):
    usage = parse_resource_usage((SASS / "handwritten-resource-usage.txt").read_text())
    assert usage["rowwise_vec"]["REG"] == 72 and usage["rowwise_vec"]["STACK"] == 16
    assert usage["tile_mma"] == {"REG": 168, "STACK": 0, "SHARED": 0, "LOCAL": 0, "CONSTANT[0]": 560,
                                 "TEXTURE": 0, "SURFACE": 0, "SAMPLER": 0}
    r = resources_from_sass(hand["rowwise_vec"], registers=72, spills=2, stack_bytes=16)
    assert r.ldg128_fraction == pytest.approx(3 / 7) and r.stg128_fraction == pytest.approx(2 / 3)
    assert r.local_loads == 2 and r.spills == 2 and r.kernel == "rowwise_vec"
    assert type(r).from_json(r.to_json()) == r  # width keys survive JSON


def _offline_cubin(divisible: bool, monkeypatch) -> bytes:
    """ops/layernorm/kernel.py compiled for sm_90 on this machine (no GPU needed: Triton's bundled ptxas).

    Pointers are 16-byte aligned in both builds; `divisible` says whether N and the row strides are multiples of
    16 (Triton's launcher specializes integer arguments on that): [4096, 4096] versus [4096, 5000].
    """
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    # Other test modules set TRITON_INTERPRET=1 process-wide; @triton.jit reads it when the kernel is defined.
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = importlib.util.spec_from_file_location("ln_kernel_offline", ops_dir() / "layernorm" / "kernel.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sig = {"X": "*fp16", "W": "*fp16", "B": "*fp16", "Y": "*fp16", "M": "i32", "N": "i32", "stride_x": "i32",
           "stride_y": "i32", "eps": "fp32", "BLOCK_N": "constexpr", "ROWS": "constexpr", "SINGLE": "constexpr",
           "EVICT_FIRST": "constexpr", "STREAM_STORE": "constexpr"}
    consts = {"BLOCK_N": 4096, "ROWS": 2, "SINGLE": True, "EVICT_FIRST": 0, "STREAM_STORE": 0}
    # What Triton's launcher does for 16-byte-aligned pointers and strides that are multiples of 16.
    attrs = {(i,): [["tt.divisibility", 16]] for i in ((0, 1, 2, 3, 5, 6, 7) if divisible else (0, 1, 2, 3))}
    src = ASTSource(fn=mod._layernorm_fwd, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["cubin"]


@pytest.mark.filterwarnings("ignore::UserWarning")  # Triton 3.9's FP-fusion default notice
@pytest.mark.skipif(find_tool("cuobjdump") is None, reason="no cuobjdump (PATH, CUDA_HOME or Triton's wheel)")
def test_real_sass_row_length_decides_vector_width(monkeypatch):
    try:
        aligned, unaligned = _offline_cubin(True, monkeypatch), _offline_cubin(False, monkeypatch)
    except Exception as e:  # noqa: BLE001 - an incomplete Triton install (no ptxas): nothing to test here
        pytest.skip(f"offline sm_90 compilation unavailable: {e}")
    a = resources_from_cubin(aligned)
    u = resources_from_cubin(unaligned)
    assert a.kernel == u.kernel == "_layernorm_fwd"
    assert a.ldg128_fraction == 1.0 and a.stg128_fraction == 1.0
    assert set(u.global_loads) == {16} and u.ldg128_fraction == 0.0   # element-wide fp16 loads, w and b too
    assert set(u.global_stores) == {16}
    assert a.registers and a.registers <= 255 and a.local_loads == 0 and a.stack_bytes == 0
    assert a.instructions < u.instructions
