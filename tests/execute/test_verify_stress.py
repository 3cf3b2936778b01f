"""No honest kernel rejected at random: the interpreter verification of every row op's templates, several secrets,
under a busy background process, passes every time with no input regeneration drift; and the CPU inputs a worker
draws are bit-identical to the controller's whatever the process, its thread count, or the state of torch's
MKL-backed math (whose first parallel call in a process was seen to return other values: core/reference/inputs.py).
The long run is benchmarks/verify_stress.py."""

import hashlib
import runpy
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelloop.base.records import Workload
from kernelloop.core.reference import inputs as inputs_mod
from kernelloop.core.reference.inputs import make_inputs
from kernelloop.core.spec import load_op

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "verify_stress.py"
SHAPES = {"layernorm": {"M": 64, "N": 1000}, "softmax": {"M": 40, "N": 3000}}   # > 2048 elements: parallel in torch

DIGEST = """
import hashlib, sys, torch
sys.path.insert(0, {src!r})
torch.set_num_threads(int(sys.argv[1]))
if sys.argv[2] == "touch":   # torch's MKL-backed math called first, as a worker's earlier work would
    x = torch.rand(64, 512); torch.log(x); torch.exp(x); torch.sqrt(x)
from kernelloop.base.records import Workload
from kernelloop.core.reference.inputs import make_inputs
from kernelloop.core.spec import load_op
h = hashlib.sha256()
for op, axes in {shapes!r}.items():
    spec = load_op({folders!r}[op]).spec
    for dt in ("fp16", "bf16", "fp32"):
        for dist in spec.inputs_policy.distributions:
            for t in make_inputs(spec, Workload(op=op, axes=axes, dtype=dt), 4242, "cpu", dist):
                h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
print(h.hexdigest())
"""


def _op_folder(op: str) -> Path:
    return runpy.run_path(str(SCRIPT))["op_folder"](op)


def _digest_here() -> str:
    h = hashlib.sha256()
    for op, axes in SHAPES.items():
        spec = load_op(_op_folder(op)).spec
        for dt in ("fp16", "bf16", "fp32"):
            for dist in spec.inputs_policy.distributions:
                for t in make_inputs(spec, Workload(op=op, axes=axes, dtype=dt), 4242, "cpu", dist):
                    h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_cpu_inputs_never_call_torchs_transcendental_math(monkeypatch):
    """log, sqrt, pow, exp of torch (MKL's vector math on CPU tensors) are not used to draw CPU inputs: the heavy-tailed
    and mixed-scale steps run in NumPy, float64, and give the same distribution as before (Student-t with 2 degrees
    of freedom; 10^U(-2, 2) per row)."""
    called = []
    for name in ("log", "sqrt", "pow", "exp", "rsqrt", "log1p", "sin", "cos"):
        real = getattr(torch, name)

        def spy(*args, _real=real, _name=name, **kw):
            called.append(_name)
            return _real(*args, **kw)
        monkeypatch.setattr(inputs_mod.torch, name, spy)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _n=name, _r=getattr(torch.Tensor, name), **k:
                            (called.append(_n), _r(self, *a, **k))[1])
    g = torch.Generator().manual_seed(3)
    base = torch.randn(512, 64, generator=g)
    outs = {d: inputs_mod._activation(base, g, d, 0.5, 1.0) for d in ("heavy_tail", "mixed")}
    monkeypatch.undo()
    assert called == [], called
    for out in outs.values():
        assert out.dtype == torch.float32 and out.shape == base.shape and bool(torch.isfinite(out).all())
    # the same draws as torch's float64 math would give, within its rounding
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    b = torch.randn(64, 64, generator=g1)
    torch.randn(64, 64, generator=g2)
    u = torch.rand(b.shape, generator=g2).clamp_min(1e-12)
    t64 = ((b.double() / torch.sqrt(-torch.log(u.double()))).clamp(-1e3, 1e3) + 0.5).float()
    assert torch.allclose(inputs_mod._activation(b, g1, "heavy_tail", 0.5, 1.0), t64, rtol=1e-6, atol=1e-6)
    rows = outs["mixed"].abs().mean(dim=1)
    assert float(rows.max() / rows.min()) > 100          # row scales spread over orders of magnitude


PROCESSES = [(1, "touch"), (2, "fresh"), (3, "touch")]


@pytest.fixture(scope="module")
def digests() -> dict[tuple[int, str], subprocess.CompletedProcess]:
    """DIGEST in a fresh process per (threads, touch) of PROCESSES, the processes started side by side."""
    code = DIGEST.format(src=str(ROOT / "src"), shapes=SHAPES, folders={op: str(_op_folder(op)) for op in SHAPES})
    procs = {key: subprocess.Popen([sys.executable, "-c", code, str(key[0]), key[1]], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for key in PROCESSES}
    try:
        done = {}
        for key, p in procs.items():   # a digest and a short log each: no pipe fills while another is read
            out, err = p.communicate(timeout=120)
            done[key] = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        return done
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("threads,touch", PROCESSES)
def test_inputs_are_bit_identical_across_processes_and_thread_counts(digests, threads, touch):
    out = digests[threads, touch]
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == _digest_here()


def test_honest_kernels_always_pass_the_interpreter_verification_under_load(tmp_path):
    """Every template of layernorm and softmax on the first workload of its interpreter suite (3 + 3 batteries of
    2 checks, the first run 3 times, and every held-out case), in a fresh worker, one busy process spinning: all
    PASSED, no drift. The secret is new every run, so CI runs add up to many seeds; a failure names its case and
    seed. (benchmarks/verify_stress.py runs every op and workload, with many secrets.)"""
    ns = runpy.run_path(str(SCRIPT))
    rec = ns["stress"](["layernorm", "softmax"], seeds=1, load=1, checks=2, work=tmp_path, workloads_per_op=1,
                       secret_prefix=f"ci-{secrets.token_hex(4)}", log=lambda *a: None)
    assert rec.verifications == 6 and rec.cases > 5 * rec.verifications
    assert rec.failures == [], rec.failures
    assert rec.statuses == {"PASSED": rec.verifications}
    assert rec.drift_notes == 0


def test_the_first_call_probe_counts_processes():
    rec = runpy.run_path(str(SCRIPT))["first_call"](2, "float32")
    assert rec.processes == 2 and 0 <= rec.differed <= 2 and len(rec.examples) == rec.differed
