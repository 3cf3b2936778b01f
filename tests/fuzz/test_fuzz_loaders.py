"""Parsers that cannot be crashed (issue 24, item 6): every loader that reads outside input, fuzzed with hypothesis.

Property: any input ends in the loader's documented error with a message (SpecError, ProposalInvalid, PackageError,
CountsError, InteropError; pydantic's ValidationError for OpSpec.model_validate), or loads into records that can be
hashed and archived -- never another exception. The example counts are bounded so the folder runs in well under a
minute; benchmarks/fuzz_loaders.py runs the same cases longer and prints the inputs tried.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loader_cases import CASES
from kernelloop.base.builtin import ops_dir

EXAMPLES = {"OpSpec.model_validate": 250, "load_op": 150, "load_workloads": 200, "parse_proposal+materialize": 250,
            "load_package": 120, "workloads_from_counts": 250, "interop.parse": 250, "import_definition": 120}


@pytest.mark.parametrize("loader", sorted(CASES))
def test_loader_cannot_be_crashed(loader, fuzz_bases):
    @settings(max_examples=EXAMPLES[loader], deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def prop(data):
        CASES[loader](data, fuzz_bases)

    prop()


def test_every_loader_is_fuzzed():
    assert set(EXAMPLES) == set(CASES)


# -- the crashes the fuzzing found, kept as plain regression tests ----------------------------------------------

def test_malformed_expression_is_a_validation_error():
    import tomllib

    from pydantic import ValidationError

    from kernelloop.base.records import OpSpec
    from loader_cases import ROOT
    d = tomllib.loads((ops_dir() / "rmsnorm" / "spec.toml").read_text())
    for bad in ("1 +", "(" * 300 + "1" + ")" * 300, "9" * 5000):
        with pytest.raises(ValidationError, match="bytes_formula"):
            OpSpec.model_validate({**d, "bytes_formula": bad})


def test_non_utf8_files_are_loader_errors(tmp_path):
    import json

    from kernelloop.deliver.package.counts import CountsError, workloads_from_counts
    from kernelloop.core.spec import SpecError, load_op, load_workloads
    from loader_cases import ROOT
    spec = load_op(ops_dir() / "rmsnorm").spec
    f = tmp_path / "w.toml"
    f.write_bytes(b'op = "rmsnorm"\n\xff\n')
    with pytest.raises(SpecError, match="not UTF-8"):
        load_workloads(f, spec)
    f.write_bytes(b"\x80{}")
    with pytest.raises(CountsError, match="not UTF-8"):
        workloads_from_counts(f, spec)
    f.write_text(json.dumps({"ops": {"rmsnorm": {"shapes": [3]}}}))
    with pytest.raises(CountsError, match="shapes.0"):
        workloads_from_counts(f, spec)


def test_non_finite_proposal_numbers_are_invalid():
    import json

    from kernelloop.tune.propose.proposal import ProposalInvalid, parse_proposal
    hyp = {"metrics": [{"metric": "registers", "direction": "down"}], "latency_change_pct": -5}
    ok = {"source": "def launch(*a, **k):\n    pass\n", "rationale": "r", "hypothesis": hyp}
    with pytest.raises(ProposalInvalid, match="finite"):
        parse_proposal(json.dumps({**ok, "config": {"BLOCK": float("nan")}}))
    with pytest.raises(ProposalInvalid, match="latency_change_pct"):
        parse_proposal(json.dumps({**ok, "hypothesis": {**hyp, "latency_change_pct": float("nan")}}))


def test_resigned_package_that_points_outside_is_a_package_error(fuzz_bases, tmp_path):
    """A package whose JSON was changed and re-signed (digests recomputed, as a buggy exporter would write them):
    an entry's kernel outside the manifest, axes that are not the spec's, or a manifest path out of the folder are
    PackageErrors, not StopIteration/KeyError/an import of an arbitrary file."""
    import json
    import shutil

    from kernelloop.deliver.package import PackageError, load_package
    from loader_cases import _resign

    def broken(edit_dispatch=None, edit_manifest=None):
        root = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
        shutil.copytree(fuzz_bases.package, root)
        if edit_dispatch:
            f = root / "ops/rmsnorm/dispatch.json"
            d = json.loads(f.read_text())
            edit_dispatch(d)
            f.write_text(json.dumps(d))
        if edit_manifest:
            f = root / "kernelloop-package.json"
            m = json.loads(f.read_text())
            edit_manifest(m)
            f.write_text(json.dumps(m))
        _resign(root)
        return root

    def kernel_outside(d):
        d["entries"][0]["kernel"] = "../../../../etc/hostname"

    def axes_swapped(d):
        d["axes"] = ["N", "M"]

    def path_outside(m):
        m["files"]["/etc/hostname"] = "0" * 64

    def infinite_time(m):
        m["created"] = float("inf")

    for root, words in ((broken(edit_manifest=infinite_time), "not a manifest kernelloop writes"),
                        (broken(kernel_outside), "not a file of the package"),
                        (broken(axes_swapped), "not the spec's"),
                        (broken(edit_manifest=path_outside), "not a file inside the package")):
        with pytest.raises(PackageError, match=words):
            load_package(root)
    load_package(broken())   # re-signing alone changes nothing
