"""Exported solutions run: every template of every op (one configuration each) as a FlashInfer Solution file,
called through its entry point `run` in the Triton interpreter on CPU tensors, judged by kernelloop's verifier
against the reference at the op's tolerance -- in both calling styles. One solution also runs in a process where
kernelloop cannot be imported, driven like flashinfer-bench drives one (Definition reference vs solution).

TRITON_INTERPRET must be set before triton is imported anywhere, hence the first lines.
"""

import os

if os.environ.get("KERNELLOOP_GPU_TIER") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import ast  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import pytest  # noqa: E402

from kernelloop.deliver.interop import Solution, export_definition, export_solution  # noqa: E402
from kernelloop.base.records import Status  # noqa: E402
from kernelloop.core.reference.inputs import alloc_outputs, make_inputs  # noqa: E402
from kernelloop.core.reference.truth import truth  # noqa: E402
from kernelloop.core.verify.compare import check_outputs  # noqa: E402

from fi_helpers import OPS, bundle, candidate, import_file, smallest  # noqa: E402

CASES = [(op, t.name) for op in OPS for t in bundle(op).spec.templates]


@pytest.mark.parametrize("op,template", CASES, ids=[f"{o}-{t}" for o, t in CASES])
def test_exported_solution_runs_and_matches(op, template, tmp_path):
    b = bundle(op)
    w = smallest(op)
    c = candidate(b, template, w)
    d = export_definition(b, w.dtype)
    for dps in (False, True):
        if c is None:  # sm_90-only templates (Gluon): nothing launches in the interpreter; the export still builds
            any_config = {p.name: p.values[0] for p in b.spec.template(template).params}
            from kernelloop.base.records import Candidate
            c0 = Candidate(op=op, template=template, source=b.template_sources[template], config=any_config)
            ast.parse(export_solution(c0, b.spec, w.dtype, destination_passing_style=dps).sources[0].content)
            continue
        sol = export_solution(c, b.spec, w.dtype, destination_passing_style=dps)
        assert Solution.model_validate_json(sol.model_dump_json()) == sol
        assert sol.definition == d.name and sol.spec.entry_point == "main.py::run"
        assert sol.spec.language.value == "triton" and sol.spec.destination_passing_style is dps
        src = sol.sources[0].content
        run = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "run")
        want = [*d.inputs, *(d.outputs if dps else [])]  # the format's rule: parameters named as the Definition's
        assert [a.arg for a in run.args.args] == want
        path = tmp_path / f"main_{dps}.py"
        path.write_text(src)
        mod = import_file(path, f"fi_solution_{op}_{template}_{dps}")
        inputs = make_inputs(b.spec, w, seed=7)
        before = [i.clone() for i in inputs]
        args = [*inputs, *b.spec.scalars.values()]  # the Definition's input order: tensors, then scalars
        if dps:
            outputs = alloc_outputs(b.spec, w, "cpu")  # poisoned: an element left unwritten fails
            assert mod.run(*args, *outputs) is None
        else:
            ret = mod.run(*args)
            outputs = list(ret) if isinstance(ret, tuple) else [ret]
        refs = truth(b.spec, b.folder / b.spec.reference, inputs)
        v = check_outputs(b.spec, w, outputs, refs, before, inputs, case=f"{w.label} dps={dps}")
        assert v.status is Status.PASSED, v.message


DRIVER = textwrap.dedent('''
    import importlib.abc, json, os, sys
    os.environ["TRITON_INTERPRET"] = "1"

    class NoKernelloop(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] == "kernelloop":
                raise ImportError("kernelloop is not importable here")
    sys.meta_path.insert(0, NoKernelloop())

    import torch
    definition = json.load(open(sys.argv[1]))
    solution = json.load(open(sys.argv[2]))
    axes = json.loads(sys.argv[3])
    scalars = json.loads(sys.argv[4])
    ref_ns = {}
    exec(definition["reference"], ref_ns)
    src = solution["sources"][0]["content"]
    sol_ns = {"__name__": "solution_main"}
    path = os.path.join(os.path.dirname(sys.argv[2]), "main.py")
    open(path, "w").write(src)
    import importlib.util
    spec = importlib.util.spec_from_file_location("solution_main", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    g = torch.Generator().manual_seed(0)
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    args = []
    for name, t in definition["inputs"].items():
        if t["shape"] is None:
            args.append(scalars[name])
        else:
            args.append(torch.randn([axes[a] for a in t["shape"]], generator=g).to(dt[t["dtype"]]))
    outs = [torch.empty([axes[a] for a in t["shape"]], dtype=dt[t["dtype"]]) for t in definition["outputs"].values()]
    mod.run(*args, *outs)
    want = ref_ns["run"](*args)
    want = list(want) if isinstance(want, tuple) else [want]
    err = max(float((o.double() - r.double()).abs().max()) for o, r in zip(outs, want))
    spread = min(float(r.double().std()) for r in want)
    loaded = any(m.startswith("kernelloop") for m in sys.modules)
    print(json.dumps({"max_abs": err, "ref_std": spread, "kernelloop_loaded": loaded}))
''')


def test_solution_is_self_contained(tmp_path):
    """A FlashInfer-style driver with kernelloop blocked: Definition reference vs the DPS solution."""
    b = bundle("rmsnorm")
    w = smallest("rmsnorm", dtype=b.spec.dtypes[0])
    d = export_definition(b, w.dtype)
    sol = export_solution(candidate(b, "chunked", w), b.spec, w.dtype, destination_passing_style=True)
    (tmp_path / "def.json").write_text(d.model_dump_json())
    (tmp_path / "sol.json").write_text(sol.model_dump_json())
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "def.json"),
                        str(tmp_path / "sol.json"), json.dumps(w.axes), json.dumps(b.spec.scalars)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["kernelloop_loaded"] is False
    assert out["ref_std"] > 0.1  # the answer varies: a match is not two constant tensors agreeing
    assert out["max_abs"] <= 1e-2  # within rmsnorm's fp16 tolerance (atol 1e-2)
