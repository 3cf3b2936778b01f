"""Lowering: a `Schedule` to the Gluon source of a template module (`launch(a, b, c, **config)`).

Every operation of a role becomes one Gluon statement, in the order the schedule lists it:

    wait(ready, phase)          mbarrier.wait(ready.index(s), (it // STAGES) & 1)
    wait(turn[0], phase^1)      mbarrier.wait(turn.index(0), (j & 1) ^ 1)
    arrive(empty, previous)     mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1[, pred=ks > 0])
    load                        mbarrier.expect(bar, TILE_BYTES); two TMA copies into slot s completing on bar
    mma                         warpgroup_mma(a slot, b slot [or its half], acc, is_async=True) per accumulator
    mma_wait(n)                 warpgroup_mma_wait(n, deps=(accumulators))
    sync                        a barrier over the partition's warps

around a fixed frame: the persistent tile loop (GROUP_M super-groups), the ring position counter `it` (one step a
k-step; with alternating math roles each skips the other roles' tiles), the tile counter `j` where a barrier array's
phase needs it, the ring and staging allocations in a fixed order, `gl.warp_specialize` over the roles in order
(worker warps and registers from the schedule) and the epilogue, per accumulator: the fused operations (a bias
loaded in the accumulator's column layout and added, then one activation: exact erf GELU, SiLU or ReLU; `EPILOGUES`)
and the store (a TMA store through a staging buffer, awaited before the buffer is written again, or a masked store
from registers). The fused operations are a template parameter like the tile: `EPILOGUE` ('none', 'bias',
'bias_gelu', ...) selects them at launch through constexprs, so a launch without them builds the plain store's
kernel, and `launch(a, b, c)` or `launch(a, b, bias, c)` is the signature of the op's other templates.

The frame is templates/schedule_module.py.j2 (package data); the Gluon functions every generated module shares
(`_mma_layout`, `_tile_coords`, `_b_slice`, `_fused`) are pasted from gluon_frame.py, because a generated module is
candidate source, which the static rules let import triton, torch, math, typing and functools only.

The module keeps the schedule it came from as `SCHEDULE` (JSON text), so any candidate built from it can be checked
against its schedule (`schedule_of`). What the config sets (tile, stages, warps, EPILOGUE) stays a template parameter
(`Schedule.bind`).
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import jinja2

from .records import Arrive, Load, Mma, MmaWait, Role, Schedule, Sync, Wait
from ...base import pyast


class NotLowerable(ValueError):
    """The schedule asks for something the lowering cannot express yet (the message names the field)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def _accumulators(s: Schedule) -> list[str]:
    return ["acc"] if s.issue.accumulators == 1 else ["left", "right"]


def _op_lines(s: Schedule, role: Role, op, section: str) -> list[str]:
    """The Gluon statements of one operation (indentation added by the caller)."""
    accs = _accumulators(s)
    if isinstance(op, Wait):
        if op.barrier in ("ready", "empty"):
            phase = "(it // STAGES) & 1"
            return [f"mbarrier.wait({op.barrier}.index(s), {phase if op.parity == 'phase' else f'({phase}) ^ 1'})"]
        phase = "j & 1"
        return [f"mbarrier.wait({op.barrier}.index({op.index}), {phase if op.parity == 'phase' else f'({phase}) ^ 1'})"]
    if isinstance(op, Arrive):
        if op.barrier in ("ready", "empty"):
            slot = "s" if op.slot == "current" else "(it + STAGES - 1) % STAGES"
            target = f"{op.barrier}.index({slot})"
        else:
            target = f"{op.barrier}.index({op.index})"
        pred = ", pred=ks > 0" if op.skip_first and section == "k_step" else ""
        return [f"mbarrier.arrive({target}, count={op.count}{pred})"]
    if isinstance(op, Load):
        return [f"bar = {op.barrier}.index(s)",
                "mbarrier.expect(bar, TILE_BYTES)",
                "_tma_load(a_desc, [pid_m * BLOCK_M, ks * BLOCK_K], bar, a_bufs.index(s))",
                "if TRANS_B:",
                "    _tma_load(b_desc, [pid_n * BLOCK_N, ks * BLOCK_K], bar, b_bufs.index(s))",
                "else:",
                "    _tma_load(b_desc, [ks * BLOCK_K, pid_n * BLOCK_N], bar, b_bufs.index(s))"]
    if isinstance(op, Mma):
        if len(accs) == 1:
            return ["if TRANS_B:", "    b = b_bufs.index(s).permute((1, 0))", "else:", "    b = b_bufs.index(s)",
                    "acc = warpgroup_mma(a_bufs.index(s), b, acc, is_async=True)"]
        return [f"{a} = warpgroup_mma(a_bufs.index(s), _b_slice(b_bufs, s, {i} * WIDTH, WIDTH, TRANS_B), {a}, "
                "is_async=True)" for i, a in enumerate(accs)]
    if isinstance(op, MmaWait):
        deps = f"({accs[0]},)" if len(accs) == 1 else f"({', '.join(accs)})"
        return [f"{', '.join(accs)} = warpgroup_mma_wait({op.pending}, deps={deps})"]
    if isinstance(op, Sync):
        return ["_sync_warps()"]
    raise NotLowerable(f"roles[{s.role_index(role.name)}].{section}", f"no lowering for {op!r}")


def _section(s: Schedule, role: Role, section: str) -> list[str]:
    return [line for op in getattr(role, section) for line in _op_lines(s, role, op, section)]


def _barrier_args(s: Schedule, role: Role) -> list[str]:
    used = {getattr(op, "barrier", None) for _, _, op in role.ops()}
    return [b.name for b in s.barriers if b.name in used]


def _uses_tile_count(role: Role) -> bool:
    return any(isinstance(op, Wait) and op.index is not None for _, _, op in role.ops())


_TEMPLATE = Path(__file__).parent / "templates" / "schedule_module.py.j2"
_FRAME = Path(__file__).parent / "gluon_frame.py"


@functools.cache
def _module_template() -> jinja2.Template:
    """templates/schedule_module.py.j2: the generated module's frame around the roles' statements."""
    return jinja2.Template(_TEMPLATE.read_text(encoding="utf-8"), trim_blocks=True, lstrip_blocks=False,
                           keep_trailing_newline=True)


def _helpers(accumulators: int) -> str:
    """The source of `gluon_frame.FRAME`'s definitions (decorators included), from kernelloop/tune/schedule/
    gluon_frame.py, in FRAME's order; `_b_slice` only for half-width accumulators. Pasted, not imported: the
    generated module is candidate source, which may import only what the static rules allow (gluon_frame's
    docstring)."""
    text = _FRAME.read_text(encoding="utf-8")   # read, not imported: importing it needs Triton's Gluon
    lines = text.splitlines()
    body = pyast.parse(text).body
    defs = {node.name: node for node in body if isinstance(node, ast.FunctionDef)}
    frame = next(ast.literal_eval(n.value) for n in body
                 if isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] == ["FRAME"])
    out = []
    for name in frame:
        if name == "_b_slice" and accumulators == 1:
            continue
        node = defs[name]
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        out.append("\n".join(lines[first - 1:node.end_lineno]))
    return "\n\n".join(out)


def _wrap(head: str, args: str, indent: int, width: int = 116) -> str:
    """`head` + comma-separated `args`, continued under the first argument (lines of at most `width`)."""
    pad = " " * (indent + len(head))
    lines, line = [], " " * indent + head
    for part in args.split(", "):
        piece = part if line.endswith("(") else " " + part
        if len(line) + len(piece) + 1 > width and not line.endswith("("):
            lines.append(line)
            line = pad + part
        else:
            line += piece
        line += ","
    lines.append(line.rstrip(","))
    return "\n".join(lines)


EPILOGUES = {"none": (False, 0), "bias": (True, 0), "gelu": (False, 1), "silu": (False, 2), "relu": (False, 3),
             "bias_gelu": (True, 1), "bias_silu": (True, 2), "bias_relu": (True, 3)}
"""The fused epilogues the lowering expresses: EPILOGUE (epilogue.fused joined by '_') -> (HAS_BIAS, ACT): a bias,
then at most one activation (ACT 1: exact GELU 0.5 x (1 + erf(x / sqrt 2)), as F.gelu; 2: SiLU; 3: ReLU)."""


def _epilogue(s: Schedule) -> list[str]:
    """Per accumulator: the fused operations (`_fused`, selected by the HAS_BIAS and ACT constexprs, so a launch
    without them compiles to the plain store), then the store."""
    accs = _accumulators(s)
    out: list[str] = []
    for i, a in enumerate(accs):
        col = "pid_n * BLOCK_N" + (f" + {i} * WIDTH" if i else "")
        out.append(f"{a} = _fused({a}, Bias, {col}, N, WIDTH, layout, HAS_BIAS, ACT)")
        if s.epilogue.store == "tma":
            out += ["tma.store_wait(pendings=0)", f"c_smem.store({a}.to(c_desc.dtype))", "fence_async_shared()",
                    f"_tma_store(c_desc, [pid_m * BLOCK_M, {col}], c_smem)"]
        else:
            out += [f"offs_m = pid_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))",
                    f"offs_n = {col} + gl.arange(0, WIDTH, layout=gl.SliceLayout(0, layout))",
                    "mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
                    f"gl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :], {a}.to(c_desc.dtype), mask=mask)"]
    return out


def _check_lowerable(s: Schedule) -> None:
    if s.epilogue.name not in EPILOGUES:
        raise NotLowerable("epilogue.fused", f"{s.epilogue.fused} has no lowering: a 'bias' first, then at most one "
                                             f"activation ('gelu', 'silu' or 'relu'); lowered: {sorted(EPILOGUES)}")
    if s.issue.tiles == "alternate" and s.epilogue.store != "tma":
        raise NotLowerable("epilogue.store", "alternating math roles store c through their staging buffers (tma)")
    for i, r in enumerate(s.roles):
        if r.kind == "loader" and r.warps != 1:
            raise NotLowerable(f"roles[{i}].warps", "the loader is one warp (one thread issues the TMA copies)")
        for sec, j, op in r.ops():
            if r.kind == "loader" and isinstance(op, (Mma, MmaWait)):
                raise NotLowerable(f"roles[{i}].{sec}[{j}]", "the loader issues no MMA")
            if r.kind == "math" and isinstance(op, Load):
                raise NotLowerable(f"roles[{i}].{sec}[{j}]", "math roles issue no TMA load")
            if isinstance(op, (Mma, Load)) and sec != "k_step":
                raise NotLowerable(f"roles[{i}].{sec}[{j}]", f"a {op.op} belongs in the k-step")
            if isinstance(op, Wait) and op.barrier in ("ready", "empty") and sec != "k_step":
                raise NotLowerable(f"roles[{i}].{sec}[{j}]", "a wait on a ring slot belongs in the k-step")


def lower(schedule: Schedule) -> str:
    """The Gluon source of a template module for `schedule` (NotLowerable names the field it cannot express)."""
    s = schedule
    _check_lowerable(s)
    accs = _accumulators(s)
    alternate = s.issue.tiles == "alternate"
    math = s.math_roles
    tma_store = s.epilogue.store == "tma"
    c_args = "" if alternate else "C, stride_cm, "
    consts = "BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, STAGES, TRANS_B"
    const_params = ("BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr, "
                    "STAGES: gl.constexpr, TRANS_B: gl.constexpr")
    roles = []
    for r in s.roles:
        bars = _barrier_args(s, r)
        if r.kind == "loader":
            runtime = ["a_desc", "b_desc", "a_bufs", "b_bufs", "ready", "empty", *bars, "M", "N", "K"]
            params = ", ".join(runtime) + ", " + const_params + ", TILE_BYTES: gl.constexpr"
            call = ", ".join(runtime) + ", " + consts + ", TILE_BYTES"
            tiles = "gl.program_id(0), num_m * num_n, gl.num_programs(0)"
            consumer = 0
        else:
            staging = "c_bufs" if alternate else "c_smem"
            runtime = ["a_bufs", "b_bufs", "ready", "empty", *bars, "c_desc", staging,
                       *([] if alternate else ["C", "stride_cm"]), "M", "N", "K", "Bias"]
            params = (", ".join(runtime) + ", " + const_params
                      + ", HAS_BIAS: gl.constexpr, ACT: gl.constexpr, num_warps: gl.constexpr")
            call = ", ".join(runtime) + ", " + consts + ", HAS_BIAS, ACT, num_warps"
            consumer = math.index(r)
            tiles = (f"gl.program_id(0) + {consumer} * programs, num_m * num_n, {len(math)} * programs" if alternate
                     else "gl.program_id(0), num_m * num_n, gl.num_programs(0)")
        roles.append({"name": r.name, "kind": r.kind, "signature": _wrap(f"def _{r.name}(", params + "):", 0),
                      "entry": _wrap(f"(_{r.name}, (", call + ")),", 8).lstrip(), "tiles": tiles,
                      "consumer": consumer, "tile_count": _uses_tile_count(r),
                      "tile_begin": _section(s, r, "tile_begin"),
                      "k_step": _section(s, r, "k_step"), "tile_end": _section(s, r, "tile_end")})
    workers = s.roles[1:]
    text = _module_template().render(
        s=s, summary=describe(s), helpers=_helpers(len(accs)), schedule_json=repr(s.to_json()), accs=accs, roles=roles, alternate=alternate,
        n_math=len(math), epilogue=_epilogue(s), epilogues=EPILOGUES, tma_store=tma_store, c_args=c_args,
        c_call="" if alternate else "c, c.stride(0), ", kernel=f"_gemm_{s.name}_kernel",
        worker_warps=", ".join("num_warps" if r.kind == "math" else str(r.warps) for r in workers),
        worker_regs=", ".join(str(r.registers) for r in workers), loader_warps=s.loader.warps)
    pyast.parse(text)   # the lowering's own bug would show here, not in a build process
    return text


def describe(s: Schedule) -> str:
    """One paragraph of what the schedule does (the generated module's docstring)."""
    math = s.math_roles
    acc = "one whole-tile accumulator" if s.issue.accumulators == 1 else "two half-width accumulators"
    how = (f"{len(math)} math roles of {math[0].warps} warps alternating whole tiles" if s.issue.tiles == "alternate"
           else f"one math role of {math[0].warps} warps")
    return (f"a persistent grid; a loader of {s.loader.warps} warp(s) fills a ring of {s.ring.stages} slots; {how}, "
            f"{acc}; c stored by {'TMA through shared memory' if s.epilogue.store == 'tma' else 'registers'} "
            f"(tile {s.tile.block_m}x{s.tile.block_n}x{s.tile.block_k} and epilogue {s.epilogue.name!r} as "
            f"generated; the config sets them).")


def schedule_of(source: str) -> Schedule | None:
    """The schedule a generated module was lowered from (its `SCHEDULE`), None for any other source."""
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["SCHEDULE"]:
            try:
                return Schedule.model_validate(json.loads(ast.literal_eval(node.value)))
            except (ValueError, TypeError):
                return None
    return None


__all__ = ["EPILOGUES", "NotLowerable", "describe", "lower", "schedule_of"]
