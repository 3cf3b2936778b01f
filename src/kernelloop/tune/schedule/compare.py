"""A generated template against the hand-written one it re-expresses: both built ahead of time for sm_90 on this host
(kernelloop.core.build.aot), their SASS compared after normalisation (kernelloop.tune.ptx: addresses, encodings and label
numbers removed; each kernel's own name replaced by '<entry>'), with their registers and shared memory."""

from __future__ import annotations

import base64
from pathlib import Path

from pydantic import Field

from ...base.records import OpSpec, Workload
from ...base.records.base import Record

class SassMatch(Record):
    """One configuration of a hand-written template and of its schedule's generated template, compared."""

    original: str
    generated: str
    config: dict
    built: bool
    identical: bool = Field(description="Same normalised SASS, same registers and shared memory.")
    instructions: int = 0
    registers: tuple[int | None, int | None] = (None, None)
    shared_bytes: tuple[int | None, int | None] = (None, None)
    first_difference: str = ""
    error: str = ""


def _sass(kernel: dict) -> list[str]:
    from ..ptx import parse
    from ..ptx.tools import run_tool
    cubin = base64.b64decode(kernel["asm"]["cubin_b64"])
    return parse.normalise_sass(run_tool("cuobjdump", ["-sass"], cubin), {kernel["name"]: "<entry>"})


def match(original, generated) -> SassMatch:
    """Two ahead-of-time builds (kernelloop.core.build.aot.BuildOutcome, built with keep_asm) compared."""
    from ...core.build.aot import BUILT
    a, b = original, generated
    if a.status != BUILT or b.status != BUILT:
        return SassMatch(original=a.template, generated=b.template, config=b.config, built=False, identical=False,
                         error=f"{a.template}: {a.status} {a.error[:300]}; {b.template}: {b.status} {b.error[:300]}")
    sa = [ln for k in a.kernels for ln in _sass(k)]
    sb = [ln for k in b.kernels for ln in _sass(k)]
    first = ""
    if sa != sb:
        j = next((j for j, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
        first = f"instruction {j}: {sa[j] if j < len(sa) else '(end)'} | {sb[j] if j < len(sb) else '(end)'}"
    return SassMatch(original=a.template, generated=b.template, config=b.config, built=True,
                     identical=sa == sb and a.registers == b.registers and a.shared_bytes == b.shared_bytes,
                     instructions=len(sa), registers=(a.registers, b.registers),
                     shared_bytes=(a.shared_bytes, b.shared_bytes), first_difference=first)


def compare(spec: OpSpec, files: dict[str, Path], workload: Workload,
            pairs: list[tuple[str, str, dict, dict]], jobs: int = 2) -> list[SassMatch]:
    """`pairs`: (original template, generated template, original's config, generated's config); `files` maps each
    template name to its source file. Every configuration is built in one batch (`jobs` build processes)."""
    from ...core.build.aot import build_configs
    configs = []
    for orig, gen, c_orig, c_gen in pairs:
        configs += [{"template": orig, **c_orig}, {"template": gen, **c_gen}]
    outs = build_configs(spec, files, workload, configs, jobs=jobs, keep_asm=True)
    return [match(outs[2 * i], outs[2 * i + 1]) for i in range(len(pairs))]


def library_pairs(configs: dict[str, dict]) -> list[tuple[str, str, dict, dict]]:
    """(original, generated, configs) for each hand-written Gluon template in `configs` (its config there); the
    original's extra parameters (SUBTILE, PINGPONG) come from its spec space."""
    from .library import generated_template
    extra = {"gluon_subtiled": {"SUBTILE": 2}, "gluon_pingpong": {"PINGPONG": 1}}
    return [(name, generated_template(name), {**cfg, **extra.get(name, {})}, dict(cfg))
            for name, cfg in configs.items()]


__all__ = ["SassMatch", "compare", "library_pairs", "match"]
