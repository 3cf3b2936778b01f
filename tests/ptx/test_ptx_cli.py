"""`kernelloop ptx recover` on a .ptx, a cubin of SASS alone, and a candidate built for sm_90 on this machine."""

import base64
import json

from typer.testing import CliRunner

from kernelloop.builtin import ops_dir
from kernelloop.cli.app import app
from kernelloop.records import Candidate

runner = CliRunner()


def test_recover_a_ptx_and_a_cubin(kernels, tmp_path):
    k = kernels["rmsnorm/rowwise"]
    (tmp_path / "k.ptx").write_text(k.ptx)
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.ptx"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["recoverable"] and data["round_trip_ok"] and "ptx" not in data["kernels"][0]["kernel"]
    (tmp_path / "k.cubin").write_bytes(base64.b64decode(k.cubin_b64))
    res = runner.invoke(app, ["ptx", "recover", str(tmp_path / "k.cubin")])
    assert res.exit_code == 1 and "not recoverable" in res.stdout and "embeds no PTX" in res.stdout


def test_recover_a_candidate(kernels, tmp_path):
    source = (ops_dir() / "rmsnorm" / "kernel.py").read_text()
    cand = Candidate(op="rmsnorm", template="rowwise", source=source,
                     config={"BLOCK_N": 1024, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
    path = tmp_path / "cand.json"
    path.write_text(cand.to_json())
    res = runner.invoke(app, ["ptx", "recover", str(path), "--workload", "M=64,N=1024"])
    assert res.exit_code == 0, res.output
    assert "_rmsnorm_fwd" in res.stdout and "round trip: ok" in res.stdout and "byte-identical" in res.stdout
    assert "threads 128" in res.stdout
