"""Rule-based PTX edits: each rule is a real transformation of a kernel's PTX inside its hot windows, proposed as a
`PtxCandidate` with a falsifiable hypothesis. Every rule here keeps the kernel's results bit for bit (none reorders
floating-point work), so the differential proof compares bit for bit.

- cache_hint: the global loads of one pointer parameter in the hot windows get an L1 eviction priority
  (`.L1::evict_first` for data streamed once, `.L1::evict_last` for data re-read), or the global stores get the
  streaming operator `.cs`; hints only (PTX ISA: they change where lines live, never values).
- prefetch_size: the loads (and `cp.async` copies) of the hot loops ask L2 to fetch 128 or 256 bytes around each miss (`.L2::128B`,
  `.L2::256B`): a prefetch hint with no effect on values.
- unroll: a single-block loop (Triton's loops are: `L: body; @%p bra L;`) runs its body twice per trip, with the
  exit test between the copies (`@!%p bra EXIT`): the same instructions run in the same order for any trip count,
  odd ones included; PTX registers are not SSA, so the copy reuses them.
- predicate: a short block that a branch jumps over (`@%p bra L; A; B; L:`) becomes predicated instructions
  (`@!%p A; @!%p B;`), the branch removed (if-conversion of a masked tail); only for unpredicated, side-effect-free
  instructions and loads.
- hoist_loads: within a basic block, each plain global load (with the `mov`s that zero its predicated destination)
  moves up as far as its operands allow, never past a store, barrier, fence, branch or anything not understood.

Not implemented, on purpose: widening vector accesses (`v2` pairs to `v4`) needs an alignment fact the PTX does
not carry (Triton emits `.align 1` pointer parameters), so no widening is sound from the PTX alone; `.nc` loads
(read-only path) are unsound when an output aliases an input; a prefetch *distance* (`prefetch.global.L2` of a
later iteration's address) needs each address's stride per trip, which this reader does not derive.
"""

from __future__ import annotations

import re

from ...base.records.base import sha256_hex
from . import blocks as B
from .patch import hunks
from .records import HotWindow, PtxCandidate, RecoveredKernel
from .windows import hot_windows, window_of

HOT_SHARE = 0.05          # windows below this share of the estimated work are left alone
_QUALIFIED = re.compile(r"\.(?:ca|cg|cs|lu|cv|nc|L1::\w+|L2::\w+)\b")
_LD = re.compile(r"\bld\.global((?:\.[\w:]+)*?)(\.v[248])?(\.[bsuf]\d+)(?=\s)")
_ST = re.compile(r"\bst\.global((?:\.[\w:]+)*?)(\.v[248])?(\.[bsuf]\d+)(?=\s)")
_ADDR = re.compile(r"\[\s*(%\w+)")
_CP_ASYNC = re.compile(r"^cp\.async\.c[ag]\.shared(?:::cta)?\.global$")
_CP_ASYNC_TEXT = re.compile(r"\bcp\.async\.c[ag]\.shared(?:::cta)?\.global\b")


class Context:
    """What every rule reads: the kernel's lines, their classification, blocks and hot windows."""

    def __init__(self, kernel: RecoveredKernel, windows: list[HotWindow]):
        self.kernel = kernel
        self.text = kernel.ptx
        self.lines = kernel.ptx.split("\n")
        self.classified = B.classify(self.lines, kernel.name or None)
        self.blocks = B.blocks(self.classified)
        self.windows = windows
        self.hot = [w for w in windows if w.weight >= HOT_SHARE]
        self.by_line = {ln.index: ln for ln in self.classified}
        self.defs: dict[str, list[B.Instr]] = {}
        for ln in self.classified:
            if ln.kind == "instr":
                for r in ln.instr.defs:
                    self.defs.setdefault(r, []).append(ln.instr)

    def in_hot(self, line: int) -> HotWindow | None:
        w = window_of(self.hot, line)
        return w

    def params_of(self, reg: str, limit: int = 200) -> set[int]:
        """The pointer parameters (their ordinals) an address register is computed from."""
        out, seen, todo = set(), set(), [reg]
        while todo and len(seen) < limit:
            r = todo.pop()
            if r in seen:
                continue
            seen.add(r)
            for ins in self.defs.get(r, []):
                m = re.search(r"_param_(\d+)\]", ins.operands) if ins.opcode.startswith("ld.param") else None
                if m:
                    out.add(int(m.group(1)))
                else:
                    todo += [u for u in ins.uses if u.startswith("%rd")]
        return out

    def candidate(self, edited: str, rule: str, hypothesis: str, windows: list[HotWindow], parent: str,
                  op: str = "") -> PtxCandidate:
        return PtxCandidate(op=op, parent_candidate_id=parent, kernel=self.kernel.name,
                            original_ptx_sha256=sha256_hex(self.text), hunks=hunks(self.text, edited),
                            windows=sorted({w.start: w for w in windows}.values(), key=lambda w: w.start), rule=rule,
                            hypothesis=hypothesis, proposer="rules")


def _where(ws: list[HotWindow]) -> str:
    return ", ".join(f"{w.label or 'entry block'} ({'loop, ' if w.loop else ''}{w.weight:.0%} of the estimate)"
                     for w in sorted({w.start: w for w in ws}.values(), key=lambda w: -w.weight))


def _accesses(ctx: Context, store: bool) -> list[tuple[B.Instr, HotWindow]]:
    out = []
    for ln in ctx.classified:
        ins = ln.instr
        if ln.kind != "instr" or not (ins.is_global_store if store else ins.is_global_load):
            continue
        w = ctx.in_hot(ins.line)
        if w is not None:
            out.append((ins, w))
    return out


def _requalify(line: str, pattern: re.Pattern, prefix: str, qualifier: str) -> str | None:
    m = pattern.search(line)
    if m is None or _QUALIFIED.search(m.group(1) or ""):
        return None   # already carries a cache operator or eviction priority: left as Triton chose
    return line[:m.start()] + f"{prefix}{m.group(1)}.{qualifier}{m.group(2) or ''}{m.group(3)}" + line[m.end():]


def _rewrite(ctx: Context, targets: list[B.Instr], fn) -> str | None:
    lines = list(ctx.lines)
    changed = False
    for ins in targets:
        new = fn(lines[ins.line])
        if new is not None and new != lines[ins.line]:
            lines[ins.line] = new
            changed = True
    return "\n".join(lines) if changed else None


def cache_hints(ctx: Context, parent: str, op: str = "") -> list[PtxCandidate]:
    out = []
    loads = _accesses(ctx, store=False)
    groups: dict[tuple[int, ...], list[tuple[B.Instr, HotWindow]]] = {}
    for ins, w in loads:
        m = _ADDR.search(ins.operands)
        key = tuple(sorted(ctx.params_of(m.group(1)))) if m else ()
        groups.setdefault(key, []).append((ins, w))
    for key, group in sorted(groups.items()):
        who = "parameter " + "+".join(map(str, key)) if key else "an address not traced to a parameter"
        for hint, why in (("L1::evict_first", "is read once per launch: evicting it first leaves L1 to the data "
                                              "that is re-read"),
                          ("L1::evict_last", "is re-read (across rows or loop trips): keeping it in L1 longer "
                                             "should turn L2 reads into L1 hits")):
            edited = _rewrite(ctx, [i for i, _ in group], lambda s: _requalify(s, _LD, "ld.global", hint))
            if edited:
                out.append(ctx.candidate(edited, f"cache_hint:{hint}", f"The global loads of {who} in "
                           f"{_where([w for _, w in group])} get .{hint}: the operand {why}; kernel time down by "
                           f"more than the 2 % band.", [w for _, w in group], parent, op))
    stores = _accesses(ctx, store=True)
    if stores:
        edited = _rewrite(ctx, [i for i, _ in stores], lambda s: _requalify(s, _ST, "st.global", "cs"))
        if edited:
            out.append(ctx.candidate(edited, "cache_hint:st.cs", f"The global stores in "
                       f"{_where([w for _, w in stores])} get .cs (streaming, evict first): the output is not read "
                       f"again by this kernel, so it should not displace inputs in L1/L2; kernel time down by more "
                       f"than the 2 % band.", [w for _, w in stores], parent, op))
    return out


def prefetch_sizes(ctx: Context, parent: str, op: str = "") -> list[PtxCandidate]:
    loads = [(i, w) for i, w in _accesses(ctx, store=False) if w.loop]
    loads += [(ln.instr, w) for ln in ctx.classified if ln.kind == "instr" and _CP_ASYNC.match(ln.instr.opcode)
              and (w := ctx.in_hot(ln.index)) is not None and w.loop]
    out = []
    for size in ("L2::128B", "L2::256B"):
        def add(s: str, size: str = size) -> str | None:
            if re.search(r"\.L2::\d+B", s):
                return None
            if m := _CP_ASYNC_TEXT.search(s):   # cp.async.{ca,cg}.shared.global[.L2::cache_hint]: size after
                return s[:m.end()] + f".{size}" + s[m.end():]
            m = _LD.search(s)
            if m is None:
                return None
            return s[:m.start()] + f"ld.global{m.group(1)}.{size}{m.group(2) or ''}{m.group(3)}" + s[m.end():]
        edited = _rewrite(ctx, [i for i, _ in loads], add)
        if edited:
            out.append(ctx.candidate(edited, f"prefetch_size:{size}", f"The global loads of the hot loops "
                       f"{_where([w for _, w in loads])} ask L2 to fetch {size[4:]} per miss: the loop walks "
                       f"consecutive addresses, so the next trip's lines arrive with this one's; kernel time down by "
                       f"more than the 2 % band.", [w for _, w in loads], parent, op))
    return out


def _fresh_label(existing: set[str], base: str) -> str:
    n = 0
    while f"{base}_kl{n}" in existing:
        n += 1
    return f"{base}_kl{n}"


def unrolls(ctx: Context, parent: str, op: str = "") -> list[PtxCandidate]:
    out = []
    labels = B.labels(ctx.classified)
    for b in ctx.blocks:
        w = ctx.in_hot(b.start)
        if not (b.is_loop and w is not None) or any(i.is_branch for i in b.instrs[:-1]):
            continue
        back = b.instrs[-1]
        if back.pred is None or any(B.opaque(ln) for ln in B.line_kinds(ctx.classified, b.start + 1, b.end)):
            continue   # an unconditional back edge, or a scope/jump table inside: left alone
        exit_label = _fresh_label(labels, b.label.lstrip("$"))
        exit_label = "$" + exit_label if b.label.startswith("$") else exit_label
        body = ctx.lines[b.start + 1:back.line]
        # debug labels inside the body are renamed in the copy (a label may be defined once)
        inner = {ln.label for ln in B.line_kinds(ctx.classified, b.start + 1, back.line - 1) if ln.kind == "label"}
        copy = []
        for s in body:
            for lab in inner:
                s = re.sub(rf"{re.escape(lab)}\b", lab + "_u2", s)
            copy.append(s)
        neg = "" if back.negated else "!"
        exit_branch = f"\t@{neg}{back.pred} bra \t{exit_label};"
        new = (ctx.lines[:back.line] + [exit_branch] + copy + ctx.lines[back.line:back.line + 1]
               + [f"{exit_label}:"] + ctx.lines[back.line + 1:])
        out.append(ctx.candidate("\n".join(new), "unroll:2", f"The loop {b.label} ({w.weight:.0%} of the estimate, "
                   f"{len(b.instrs)} PTX instructions) runs its body twice per trip with the exit test between the "
                   f"copies: half the back-branches, and ptxas may schedule the second copy's loads under the "
                   f"first's arithmetic; kernel time down by more than the 2 % band.", [w], parent, op))
    return out


def _predicable(ins: B.Instr) -> bool:
    return ins.pred is None and (ins.base in B.PURE or ins.is_load) and not ins.is_branch


def predications(ctx: Context, parent: str, op: str = "", max_len: int = 24) -> list[PtxCandidate]:
    out = []
    lines = ctx.classified
    pos = {ln.index: k for k, ln in enumerate(lines)}
    targets_used: dict[str, int] = {}
    for ln in lines:
        if ln.kind == "instr" and ln.instr.target:
            targets_used[ln.instr.target] = targets_used.get(ln.instr.target, 0) + 1
    for ln in lines:
        ins = ln.instr
        if ln.kind != "instr" or ins.base != "bra" or ins.pred is None or ins.target is None:
            continue
        w = ctx.in_hot(ins.line)
        if w is None:
            continue
        k = pos[ins.line] + 1
        skipped = []
        while k < len(lines) and not (lines[k].kind == "label" and lines[k].label == ins.target):
            if B.opaque(lines[k]) or lines[k].kind == "label" and lines[k].label in targets_used:
                skipped = None
                break
            if lines[k].kind == "instr":
                skipped.append(lines[k].instr)
            k += 1
        if not skipped or k >= len(lines) or len(skipped) > max_len or not all(_predicable(i) for i in skipped) \
                or ins.pred in {d for i in skipped for d in i.defs}:
            continue
        neg = "" if ins.negated else "!"
        new = list(ctx.lines)
        new[ins.line] = f"\t// kernelloop: the branch to {ins.target} became predication"
        for i in skipped:
            new[i.line] = re.sub(r"^(\s*)", rf"\1@{neg}{ins.pred} ", ctx.lines[i.line], count=1)
        out.append(ctx.candidate("\n".join(new), "predicate", f"The {len(skipped)} instructions that "
                   f"`@{'!' if ins.negated else ''}{ins.pred} bra {ins.target}` skips in {_where([w])} run "
                   f"predicated on @{neg}{ins.pred} instead (if-conversion): no divergent branch in the warp; kernel "
                   f"time down by more than the 2 % band.", [w], parent, op))
    return out


def _hoisted(ctx: Context, b: B.Block) -> list[str] | None:
    """The block's lines with each global load group moved up as far as dependences allow (None: no move)."""
    seq = [ln for ln in B.line_kinds(ctx.classified, b.start, b.end)]
    order = [ln.index for ln in seq]
    moved = False
    k = 0
    while k < len(order):
        ln = ctx.by_line[order[k]]
        if not (ln.kind == "instr" and ln.instr.is_global_load):
            k += 1
            continue
        load = ln.instr
        # the group: the load and the movs right before it that zero its destinations (directives in between stay)
        group = [k]
        j = k - 1
        while j >= 0:
            prev = ctx.by_line[order[j]]
            if prev.kind == "other" and not B.opaque(prev):
                j -= 1
                continue
            if prev.kind == "instr" and prev.instr.base == "mov" and prev.instr.pred is None and \
                    prev.instr.defs <= load.defs and prev.instr.defs:
                group.insert(0, j)
                j -= 1
                continue
            break
        g_defs = set().union(*(ctx.by_line[order[i]].instr.defs for i in group if ctx.by_line[order[i]].instr))
        g_uses = set().union(*(ctx.by_line[order[i]].instr.uses for i in group if ctx.by_line[order[i]].instr))
        g_uses -= g_defs & {u for i in group[:-1] for u in ctx.by_line[order[i]].instr.defs}
        dest = group[0]
        j = group[0] - 1
        while j >= 0:
            prev = ctx.by_line[order[j]]
            if prev.kind == "directive" or prev.kind == "other" and not B.opaque(prev):
                j -= 1
                continue
            if prev.kind != "instr" or not prev.instr.movable or prev.instr.is_branch or prev.instr.is_load:
                break   # loads keep their order among themselves (and a load never hops another twice)
            p = prev.instr
            if p.defs & (g_uses | g_defs) or p.uses & g_defs:
                break
            dest = j
            j -= 1
        if dest < group[0]:
            members = [order[i] for i in group]
            rest = [x for i, x in enumerate(order) if i not in group]
            at = dest
            order = rest[:at] + members + rest[at:]
            moved = True
            k = at + len(members)
        else:
            k += 1
    return [ctx.lines[i] for i in order] if moved else None


def hoist_loads(ctx: Context, parent: str, op: str = "") -> list[PtxCandidate]:
    out = []
    for b in ctx.blocks:
        w = ctx.in_hot(b.start)
        if w is None:
            continue
        new_block = _hoisted(ctx, b)
        if new_block is None:
            continue
        new = ctx.lines[:b.start] + new_block + ctx.lines[b.end + 1:]
        out.append(ctx.candidate("\n".join(new), "hoist_loads", f"In {_where([w])} each global load moves up past "
                   f"the independent arithmetic before it: its latency starts earlier and overlaps that work; "
                   f"kernel time down by more than the 2 % band.", [w], parent, op))
    return out


RULES = {"cache_hint": cache_hints, "prefetch_size": prefetch_sizes, "unroll": unrolls, "predicate": predications,
         "hoist_loads": hoist_loads}


def propose(kernel: RecoveredKernel, parent: str, op: str = "", rules: list[str] | None = None,
            windows: list[HotWindow] | None = None, samples: dict[int, float] | None = None) -> list[PtxCandidate]:
    """Every rule's edits of `kernel` inside its hot windows (from the SASS, or `samples` of a profile)."""
    if not kernel.recoverable or not kernel.ptx:
        return []
    ctx = Context(kernel, windows if windows is not None else hot_windows(kernel, samples))
    out: list[PtxCandidate] = []
    for name in rules or list(RULES):
        if name not in RULES:
            raise ValueError(f"unknown rule {name!r} (rules: {', '.join(RULES)})")
        out += RULES[name](ctx, parent, op)
    seen, unique = set(), []
    for c in out:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    return unique
