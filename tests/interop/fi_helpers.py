"""Shared by the FlashInfer-Trace tests: ops, their smallest interpreter workload, one launchable config each."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

from kernelloop.base.builtin import ops_dir
from kernelloop.core.device import VIRTUAL_HOPPER
from kernelloop.base.records import Candidate, Workload
from kernelloop.core.spec import load_op
from kernelloop.core.spec.space import prune

ROOT = Path(__file__).resolve().parents[2]
# ops whose inputs are data drawn by a generator (spmv_csr's CSR matrix) do not export: a FlashInfer-Trace workload
# draws random tensors (test_fi_roundtrip.py checks the refusal)
OPS = sorted(p.name for p in (ops_dir()).iterdir() if (p / "spec.toml").is_file()
             and all(isinstance(t.init, str) for t in load_op(p).spec.inputs))


def workloads(op: str) -> list[Workload]:
    data = tomllib.loads((ops_dir() / op / "workloads-interpret.toml").read_text())
    return [Workload(op=op, **w) for w in data["workload"]]


def smallest(op: str, dtype=None) -> Workload:
    ws = [w for w in workloads(op) if dtype is None or w.dtype == dtype] or workloads(op)
    size = lambda w: __import__("math").prod(w.axes.values())  # noqa: E731
    return min(ws, key=size)


def candidate(bundle, template: str, workload: Workload) -> Candidate | None:
    """The template's first configuration that pruning keeps for `workload` in the interpreter."""
    t = bundle.spec.template(template)
    kept, _ = prune(t, workload, VIRTUAL_HOPPER)
    if not kept:
        return None
    return Candidate(op=bundle.spec.name, template=t.name, source=bundle.template_sources[t.name], config=kept[0])


def first_candidate(bundle, workload: Workload) -> Candidate:
    for t in bundle.spec.templates:
        c = candidate(bundle, t.name, workload)
        if c is not None:
            return c
    raise AssertionError(f"no template of {bundle.spec.name} launches on {workload.label} in the interpreter")


def import_file(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def bundle(op: str):
    return load_op(ops_dir() / op)
