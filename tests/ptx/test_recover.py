"""Recovery and round trip: every built-in op's sm_90 templates round-trip through Triton's ptxas; cache entries,
.ptx files and cubins are read; a cubin of SASS alone is not recoverable, with the reason."""

import base64
import json

from kernelloop.tune.ptx import parse
from kernelloop.tune.ptx.recover import from_cache_dir, from_cubin, recover
from kernelloop.tune.ptx.roundtrip import round_trip


def test_every_builtin_template_round_trips(surveyed):
    built = [r for r in surveyed if r.status == "built"]
    reports = [k for r in built for k in r.kernels]
    recoverable = [k for k in reports if k.kernel.recoverable]
    ok = [k for k in recoverable if k.round_trip and k.round_trip.ok]
    summary = (f"{len(surveyed)} templates, {len(built)} built, {len(reports)} kernels: {len(recoverable)} "
               f"recoverable, {len(reports) - len(recoverable)} not, {len(ok)} round trips ok")
    assert len(built) == len(surveyed), [(r.op, r.template, r.error) for r in surveyed if r.status != "built"]
    assert len(ok) == len(reports) > 0, summary + str([(k.kernel.name, k.round_trip) for k in reports
                                                       if k not in ok])
    assert {r.op for r in surveyed} >= {"gemm", "rmsnorm", "softmax", "layernorm", "attention"}
    for k in reports:
        rt = k.round_trip
        assert rt.identical_cubin and rt.sass_equal and rt.differences == [] and rt.sass_instructions > 0
        assert k.kernel.target == "sm_90a" and k.kernel.registers == rt.registers and k.kernel.threads > 0
        assert "--gpu-name=sm_90a" in rt.command and "-lineinfo" in rt.command and "-v" in rt.command


def test_a_changed_cubin_is_reported_difference_by_difference(kernels):
    k = kernels["rmsnorm/rowwise"]
    other = kernels["softmax/rowwise"]
    swapped = k.model_copy(update={"cubin_b64": other.cubin_b64})  # the original cubin is another kernel's
    rt = round_trip(swapped)
    assert rt.assembled and not rt.ok and rt.identical_cubin is False and rt.sass_equal is False
    kinds = {d.kind for d in rt.differences}
    assert {"cubin", "sass", "resources", "nv_info"} <= kinds


def test_cache_entry_ptx_and_cubin_inputs(kernels, tmp_path):
    k = kernels["gemm/persistent_ws"]
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / f"{k.name}.ptx").write_text(k.ptx)
    (entry / f"{k.name}.cubin").write_bytes(base64.b64decode(k.cubin_b64))
    (entry / f"{k.name}.json").write_text(json.dumps(k.metadata))
    (entry / f"__grp__{k.name}.json").write_text("{}")
    (got,) = from_cache_dir(entry)
    assert got.recoverable and got.name == k.name and got.shared_bytes == k.metadata["shared"]
    assert got.num_warps == k.metadata["num_warps"] and got.registers == k.registers
    r = recover(entry)
    assert r.origin == "cache" and r.recoverable and r.round_trip_ok
    # TMA descriptors (128-byte parameters aligned to 64 in the constant bank) round-trip as the cubin lays them out
    tma = [x for x in kernels.values() if any(p.count == 128 for p in x.entry.params)]
    assert tma and all(round_trip(x).ok for x in tma[:1])
    r = recover(entry / f"{k.name}.ptx")   # a bare PTX: assembled and checked against its own declarations
    (rep,) = r.kernels
    assert r.origin == "ptx" and rep.round_trip.ok and not rep.round_trip.compared_to_cubin


def test_a_cubin_without_ptx_is_not_recoverable(kernels, tmp_path):
    k = kernels["rmsnorm/rowwise"]
    cubin = base64.b64decode(k.cubin_b64)
    got = from_cubin(cubin)
    assert not got.recoverable and "embeds no PTX" in got.reason and got.registers == k.registers
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    r = recover(path)
    assert r.origin == "cubin" and not r.recoverable and not r.round_trip_ok and "embeds no PTX" in r.reason
    assert r.kernels[0].round_trip is None


def test_ptx_parsing_reads_entry_directives_and_symbols(kernels):
    k = kernels["rmsnorm/rowwise"]
    (e,) = parse.entries(k.ptx)
    assert e.name == k.name and e.visible and e.directives["reqntid"] == [k.threads]
    assert all(p.name.startswith(k.name + "_param_") for p in e.params)
    assert parse.header(k.ptx)["target"] == "sm_90a"
    assert f"visible:{k.name}" in parse.symbols(k.ptx)
    assert parse.static_shared_bytes(".shared .align 16 .b8 a[64];\n.shared .align 4 .f32 b[4];") == 80
    assert parse.static_shared_bytes(".extern .shared .align 16 .b8 global_smem[];") == 0
