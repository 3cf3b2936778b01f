"""Read `.ncu-rep` files with NVIDIA's `ncu_report` Python module, found at run time.

`ncu_report` is not on PyPI: it ships inside Nsight Compute, in `<install>/extras/python/` next to the `ncu`
binary (with its compiled companion). `find_ncu` locates the binary, `ncu_python_dirs` lists the folders
that may hold the module, and `load_ncu_report_module` imports it from the first that does. Everything
here is duck-typed against the documented interface (IContext.num_ranges/range_by_idx, IRange.num_actions/
action_by_idx, IAction.name/metric_names/metric_by_name, IMetric.value/as_double/as_string/unit), so
tests can exercise the conversion with a stand-in module.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ...base.records import KernelProfile, RuleHit
from .metrics import BY_RAW, normalize

# Places Nsight Compute is commonly installed, tried after $KERNELLOOP_NCU and $PATH.
NCU_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu", "/usr/local/cuda*/nsight-compute-*/ncu",
)

# Base units of raw metric values as `ncu_report` returns them, for module versions without IMetric.unit().
RAW_BASE_UNITS: dict[str, str] = {"ns": "nsecond", "byte": "byte", "byte/s": "byte/second", "hz": "hz"}


def find_ncu(explicit: str | os.PathLike | None = None) -> Path | None:
    """The ncu binary: `explicit` (None if it does not exist), else $KERNELLOOP_NCU, else `ncu` on $PATH, else a
    common install path."""
    if explicit is not None:
        return Path(explicit) if Path(explicit).is_file() else None
    for cand in (os.environ.get("KERNELLOOP_NCU"), shutil.which("ncu")):
        if cand and Path(cand).is_file():
            return Path(cand)
    for pattern in NCU_GLOBS:
        for hit in sorted(glob.glob(pattern), reverse=True):  # newest version first
            if Path(hit).is_file():
                return Path(hit)
    return None


def ncu_python_dirs(ncu: str | os.PathLike | None) -> list[Path]:
    """Folders that may hold `ncu_report.py` for this ncu, most likely first.

    `ncu` on $PATH is often a symlink or a wrapper script in `<cuda>/bin`; the real install is then
    `<cuda>/nsight-compute-<version>/`. $KERNELLOOP_NCU_PYTHON, when set, comes first.
    """
    dirs: list[Path] = []
    env = os.environ.get("KERNELLOOP_NCU_PYTHON")
    if env:
        dirs.append(Path(env))
    if ncu:
        p = Path(ncu)
        for base in dict.fromkeys([p.parent, p.resolve().parent]):
            dirs.append(base / "extras" / "python")
            dirs.extend(Path(d) / "extras" / "python"
                        for d in sorted(glob.glob(str(base.parent / "nsight-compute*")), reverse=True))
    return [d for d in dict.fromkeys(dirs)]


def load_ncu_report_module(ncu: str | os.PathLike | None = None) -> ModuleType | None:
    """Import NVIDIA's `ncu_report` from the install of `ncu` (or the one found); None when unavailable."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for d in ncu_python_dirs(ncu if ncu is not None else find_ncu()):
        if (d / "ncu_report.py").is_file():
            sys.path.insert(0, str(d))
            try:
                return importlib.import_module("ncu_report")
            except ImportError:
                sys.path.remove(str(d))
    return None


def _metric_value(metric: Any) -> float | str | None:
    """A metric's aggregate value as float or str (instanced values are not read). `value()` returns None for a
    metric without a value, and that stays None: the typed getters would turn it into 0 (as_double documents
    0. when it cannot convert), inventing a measurement."""
    refused = False
    v = None
    if hasattr(metric, "value"):
        try:
            v = metric.value()
        except Exception:  # noqa: BLE001 - a metric kind that refuses value(): the typed getters below
            refused = True
    if refused or not hasattr(metric, "value"):
        has = getattr(metric, "has_value", None)
        if callable(has) and not has():
            return None
        for getter in ("as_double", "as_uint64", "as_string"):
            fn = getattr(metric, getter, None)
            if fn is None:
                continue
            try:
                v = fn()
                break
            except Exception:  # noqa: BLE001
                continue
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, (bytes, str)):
        return v.decode() if isinstance(v, bytes) else v
    return None


def _metric_unit(metric: Any, canonical: str) -> str:
    fn = getattr(metric, "unit", None)
    if callable(fn):
        try:
            u = fn()
            if isinstance(u, str):
                return u
        except Exception:  # noqa: BLE001
            pass
    return RAW_BASE_UNITS.get(canonical, canonical)


_MSG_TYPES = {1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPES = {1: "local", 2: "global"}


def _as_int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _rules(action: Any) -> list[RuleHit]:
    """Rule results where the module offers them (`rule_results_as_dicts`, newer versions)."""
    fn = getattr(action, "rule_results_as_dicts", None)
    if not callable(fn):
        return []
    out = []
    try:
        results = fn()
    except Exception:  # noqa: BLE001
        return []
    for r in results or []:
        if not isinstance(r, dict):
            continue
        # ncu_report's documented shape: rule_identifier, name, section_identifier, rule_message = {title, message,
        # type (MsgType: 1 OK, 2 OPTIMIZATION, 3 WARNING, 4 ERROR)}, speedup_estimation = {type (1 LOCAL,
        # 2 GLOBAL), speedup}. Named as the CSV export names them (OPT/INF/WRN/ERR, local/global).
        msg = r.get("rule_message") or {}
        if not isinstance(msg, dict):
            msg = {"message": str(msg)}
        text = ": ".join(x for x in (str(msg.get("title", "")).strip(), str(msg.get("message", "")).strip()) if x)
        speed = r.get("speedup_estimation") or {}
        value = speed.get("speedup") if isinstance(speed, dict) else None
        out.append(RuleHit(section=str(r.get("section_identifier", "")),
                           name=str(r.get("rule_identifier") or r.get("name") or ""),
                           type=_MSG_TYPES.get(_as_int(msg.get("type")), ""), message=text,
                           speedup_type=_SPEEDUP_TYPES.get(_as_int(speed.get("type")), "")
                           if isinstance(speed, dict) else "",
                           speedup_pct=float(value) if isinstance(value, (int, float)) else None))
    return out


# Raw metrics read for the launch's identity (block, grid, device), not kept as metrics.
_IDENTITY = frozenset({*(f"launch__{k}_dim_{a}" for k in ("block", "grid") for a in "xyz"),
                       "device__attribute_display_name", "device__attribute_compute_capability_major",
                       "device__attribute_compute_capability_minor"})


def action_profile(action: Any, launch_id: int = 0, tool: str = "",
                   keep: Callable[[str], bool] | None = None) -> KernelProfile:
    """One IAction as a KernelProfile: canonical metrics from their raw names; others only if `keep(name)`."""
    metrics: dict[str, float | str] = {}
    extra: dict[str, float | str] = {}
    raw: dict[str, float | str] = {}
    for name in action.metric_names():
        mdef = BY_RAW.get(name)
        wanted = mdef is not None or name in _IDENTITY or (keep is not None and keep(name))
        if not wanted:
            continue
        metric = action.metric_by_name(name)
        value = _metric_value(metric)
        if value is None:
            continue
        raw[name] = value
        if mdef is not None:
            if isinstance(value, float):
                value, _ = normalize(value, _metric_unit(metric, mdef.unit))
            metrics.setdefault(mdef.key, value)
        elif keep is not None and keep(name):
            extra[name] = value

    def dims(prefix: str) -> list[int]:
        vals = [raw.get(f"{prefix}_{axis}") for axis in "xyz"]
        return [int(v) for v in vals] if all(isinstance(v, float) for v in vals) else []

    device = raw.get("device__attribute_display_name", "")
    major, minor = raw.get("device__attribute_compute_capability_major"), \
        raw.get("device__attribute_compute_capability_minor")
    cc = f"{int(major)}.{int(minor)}" if isinstance(major, float) and isinstance(minor, float) else ""
    return KernelProfile(kernel=str(action.name()), launch_id=launch_id, block=dims("launch__block_dim"),
                         grid=dims("launch__grid_dim"), device=str(device), cc=cc, metrics=metrics, extra=extra,
                         rules=_rules(action), source="ncu_report", tool=tool)


def read_report(path: str | os.PathLike, module: ModuleType, *,
                keep: Callable[[str], bool] | None = None) -> list[KernelProfile]:
    """Every action (kernel launch) of every range in the report, in order."""
    ctx = module.load_report(str(path))
    out: list[KernelProfile] = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            out.append(action_profile(rng.action_by_idx(a), launch_id=len(out), keep=keep))
    return out


__all__ = ["action_profile", "find_ncu", "load_ncu_report_module", "ncu_python_dirs", "read_report"]
