"""An op imported from FlashInfer-Trace exports again: its template already defines `run` and the `_kl_` helpers
of the first export, so the second entry point takes fresh names (`run2`, `_kl2_`) instead of refusing the
candidate or rebinding the names the first entry point calls; the re-exported solution runs in the interpreter
and matches the reference.

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

from kernelloop.deliver.interop import export_definition, export_solution, import_definition  # noqa: E402
from kernelloop.base.records import Candidate, Status  # noqa: E402
from kernelloop.core.reference.inputs import alloc_outputs, make_inputs  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.verify.compare import check_outputs  # noqa: E402

from fi_helpers import bundle, candidate, import_file, smallest  # noqa: E402


def test_imported_solution_exports_again_and_runs(tmp_path):
    b = bundle("rmsnorm")
    w = smallest("rmsnorm")
    first = export_solution(candidate(b, "rowwise", w), b.spec, w.dtype)
    assert first.spec.entry_point == "main.py::run"
    imported, _ = import_definition(export_definition(b, w.dtype), tmp_path / "ops", solution=first)
    t = imported.spec.templates[0]
    again = Candidate(op=imported.spec.name, template=t.name, source=imported.template_sources[t.name],
                      config={p.name: p.values[0] for p in t.params})

    sol = export_solution(again, imported.spec, w.dtype)  # refused before: "already defines `run`"
    assert sol.spec.entry_point == "main.py::run2"
    src = sol.sources[0].content
    assert "_kl2_launch = launch" in src and src.count("\n_kl_launch = launch") == 1
    path = tmp_path / "main.py"
    path.write_text(src)
    mod = import_file(path, "fi_reexported_rmsnorm")
    inputs = make_inputs(b.spec, w, seed=3)
    before = [i.clone() for i in inputs]
    outputs = alloc_outputs(b.spec, w, "cpu")  # poisoned: an element left unwritten fails
    assert mod.run2(*inputs, *b.spec.scalars.values(), *outputs) is None
    v = check_outputs(b.spec, w, outputs, truth(b.spec, b.folder / b.spec.reference, inputs), before, inputs,
                      case=w.label)
    assert v.status is Status.PASSED, v.message
