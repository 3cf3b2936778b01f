"""One fuzz case per loader: draw an input (a mutation of a real file of that kind), run the loader, hold the property.

Each `case_*(data, ctx)` takes hypothesis's `data` and a `Bases` (the real inputs the mutations start from, and a
scratch folder) and raises only when the loader broke the property: an exception other than its documented error,
an error without a message, or an accepted input that yields records which cannot be used (hashed, archived).
"""

from __future__ import annotations

import difflib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import strategies as st
from pydantic import ValidationError

from fuzzkit import EXPRESSIONS, dumps_json, encoded, expect, mutate, mutate_bytes
from kernelloop.base.builtin import ops_dir

ROOT = Path(__file__).resolve().parents[2]
SPEC_OPS = ("rmsnorm", "layernorm", "softmax", "gemm")


@dataclass
class Bases:
    """What the mutations start from. `package`: a real exported package folder; `counts`: its dispatch counts."""

    scratch: Path
    package: Path | None = None
    counts: dict | None = None
    specs: dict = field(default_factory=dict)
    _n: itertools.count = field(default_factory=itertools.count)

    def fresh(self, name: str) -> Path:
        d = self.scratch / f"{name}-{next(self._n)}"
        d.mkdir(parents=True)
        return d


def export_small_package(out: Path) -> Path:
    """A real package: a one-trial interpreter run of rmsnorm on one workload, exported with an exact guard."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "w.toml").write_text('op = "rmsnorm"\n[[workload]]\naxes = { M = 5, N = 256 }\ndtype = "fp16"\n')
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    cli = [sys.executable, "-m", "kernelloop.cli.app"]
    for args in (["optimize", str(ops_dir() / "rmsnorm"), "--workloads", "w.toml", "--budget", "1", "--no-confirm",
                  "--out", "RUN"],
                 ["export", "RUN", "--out", "PKG", "--exact", "--ops", str(ops_dir())]):
        r = subprocess.run(cli + args, cwd=out, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out / "PKG"


def make_bases(scratch: Path, package: Path | None = None) -> Bases:
    b = Bases(scratch=Path(scratch), package=package)
    b.scratch.mkdir(parents=True, exist_ok=True)
    for op in SPEC_OPS:
        b.specs[op] = tomllib.loads((ops_dir() / op / "spec.toml").read_text())
    if package is not None:
        b.counts = package_counts(package)
    return b


def package_counts(package: Path) -> dict:
    """The counts a real package writes after a few calls: one shape its entry covers, one it does not."""
    import torch
    from kernelloop.deliver.package import load_package
    pkg = load_package(package)
    k = pkg["rmsnorm"]
    for m, n in ((5, 256), (5, 256), (3, 128)):
        k(torch.randn(m, n, dtype=torch.float16), torch.ones(n, dtype=torch.float16))
    return pkg.counts()


def _cleanup_modules(prefix: str) -> None:
    for name in [n for n in sys.modules if n.startswith(prefix)]:
        del sys.modules[name]


# -- spec --------------------------------------------------------------------------------------------------------

def case_spec_dict(data, ctx: Bases) -> None:
    """OpSpec.model_validate on mutated spec dicts: pydantic's ValidationError is its documented error."""
    from kernelloop.base.records import OpSpec
    base = ctx.specs[data.draw(st.sampled_from(SPEC_OPS), label="op")]
    spec, _ = expect("OpSpec.model_validate", (ValidationError,), OpSpec.model_validate, mutate(data, base))
    if spec is not None:
        spec.to_json()


REFERENCES = [
    None,  # the op's own
    "def reference(*a, **k):\n    return a[0]\n",
    "def reference(*a, **k):\n    return (a[0], a[0])\n",
    "def reference(*a, **k):\n    return None\n",
    "def reference(*a, **k):\n    return a[0].sum()\n",
    "def reference(*a, **k):\n    return a[0].double()\n",
    "def reference(*a, **k):\n    return [a[0].tolist()]\n",
    "def reference(*a, **k):\n    return {'y': a[0]}\n",
    "def reference(*a, **k):\n    return 1 / 0\n",
    "def reference(*a, **k):\n    raise SystemExit(3)\n",
    "def reference(*a, **k):\n    return reference(*a, **k)\n",
    "import no_such_module_kernelloop_fuzz\ndef reference(*a):\n    pass\n",
    "reference = 3\n",
    "def reference(:\n",
    "",
]
TEMPLATES = [None, "def launch(*a, **k):\n    pass\n", "launch = None\n", "x = 1\n", "def launch(\n", "\x00"]


def case_spec_folder(data, ctx: Bases) -> None:
    """load_op on an op folder with a generated spec.toml, reference.py and templates: SpecError only."""
    from kernelloop.core.spec import SpecError, load_op
    op = data.draw(st.sampled_from(SPEC_OPS), label="op")
    src = ops_dir() / op
    folder = ctx.fresh("spec") / op
    folder.mkdir()
    base = ctx.specs[op]
    how = data.draw(st.integers(0, 3), label="spec form")
    if how == 0:    # structure mutated, written as TOML (maybe damaged)
        spec_bytes = encoded(data, mutate(data, base), as_toml=True)
    elif how == 3:  # every template declares the same generated constraint; generated formulas
        expr = data.draw(EXPRESSIONS, label="constraint")
        spec = {**base, "templates": [{**t, "constraints": [{"expr": expr, "reason": "fuzz"}]}
                                      for t in base["templates"]]}
        for key in ("bytes_formula", "flops_formula"):
            if data.draw(st.booleans(), label=key):
                spec[key] = data.draw(EXPRESSIONS)
        spec_bytes = encoded(data, spec, as_toml=True)
    elif how == 1:  # the real file, damaged as text
        spec_bytes = mutate_bytes(data, (src / "spec.toml").read_bytes())
    else:           # the real file, intact (the damage is in the sources)
        spec_bytes = (src / "spec.toml").read_bytes()
    (folder / "spec.toml").write_bytes(spec_bytes)
    ref = data.draw(st.sampled_from(REFERENCES), label="reference") if data.draw(st.booleans()) else None
    ref_bytes = (src / base["reference"]).read_bytes() if ref is None else ref.encode()
    if data.draw(st.integers(0, 4), label="damage reference") == 0:
        ref_bytes = mutate_bytes(data, ref_bytes)
    (folder / base["reference"]).write_bytes(ref_bytes)
    for t in base["templates"]:
        if data.draw(st.integers(0, 9), label="drop template") == 0:
            continue
        tpl = data.draw(st.sampled_from(TEMPLATES), label="template") if data.draw(st.integers(0, 3)) == 0 else None
        raw = (src / t["file"]).read_bytes() if tpl is None else tpl.encode()
        if data.draw(st.integers(0, 4), label="damage template") == 0:
            raw = mutate_bytes(data, raw)
        (folder / t["file"]).write_bytes(raw)
    bundle, _ = expect("load_op", (SpecError,), load_op, folder)
    if bundle is not None:
        bundle.spec.to_json()
        bundle.reference_hash


def case_workloads(data, ctx: Bases) -> None:
    """load_workloads on generated workload files against a real spec: SpecError only."""
    from kernelloop.core.spec import SpecError, load_op, load_workloads
    op = data.draw(st.sampled_from(("rmsnorm", "gemm")), label="op")
    if ("bundle", op) not in ctx.specs:
        ctx.specs[("bundle", op)] = load_op(ops_dir() / op)
    spec = ctx.specs[("bundle", op)].spec
    src = ops_dir() / op / "workloads-interpret.toml"
    path = ctx.fresh("wl") / "workloads.toml"
    if data.draw(st.booleans(), label="structural"):
        path.write_bytes(encoded(data, mutate(data, tomllib.loads(src.read_text())), as_toml=True))
    else:
        path.write_bytes(mutate_bytes(data, src.read_bytes()))
    ws, _ = expect("load_workloads", (SpecError,), load_workloads, path, spec)
    for w in ws or []:
        w.id, w.label, w.to_json()


# -- proposals ---------------------------------------------------------------------------------------------------

def _proposal_bases(ctx: Bases):
    got = ctx.specs.get("proposal")
    if got is None:
        from kernelloop.base.records import Candidate
        from kernelloop.core.spec import load_op
        bundle = load_op(ops_dir() / "rmsnorm")
        source = bundle.template_sources["rowwise"]
        parent = Candidate(op="rmsnorm", template="rowwise", source=source,
                           config={"BLOCK_N": 256, "ROWS": 1, "num_warps": 4, "EVICT_FIRST": 0, "STREAM_STORE": 0})
        changed = source.replace("num_warps", "num_warps", 1).replace("\n\n", "\n\n# fewer loads\n", 1)
        patch = "".join(difflib.unified_diff(source.splitlines(True), changed.splitlines(True), "a/k.py", "b/k.py"))
        hyp = {"metrics": [{"metric": "sol_dram_pct", "direction": "up"}], "latency_change_pct": -10}
        full = {"source": source, "config": dict(parent.config), "rationale": "wider blocks", "hypothesis": hyp}
        patched = {"patch": patch, "parent_ids": [parent.id], "space": {"BLOCK_N": [256, 512], "num_warps": [4]},
                   "rationale": "a comment", "hypothesis": hyp, "cites": ["k1"]}
        got = ctx.specs["proposal"] = (bundle.spec, parent, [full, patched])
    return got


def case_proposal(data, ctx: Bases) -> None:
    """parse_proposal on reply text or decoded JSON, then materialize: ProposalInvalid only; accepted proposals give
    candidates that can be hashed and archived."""
    from kernelloop.tune.propose.proposal import ProposalInvalid, materialize, parse_proposal
    spec, parent, bases = _proposal_bases(ctx)
    value = mutate(data, data.draw(st.sampled_from(bases), label="base"))
    form = data.draw(st.integers(0, 4), label="form")
    if form == 0:
        arg = value
    else:
        text = dumps_json(value)
        text = (text if form == 1 else f"Here it is:\n```json\n{text}\n```\n" if form == 2 else f"ok {text} done")
        arg = mutate_bytes(data, text.encode()).decode("utf-8", "replace") if form == 4 else text
    proposal, _ = expect("parse_proposal", (ProposalInvalid,), parse_proposal, arg)
    if proposal is None:
        return
    cands, _ = expect("materialize", (ProposalInvalid,), materialize, proposal, spec, {parent.id: parent},
                      proposer="fuzz", known_cites={"k1"})
    for c in cands or []:
        c.id, c.to_json()


# -- packages and counts -----------------------------------------------------------------------------------------

PACKAGE_JSON = ("kernelloop-package.json", "ops/rmsnorm/dispatch.json", "ops/rmsnorm/spec.json", "audit/rmsnorm.json")


def _resign(root: Path) -> None:
    """Recompute the manifest's file hashes and digest and sign it with the user's key, as an exporter with a bug
    would write them: the mutation then reaches the parsers behind the signature and integrity checks."""
    from kernelloop.deliver.package.records import MANIFEST_FILE, PackageManifest
    from kernelloop.deliver.package.runtime import manifest_digest
    from kernelloop.deliver.package.signing import load_signing_key, sign
    from kernelloop.base.records import sha256_hex
    mpath = root / MANIFEST_FILE
    try:
        m = json.loads(mpath.read_text())
    except (OSError, ValueError):
        return
    if not isinstance(m, dict):
        return
    if isinstance(m.get("files"), dict):
        m["files"] = {rel: sha256_hex((root / rel).read_bytes()) if isinstance(rel, str) and (root / rel).is_file()
                      else h for rel, h in m["files"].items()}
    try:
        m["digest"] = manifest_digest(PackageManifest.model_validate({k: v for k, v in m.items()
                                                                      if k not in ("digest", "signature")}))
        m["signature"] = sign(m["digest"], load_signing_key()[0]).model_dump(mode="json")
    except ValueError:   # ValidationError, or a NaN/inf that has no digest
        pass
    mpath.write_text(dumps_json(m))


def case_package(data, ctx: Bases) -> None:
    """load_package on a real exported package with one or more JSON files mutated (then re-signed, or not), or a
    file removed or added: PackageError only."""
    from kernelloop.deliver.package import PackageError, load_package
    root = ctx.fresh("pkg") / "PKG"
    shutil.copytree(ctx.package, root)
    for _ in range(data.draw(st.integers(1, 2), label="files")):
        rel = data.draw(st.sampled_from(PACKAGE_JSON), label="file")
        f = root / rel
        what = data.draw(st.integers(0, 9), label="what")
        if what == 0:
            f.unlink(missing_ok=True)
        elif what == 1:
            (root / "extra.json").write_text("{}")
        elif f.is_file():
            if what <= 6:
                try:
                    value = json.loads(f.read_text())
                except ValueError:
                    value = {}
                f.write_bytes(encoded(data, mutate(data, value)))
            else:
                f.write_bytes(mutate_bytes(data, f.read_bytes()))
    if data.draw(st.integers(0, 3), label="resign") > 0:
        _resign(root)
    try:
        pkg, _ = expect("load_package", (PackageError,), load_package, root)
        if pkg is not None:
            pkg.counts()
    finally:
        _cleanup_modules("kernelloop_pkg_")


def case_counts(data, ctx: Bases) -> None:
    """workloads_from_counts on mutated dispatch counts of a real package: CountsError only."""
    from kernelloop.deliver.package.counts import CountsError, workloads_from_counts
    spec = ctx.specs.setdefault(("bundle", "rmsnorm"), None)
    if spec is None:
        from kernelloop.core.spec import load_op
        spec = ctx.specs[("bundle", "rmsnorm")] = load_op(ops_dir() / "rmsnorm")
    path = ctx.fresh("counts") / "counts.json"
    path.write_bytes(encoded(data, mutate(data, ctx.counts)))
    ws, _ = expect("workloads_from_counts", (CountsError,), workloads_from_counts, path, spec.spec,
                   uncovered_only=data.draw(st.booleans(), label="uncovered"))
    for w in ws or []:
        w.id, w.to_json()


# -- FlashInfer-Trace --------------------------------------------------------------------------------------------

def _fi_bases():
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    try:
        from test_fi_import import definition, solution, workloads
    finally:
        sys.path.remove(str(ROOT / "tests" / "interop"))
    return definition(), solution(), workloads()


def _fi(ctx: Bases):
    if "fi" not in ctx.specs:
        ctx.specs["fi"] = _fi_bases()
    return ctx.specs["fi"]


def case_interop_parse(data, ctx: Bases) -> None:
    """interop.parse of each record kind on mutated dicts or JSON text: InteropError only."""
    from kernelloop.deliver.interop import InteropError, parse
    from kernelloop.deliver.interop import flashinfer_trace as fi
    d, s, wls = _fi(ctx)
    env = {"hardware": "NVIDIA_H100", "libs": {"torch": "2.6.0"}}
    trace = {"definition": d["name"], "workload": wls[0]["workload"] if "workload" in wls[0] else wls[0],
             "solution": s["name"], "evaluation": {"status": "PASSED", "environment": env,
                                                  "timestamp": "2025-06-27T12:45:00Z",
                                                  "correctness": {"max_relative_error": 0.0,
                                                                  "max_absolute_error": 0.0},
                                                  "performance": {"latency_ms": 0.1, "reference_latency_ms": 0.2,
                                                                  "speedup_factor": 2.0}}}
    model, base = data.draw(st.sampled_from([(fi.Definition, d), (fi.Solution, s), (fi.Trace, trace),
                                             (fi.Workload, trace["workload"])]), label="record")
    value = mutate(data, base)
    arg = value if data.draw(st.booleans(), label="as dict") else encoded(data, value).decode("utf-8", "replace")
    expect("interop.parse", (InteropError,), parse, model, arg)


def case_import_definition(data, ctx: Bases) -> None:
    """import_definition of a mutated Definition, workloads and Solution into an ops folder: InteropError only, and
    nothing written when it refuses."""
    from kernelloop.deliver.interop import InteropError, import_definition
    d, s, wls = _fi(ctx)
    which = data.draw(st.integers(0, 7), label="mutated")
    d2 = mutate(data, d) if which & 1 or which == 0 else d
    s2 = mutate(data, s) if which & 2 else s
    w2 = mutate(data, wls) if which & 4 else wls
    ops = ctx.fresh("fi") / "ops"
    got, err = expect("import_definition", (InteropError,), import_definition, d2, ops,
                      workloads=w2 if isinstance(w2, list) else [w2], solution=s2)
    if err is not None:
        assert not ops.exists() or not any(ops.iterdir()), f"refused ({err}) but wrote {list(ops.iterdir())}"
    else:
        got[0].spec.to_json()


CASES = {
    "OpSpec.model_validate": case_spec_dict,
    "load_op": case_spec_folder,
    "load_workloads": case_workloads,
    "parse_proposal+materialize": case_proposal,
    "load_package": case_package,
    "workloads_from_counts": case_counts,
    "interop.parse": case_interop_parse,
    "import_definition": case_import_definition,
}
