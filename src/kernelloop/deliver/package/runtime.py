"""The package runtime: load a package (hashes and environment checked), dispatch calls, count what it saw.

This module imports no search, archive or verifier code: a model that uses a package needs the records, torch and
Triton only. A call's decision is the guard's alone -- the kernel runs when an entry takes the input, the reference
when none does -- and never a reaction to an exception (a CUDA fault is sticky, and a silent fallback would hide a
wrong result).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings
from collections import Counter
from pathlib import Path

import torch
from pydantic import ValidationError

from ...base.records import DType, OpSpec, canonical_json, sha256_hex
from .records import MANIFEST_FILE, PackageManifest
from . import signing
from .dtypes import FROM_TORCH, TORCH_DTYPES
from .replay import observe
from .signing import LoadTrust, PackageSignature
from .table import MEMO_LIMIT, DispatchTable, Dispatcher



class PackageError(RuntimeError):
    """A package that must not run: a file changed, missing or added, or a malformed manifest or table."""


def manifest_digest(manifest: PackageManifest) -> str:
    """sha256 of the manifest's canonical JSON without its `digest` (what `kernelloop-package.json` records).

    An op's empty `archive_commitment` (a package exported before archives were MAC'd had no such field) is left
    out, so such a package's digest is what it recorded: it loads with the opt-in for unsigned packages."""
    doc = manifest.model_dump(mode="json")
    for op in doc.get("ops", []):
        if not op.get("archive_commitment"):
            op.pop("archive_commitment", None)
    return sha256_hex(canonical_json(doc))


def current_versions() -> dict[str, str]:
    """torch and Triton versions of this process (a function, so tests can stand in another environment)."""
    import triton
    return {"torch": torch.__version__, "triton": triton.__version__}


def _major_minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod   # Triton's JIT looks functions' globals up through their module
    spec.loader.exec_module(mod)
    return mod


def interpreter_on() -> bool:
    """Whether this process runs Triton kernels in the interpreter (TRITON_INTERPRET=1 before Triton was imported)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


class _Plan:
    """A decided (dtype, device, shape): the entry or why none, and what its calls allocate and check."""

    __slots__ = ("idx", "reason", "dtype", "shapes", "dtypes", "outputs", "scratch", "scalars", "contiguous", "align",
                 "entry_id", "replay", "recording", "replay_scalars", "replay_why")

    def __init__(self, idx, reason, dtype=None, shapes=(), dtypes=(), outputs=(), scratch=None, scalars=None,
                 contiguous=True, align=1, entry_id=""):
        self.idx, self.reason, self.dtype, self.shapes, self.dtypes = idx, reason, dtype, shapes, dtypes
        self.outputs, self.scratch, self.scalars, self.contiguous = outputs, scratch, scalars or {}, contiguous
        self.align, self.entry_id = align, entry_id
        # launch replay (replay.py): the first call's recording, then the Replay, or why the JIT path stays
        self.replay, self.recording, self.replay_scalars = None, None, None
        self.replay_why = "" if contiguous else "the guard takes non-contiguous inputs (strides vary per call)"


class Kernel:
    """One op of a loaded package: `kernel(*inputs, **scalars)` returns the op's output(s)."""

    def __init__(self, root: Path, spec: OpSpec, table: DispatchTable, arch: str, disabled: str, prefix: str):
        self.spec, self.table, self.name = spec, table, spec.name
        self.disabled = disabled              # why no entry may run ('' when they may)
        self.dispatcher = Dispatcher(table)
        self.reference = _import(root / "reference.py", f"{prefix}_{spec.name}_reference").reference
        mods = {}
        self.launchers = []
        self.ptx: dict[str, str] = {}         # entry id -> whether its PTX-level edit runs, and why not
        for e in table.entries if not disabled else ():
            if e.kernel not in mods:
                mods[e.kernel] = _import(root / e.kernel, f"{prefix}_{spec.name}_{len(mods)}")
            launch = mods[e.kernel].launch
            if e.ptx is not None:
                launch = self._with_ptx(root, e, launch)
            self.launchers.append((launch, dict(e.config)))
        self.n_inputs = len(spec.inputs)
        # where each axis is read from: the first input that has it
        self.axis_at = []
        for a in table.axes:
            self.axis_at.append(next((i, t.shape.index(a)) for i, t in enumerate(spec.inputs) if a in t.shape))
        self.op_input = next((i for i, t in enumerate(spec.inputs) if t.dtype == "op"), 0)
        self.scalar_names = list(spec.scalars)
        self._arch_of: dict[torch.device, str] = {}
        self.plans: dict[tuple, _Plan] = {}
        self.hits: Counter = Counter()
        self.fallbacks: Counter = Counter()
        self.seen: Counter = Counter()
        self.torch_op = None
        self.backwards = 0                    # backward calls (the reference's gradient, recomputed: torch_ops.py)
        self.replay_enabled = os.environ.get("KERNELLOOP_REPLAY", "1") != "0"
        self.replays: Counter = Counter()     # entry id -> calls issued through the replay

    def _with_ptx(self, root: Path, entry, launch):
        """`launch` with the entry's proved PTX edit substituted (kernelloop.core.build.ptx_override), where this process is the
        environment it was proved in; else `launch` itself, the reason kept in `self.ptx`."""
        o = entry.ptx
        here = current_versions()["triton"]
        if interpreter_on() or not torch.cuda.is_available():
            self.ptx[entry.id] = "not used: no CUDA device (or the interpreter)"
            return launch
        if here != o.triton:
            self.ptx[entry.id] = f"not used: proved with Triton {o.triton}, this process has {here}"
            return launch
        from ...core.build.ptx_override import PtxOverrides
        overrides = PtxOverrides({o.kernel: {o.original_ptx_sha256: str(root / o.file)}})
        self.ptx[entry.id] = f"used: {o.rule} ({o.edit_id}) where the kernel compiles to the PTX it was made from"

        def launch_edited(*args, **kwargs):
            with overrides.installed():
                return launch(*args, **kwargs)
        launch_edited.overrides = overrides
        return launch_edited

    # -- the hot path --------------------------------------------------------------------------------------------
    def arch(self, device: torch.device) -> str:
        a = self._arch_of.get(device)
        if a is None:
            if device.type == "cuda":
                major, minor = torch.cuda.get_device_capability(device)
                a = f"sm_{major}{minor}"
            else:
                a = "interpret"
            self._arch_of[device] = a
        return a

    def _plan(self, dtype_t: torch.dtype, device: torch.device, shape: tuple[int, ...]) -> "_Plan":
        """Everything a call of this (dtype, device, shape) needs that does not depend on the tensors themselves,
        decided once: the entry (or why none), the inputs' shapes and dtypes, the outputs to allocate."""
        dtype = FROM_TORCH.get(dtype_t)
        if dtype is None:
            return _Plan(-1, f"dtype {dtype_t} is not one of the op's")
        arch = self.arch(device)
        idx = self.dispatcher.select(dtype, arch, shape)
        if idx < 0:
            archs = sorted({e.guard.arch for e in self.table.entries})
            if archs and arch not in archs:
                return _Plan(-1, f"the package was verified on {', '.join(archs)}; this device is {arch}",
                             dtype=dtype)
            return _Plan(-1, "no entry covers the shape", dtype=dtype)
        g = self.table.entries[idx].guard
        axes = dict(zip(self.table.axes, shape))
        shapes = tuple(torch.Size(t.dims(axes)) for t in self.spec.inputs)
        dtypes = tuple(TORCH_DTYPES[self.spec.tensor_dtype(t, dtype)] for t in self.spec.inputs)
        outs = tuple((t.dims(axes), TORCH_DTYPES[self.spec.tensor_dtype(t, dtype)])
                     for t in self.spec.outputs)
        scratch = None
        if self.spec.scratch is not None:
            scratch = (self.spec.scratch_numel(axes), TORCH_DTYPES[DType(self.spec.scratch.dtype)])
        return _Plan(idx, "", dtype=dtype, shapes=shapes, dtypes=dtypes, outputs=outs, scratch=scratch,
                     scalars=dict(g.scalars), contiguous=g.contiguous, align=g.align_bytes,
                     entry_id=self.table.entries[idx].id)

    def _why_not(self, plan: "_Plan", inputs, scalars: dict, device) -> str:
        """The slow path's reason when a planned entry's per-tensor conditions fail ('' when they hold)."""
        for name, value in plan.scalars.items():
            if scalars.get(name, value) != value:
                return f"scalar {name}={scalars.get(name)} differs from the verified {value}"
        for t, tensor, shape, dt in zip(self.spec.inputs, inputs, plan.shapes, plan.dtypes):
            if tensor.shape != shape:
                return f"input {t.name} has shape {tuple(tensor.shape)}, not the spec's {t.shape}"
            if tensor.dtype is not dt:
                return f"input {t.name} is {tensor.dtype}"
            if tensor.device != device:
                return f"input {t.name} is on {tensor.device}"
            if plan.contiguous and not tensor.is_contiguous():
                return f"input {t.name} is not contiguous"
            if tensor.data_ptr() % plan.align:
                return f"input {t.name} is not {plan.align}-byte aligned"
        return ""

    def decide(self, inputs, scalars: dict) -> tuple[int, str]:
        """(entry index, '') or (-1, why the reference runs). The steady state is one dict lookup plus a few
        attribute reads per tensor."""
        plan, why = self._decide(inputs, scalars)
        return (plan.idx, "") if plan is not None else (-1, why)

    def _decide(self, inputs, scalars: dict):
        """(the plan, '') when an entry runs, else (None, why the reference runs)."""
        if self.disabled:
            return None, self.disabled
        x = inputs[self.op_input]
        device = x.device
        shape = tuple(inputs[i].shape[d] if d < inputs[i].dim() else -1 for i, d in self.axis_at)
        key = (x.dtype, device, shape)
        plan = self.plans.get(key)
        if plan is None:
            if len(self.plans) >= MEMO_LIMIT:
                self.plans.clear()
            plan = self.plans[key] = self._plan(x.dtype, device, shape)
        if plan.dtype is not None:
            self.seen[(plan.dtype.value, shape)] += 1
        if plan.idx < 0:
            return None, plan.reason
        ok = scalars == plan.scalars if plan.scalars else True
        if ok:
            align = plan.align
            for tensor, shp, dt in zip(inputs, plan.shapes, plan.dtypes):
                if tensor.shape != shp or tensor.dtype is not dt or tensor.device != device \
                        or not tensor.is_contiguous() or tensor.data_ptr() % align:
                    ok = False
                    break
        if not ok:
            why = self._why_not(plan, inputs, scalars, device)
            if why:
                return None, why
        return plan, ""

    def __call__(self, *inputs, **scalars):
        if len(inputs) != self.n_inputs:
            raise TypeError(f"{self.name} takes {self.n_inputs} tensors ({', '.join(t.name for t in self.spec.inputs)})"
                            f", got {len(inputs)}")
        for n in self.scalar_names:
            if n not in scalars:
                scalars[n] = self.spec.scalars[n]
        plan, why = self._decide(inputs, scalars)
        if plan is None:
            self.fallbacks[why] += 1
            return self.reference(*inputs, **scalars)
        return self._run(plan, inputs, scalars)

    def run_entry(self, idx: int, inputs, scalars: dict):
        """Launch entry `idx` on inputs its guard takes (the caller decided): fresh outputs, inputs untouched."""
        x = inputs[self.op_input]
        return self._run(self.plans[(x.dtype, x.device, tuple(inputs[i].shape[d] for i, d in self.axis_at))],
                         inputs, scalars)

    def _run(self, plan: "_Plan", inputs, scalars: dict):
        launch, config = self.launchers[plan.idx]
        x = inputs[self.op_input]
        self.hits[plan.entry_id] += 1
        device = x.device
        outs = [torch.empty(shape, dtype=dt, device=device) for shape, dt in plan.outputs]
        tensors = [*inputs, *outs]
        if plan.scratch is not None:
            tensors.append(torch.empty(plan.scratch[0], dtype=plan.scratch[1], device=device))
        if plan.replay is not None and scalars == plan.replay_scalars and not (plan.align % 16 and any(
                t.data_ptr() % 16 for t in inputs)):
            self.replays[plan.entry_id] += 1
            plan.replay(tensors, device.index)
        elif plan.replay_why or plan.replay is not None or device.type != "cuda" or not self.replay_enabled:
            self._launch(launch, config, tensors, outs, scalars, plan)
        else:
            plan.replay_why = observe(plan, tensors, scalars,
                                      lambda: self._launch(launch, config, tensors, outs, scalars, plan))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _launch(self, launch, config, tensors, outs, scalars, plan) -> None:
        n = self.n_inputs + len(outs)
        if plan.scratch is not None:
            launch(*tensors[:n], scratch=tensors[n], **scalars, **config)
        else:
            launch(*tensors, **scalars, **config)

    # -- what it saw -----------------------------------------------------------------------------------------------
    def counts(self) -> dict:
        return {"op": self.name, "entries": {e.id: self.hits[e.id] for e in self.table.entries},
                **({"ptx": dict(self.ptx)} if self.ptx else {}),
                "replayed": {e.id: self.replays[e.id] for e in self.table.entries if self.replays[e.id]},
                "not_replayed": sorted({p.replay_why for p in self.plans.values() if p.idx >= 0 and p.replay_why}),
                "fallbacks": dict(self.fallbacks), "backward_by_reference": self.backwards,
                "shapes": [{"dtype": d, "axes": dict(zip(self.table.axes, s)), "calls": n,
                            "covered": self._covered(d, s)}
                           for (d, s), n in sorted(self.seen.items())]}

    def _covered(self, dtype: str, shape: tuple) -> bool:
        return any(e.guard.dtype.value == dtype and all(shape[k] in e.guard.axes[a]
                                                        for k, a in enumerate(self.table.axes))
                   for e in self.table.entries)

    def reset_counts(self) -> None:
        self.plans.clear()
        self.hits.clear()
        self.replays.clear()
        self.fallbacks.clear()
        self.seen.clear()
        self.backwards = 0


class Package:
    """A loaded package: `package[op]` is its Kernel; `register()` makes them torch ops."""

    def __init__(self, path: Path, manifest: PackageManifest, kernels: dict[str, Kernel]):
        self.path, self.manifest, self.kernels = path, manifest, kernels
        self.trust: LoadTrust | None = None   # the load report's word on the signature (load_package sets it)
        self.namespace = "kl_" + manifest_digest(manifest)[:10]
        self._lib = None

    def __getitem__(self, op: str) -> Kernel:
        return self.kernels[op]

    def __contains__(self, op: str) -> bool:
        return op in self.kernels

    def counts(self) -> dict:
        """Per op: hits per entry, reference fallbacks by reason, every (dtype, shape) seen with its call count."""
        return {"package": self.manifest.name, "version": self.manifest.version,
                "ops": {name: k.counts() for name, k in self.kernels.items()}}

    def write_counts(self, path: str | Path) -> Path:
        """The counts as JSON, which `kernelloop optimize --workloads` reads as workloads weighted by calls."""
        path = Path(path)
        path.write_text(json.dumps(self.counts(), indent=1))
        return path

    def register(self):
        """Define each op as `torch.ops.<namespace>.<op>` (eager, torch.compile, CUDA graphs); returns self."""
        if self._lib is not None:
            return self
        from .torch_ops import register_package
        self._lib = register_package(self)
        return self


def _read_manifest(root: Path) -> tuple[PackageManifest, PackageSignature | None]:
    path = root / MANIFEST_FILE
    if not path.is_file():
        raise PackageError(f"{root}: no {MANIFEST_FILE} (not a kernelloop package)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise PackageError(f"{path}: not valid JSON: {e}") from None
    except OSError as e:
        raise PackageError(f"{path}: cannot read: {e.strerror or e}") from None
    digest = data.pop("digest", None) if isinstance(data, dict) else None
    signature = data.pop("signature", None) if isinstance(data, dict) else None
    try:
        manifest = PackageManifest.model_validate(data)
        signature = None if signature is None else PackageSignature.model_validate(signature)
    except ValidationError as e:
        err = e.errors()[0]
        raise PackageError(f"{path}: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
    try:
        ours = manifest_digest(manifest)
    except ValueError as e:   # NaN or infinity: no canonical JSON, so no digest
        raise PackageError(f"{path}: not a manifest kernelloop writes ({e})") from None
    if digest != ours:
        raise PackageError(f"{path}: the manifest was changed after export (its digest does not match)")
    return manifest, signature


def _check_signature(root: Path, manifest: PackageManifest, signature: PackageSignature | None,
                     allow_unsigned: bool, trust: list) -> LoadTrust:
    """The signature over the manifest's digest (deliver/package/signing.py), checked before any file is read as code."""
    try:
        got = signing.check(signature, manifest_digest(manifest), signing.trusted_keys(list(trust)))
    except signing.SigningError as e:
        raise PackageError(f"{root}: {e}: refusing to load a tampered package") from None
    if got.trusted:
        return got
    if not allow_unsigned:
        raise PackageError(f"{root}: {got.note}: refusing to load it (trust its signer with `kernelloop keys trust "
                           f"PUBKEY_FILE` or trust=[...], or load it anyway with allow_unsigned=True)")
    note = f"{got.note}; loaded because the caller allowed unsigned or untrusted packages"
    warnings.warn(f"kernelloop package {manifest.name}: {note}", stacklevel=3)
    return got.model_copy(update={"note": note})


def _inside(rel: str) -> bool:
    """Whether a manifest path names a file inside the package (relative, no '..', no empty or odd parts)."""
    parts = rel.split("/")
    return bool(rel) and "\\" not in rel and "\x00" not in rel and not rel.startswith("/") and \
        all(p not in ("", ".", "..") for p in parts) and not Path(rel).is_absolute()


def _check_files(root: Path, manifest: PackageManifest) -> None:
    for rel, want in manifest.files.items():
        if not _inside(rel):
            raise PackageError(f"{root}: manifest path {rel[:200]!r} is not a file inside the package")
        f = root / rel
        if not f.is_file():
            raise PackageError(f"{root}: {rel} is missing")
        if sha256_hex(f.read_bytes()) != want:
            raise PackageError(f"{root}: {rel} changed after export (sha256 differs from the manifest): refusing to "
                               f"load a tampered package")
    listed = set(manifest.files) | {MANIFEST_FILE}
    extra = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts and p.relative_to(root).as_posix() not in listed)
    if extra:
        raise PackageError(f"{root}: files not in the manifest: {', '.join(extra[:5])}")


def _check_op(root: Path, name: str, spec: OpSpec, table: DispatchTable, manifest: PackageManifest) -> None:
    """The op's spec, table and manifest agree: one op name, the spec's axes in order, every file it imports
    listed (and so hashed) in the manifest."""
    where = f"{root}: ops/{name}"
    if spec.name != name or table.op != name:
        raise PackageError(f"{where}: the manifest, spec.json and dispatch.json name different ops "
                           f"({name!r}, {spec.name!r}, {table.op!r})")
    if table.axes != list(spec.axes):
        raise PackageError(f"{where}: dispatch.json's axes {table.axes} are not the spec's {list(spec.axes)}")
    if [o.op for o in manifest.ops].count(name) > 1:
        raise PackageError(f"{root}: op {name!r} is packaged twice")
    for rel in ["reference.py", *(e.kernel for e in table.entries)]:
        if not _inside(rel) or f"ops/{name}/{rel}" not in manifest.files:
            raise PackageError(f"{where}: {rel[:200]!r} is not a file of the package's manifest")
    templates = {t.name for t in spec.templates}
    for e in table.entries:
        if e.template not in templates:
            raise PackageError(f"{where}: entry {e.id} names template {e.template!r}, not one of the spec's")


def load_package(path: str | Path, *, allow_unsigned: bool = False, trust: list = ()) -> Package:
    """Load and check a package. Its signature is checked first (deliver/package/signing.py): an unsigned package, or one
    signed by a key outside the trust store (the user's own key, `kernelloop keys trust`, `trust`: public key files
    or raw keys), is a PackageError unless `allow_unsigned`, and `Package.trust` says which it was. Then a changed,
    missing or extra file is a PackageError; only then are its files imported. Another torch/Triton major.minor than
    the one measured disables that op's kernels (the reference runs, with a warning naming why)."""
    root = Path(path)
    manifest, signature = _read_manifest(root)
    trust_report = _check_signature(root, manifest, signature, allow_unsigned, list(trust))
    _check_files(root, manifest)
    now = current_versions()
    prefix = "kernelloop_pkg_" + manifest_digest(manifest)[:10]
    kernels = {}
    for op in manifest.ops:
        base = root / "ops" / op.op
        try:
            spec = OpSpec.model_validate_json((base / "spec.json").read_text(encoding="utf-8"))
            table = DispatchTable.model_validate_json((base / "dispatch.json").read_text(encoding="utf-8"))
        except (ValidationError, ValueError, OSError) as e:
            raise PackageError(f"{base}: malformed spec or dispatch table: {e}") from None
        _check_op(root, op.op, spec, table, manifest)
        disabled = ""
        if (op.measured_on.arch == "interpret") != interpreter_on():
            disabled = ("environment: verified in the Triton interpreter; this process compiles kernels (set "
                        "TRITON_INTERPRET=1 before importing triton to run them on CPU tensors)"
                        if op.measured_on.arch == "interpret" else
                        f"environment: verified on {op.measured_on.arch}; TRITON_INTERPRET=1 is set in this process")
        for lib in ("torch", "triton"):
            if disabled:
                break
            then, here = _major_minor(getattr(op.measured_on, lib)), _major_minor(now[lib])
            if then != here:
                disabled = (f"environment: measured with {lib} {then}, this process has {lib} {here} "
                            f"(the reference runs)")
        if disabled:
            warnings.warn(f"kernelloop package {manifest.name}: {op.op}: {disabled}", stacklevel=2)
        try:
            kernels[op.op] = Kernel(base, spec, table, op.measured_on.arch, disabled, prefix)
        except Exception as e:  # noqa: BLE001 - importing the package's own files failed: it must not run
            raise PackageError(f"{base}: cannot import its reference or kernels: {type(e).__name__}: {e}") from None
    package = Package(root, manifest, kernels)
    package.trust = trust_report
    return package
