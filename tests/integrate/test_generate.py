"""`kernelloop.e2e_generate` and `kernelloop e2e --generate`: greedy static-cache generation of llama-tiny (fp16)
with the integrate package (conftest.py: its rmsnorm entries take 64 features at 1..16 rows, so the prefill's 12 rows
and the decode steps' 2 rows both reach the kernel) against the unpatched model: identical tokens, a kernel wrong on
decode steps only named at its step, timings that add up, the CUDA graph skipped on the CPU with the reason.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import json  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import kernelloop  # noqa: E402
from kernelloop.cli.app import app  # noqa: E402
from kernelloop.cli.common import ExitCode  # noqa: E402
from kernelloop.cli.e2e_generate import render  # noqa: E402
from kernelloop.deliver.capture.models import llama_tiny  # noqa: E402
from kernelloop.deliver.integrate.generate import GenerateReport  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("KERNELLOOP_GPU_TIER") == "1", reason="interpreter tests")
BATCH, PROMPT, NEW = 2, 6, 4


def _model():
    return llama_tiny(dtype="fp16", batch=BATCH, seq=PROMPT)


@pytest.fixture(scope="module")
def report(package_dir) -> GenerateReport:
    pkg = kernelloop.load_package(package_dir)
    model, (ids,) = _model()
    return kernelloop.e2e_generate(model, pkg, ids, new_tokens=NEW)


def test_the_patched_model_generates_the_original_tokens(report):
    norms = [s["path"] for s in report.sites["sites"] if s["replaced"] and s["op"] == "rmsnorm"]
    assert report.patched and len(norms) == 5                     # the five RMSNorms of llama-tiny
    hits = report.counts["ops"]["rmsnorm"]["entries"]
    assert sum(hits.values()) == 5 * NEW                          # each norm, the prefill and every decode step
    tk = report.tokens
    assert tk.identical and tk.passed and tk.compared_steps == NEW and tk.first_failure is None
    assert all(s.check.passed and not s.rows_differ for s in tk.steps)
    assert report.outputs_ok and report.delivered is None and "not measured" in report.speed_note


def test_the_timings_are_ordered_and_add_up(report):
    assert [g.variant for g in report.timings] == ["original", "patched"]
    for g in report.timings:
        assert g.step.n == NEW - 1 and g.runs == 1
        assert 0 < g.step.p50_ms <= g.step.p90_ms <= g.step.p99_ms
        assert g.tokens_per_s * g.generate_ms / 1000 == pytest.approx(BATCH * NEW)
        # the marks lie inside the generate() call: prefill and the steps fit in its wall time
        assert g.prefill_ms + g.step.mean_ms * g.step.n <= g.generate_ms


def test_on_the_cpu_the_graph_is_skipped_with_the_reason(report):
    assert report.graph == [] and "CUDA graphs need a CUDA device" in report.graph_note
    out = Console(record=True, width=200)
    render(report, out)
    text = out.export_text()
    assert "tokens: identical" in text and "step p50" in text and "CUDA graph: skipped" in text


def test_a_kernel_wrong_on_decode_steps_is_not_delivered_and_names_the_step(package_dir):
    pkg = kernelloop.load_package(package_dir)
    k = pkg["rmsnorm"]

    def wrong(launch):
        def call(x, w, y, **kw):   # right on the prefill's 12 rows, sign-flipped on a decode step's 2
            launch(x, w, y, **kw)
            if x.shape[0] == BATCH:
                y.neg_()
        return call
    k.launchers = [(wrong(launch), cfg) for launch, cfg in k.launchers]
    model, (ids,) = _model()
    r = kernelloop.e2e_generate(model, pkg, ids, new_tokens=NEW)
    assert r.patched and not r.outputs_ok and r.delivered is False
    assert r.tokens.first_failure == 1 and r.tokens.steps[0].check.passed
    assert not r.tokens.steps[1].check.passed


def test_the_cli_prints_the_record_as_json_and_writes_it(package_dir, tmp_path):
    r = CliRunner().invoke(app, ["e2e", "llama-tiny", str(package_dir), "--generate", "--device", "cpu",
                                 "--batch", str(BATCH), "--seq", str(PROMPT), "--new-tokens", "3", "--out",
                                 str(tmp_path), "--json"])
    assert r.exit_code == ExitCode.OK, r.output
    printed = GenerateReport.model_validate(json.loads(r.stdout))
    assert printed == GenerateReport.model_validate_json((tmp_path / "generate.json").read_text())
    assert printed.tokens.identical and printed.new_tokens == 3 and printed.prompt == PROMPT
    assert printed.graph_note.startswith("skipped")


def test_a_model_without_generate_is_bad_input(package_dir, tmp_path):
    factories = os.path.join(os.path.dirname(__file__), "e2e_factories.py")
    r = CliRunner().invoke(app, ["e2e", f"{factories}:fp16_by_default", str(package_dir), "--generate", "--device",
                                 "cpu", "--out", str(tmp_path)])
    assert r.exit_code == ExitCode.BAD_INPUT, r.output
    assert "has no generate()" in r.output and not (tmp_path / "generate.json").exists()


def test_tokens_that_differ_at_a_near_tie_pass_and_at_a_decisive_row_fail():
    from kernelloop.deliver.integrate.e2e import Tolerance
    from kernelloop.deliver.integrate.generate import check_tokens
    # step 0: row 0's top two are 0.002 apart, row 1 is decisive; the new logits move by at most 0.002
    orig = torch.tensor([[[1.0, 0.998, 0.0], [5.0, 0.0, 0.0]], [[3.0, 0.0, 0.0], [3.0, 0.0, 0.0]]])
    tied = orig.clone()
    tied[0, 0] = torch.tensor([0.999, 1.0, 0.0])
    tol = Tolerance(min_cosine=0.99)
    ok = check_tokens(orig.argmax(-1).T, orig, tied.argmax(-1).T, tied, tol)
    assert not ok.identical and ok.first_divergence == 0 and ok.passed and ok.steps[0].near_tie_rows == [0]
    assert ok.compared_steps == 1 and "not compared" in ok.note
    flipped = orig.clone()
    flipped[0, 1] = torch.tensor([5.0, 5.5, 0.0])          # row 1 was decisive: a flip there fails
    bad = check_tokens(orig.argmax(-1).T, orig, flipped.argmax(-1).T, flipped, tol)
    assert not bad.passed and bad.first_failure == 0 and bad.steps[0].rows_differ == [1]
