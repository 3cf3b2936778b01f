"""Seeded PTX edits for testing the static checks: edits that break the launch ABI, the declarations or the
resource limits (each must be refused, naming the rule in `expect`), and harmless edits (each must be accepted).

Breaking: rename_entry, add_param, remove_param, retype_param (ABI); change_reqntid, add_maxnreg, add_global,
add_extern (declarations); huge_shared (a static .shared array past the launch's limit).
Harmless: cache_hint (a plain `ld.global` gets the `.ca` cache operator, valid on sm_90: cache at all levels),
swap (two adjacent, independent, unpredicated ALU instructions trade places), comment.
The seed picks which parameter, load or instruction pair an edit touches, and the names it adds.
"""

from __future__ import annotations

import random
import re

from . import parse
from .checks import SHARED_LIMIT_SM90
from .records import Mutation

_ENTRY_HEAD = re.compile(r"(\.entry\s+)([\w$]+)(\s*\()(.*?)(\))", re.S)
_PARAM = re.compile(r"\.param\s+[^,)]*")
_PLAIN_LOAD = re.compile(r"\bld\.global\.((?:v[248]\.)?[bsuf]\d+)(?=\s)")
_ALU = re.compile(r"^\s*((?:mov|add|sub|mul|mad|shl|shr|and|or|xor|cvt|fma|neg|abs|min|max)\.[\w.]+)\s+"
                  r"(%\w+)\s*,\s*([^;{}\[\]@]*);\s*$")


def _after_header(ptx: str, line: str) -> str:
    """`line` inserted after the module's `.address_size` (else `.target`) line."""
    m = re.search(r"^\s*\.address_size[^\n]*\n", ptx, re.M) or re.search(r"^\s*\.target[^\n]*\n", ptx, re.M)
    at = m.end() if m else 0
    return ptx[:at] + line + "\n" + ptx[at:]


def _abi(ptx: str, rng: random.Random, tag: str) -> list[Mutation]:
    m = _ENTRY_HEAD.search(ptx)
    if m is None:
        return []
    name, plist = m.group(2), m.group(4)
    params = list(_PARAM.finditer(plist))
    def with_params(text: str) -> str:
        return ptx[:m.start(4)] + text + ptx[m.end(4):]
    out = [Mutation(kind="rename_entry", breaking=True, expect="entry_name", description=f"{name} -> {name}_{tag}",
                    ptx=ptx[:m.start(2)] + f"{name}_{tag}" + ptx[m.end(2):])]
    extra = f".param .u32 {name}_param_{tag}"
    out.append(Mutation(kind="add_param", breaking=True, expect="params", description=f"appended '{extra}'",
                        ptx=with_params(plist.rstrip() + (",\n\t" if params else "\n\t") + extra + "\n")))
    if params:
        last = params[-1]
        cut = plist[:last.start()].rstrip().rstrip(",") + "\n"
        out.append(Mutation(kind="remove_param", breaking=True, expect="params",
                            description=f"removed '{last.group(0).strip()}'", ptx=with_params(cut)))
        scalars = [p for p in params if re.search(r"\.(?:[bsuf])(?:32|64)\b", p.group(0))]
        if scalars:
            p = rng.choice(scalars)
            text = p.group(0)
            new = re.sub(r"\.([bsuf])(32|64)\b", lambda t: f".{t.group(1)}{'64' if t.group(2) == '32' else '32'}",
                         text, count=1)
            out.append(Mutation(kind="retype_param", breaking=True, expect="params",
                                description=f"'{text.strip()}' -> '{new.strip()}'",
                                ptx=with_params(plist[:p.start()] + new + plist[p.end():])))
    return out


def _declarations(ptx: str, rng: random.Random, tag: str) -> list[Mutation]:
    out = []
    m = _ENTRY_HEAD.search(ptx)
    if m is None:
        return out
    req = re.compile(r"\.reqntid\s+(\d+)").search(ptx, m.end())
    if req:
        n = int(req.group(1))
        ptx2 = ptx[:req.start(1)] + str(n * 2 if n <= 512 else n // 2) + ptx[req.end(1):]
        what = f".reqntid {n} -> {n * 2 if n <= 512 else n // 2}"
    else:
        ptx2, what = ptx[:m.end()] + "\n.maxntid 1024, 1, 1" + ptx[m.end():], "added .maxntid 1024"
    out.append(Mutation(kind="change_reqntid", breaking=True, expect="launch_bounds", description=what, ptx=ptx2))
    regs = rng.choice([32, 40, 64])
    has = re.compile(r"\.maxnreg\s+(\d+)").search(ptx, m.end(), ptx.find("{", m.end()))
    if has:   # the kernel has a register limit already: a different one
        regs = regs if regs != int(has.group(1)) else regs + 8
        ptx2, what = ptx[:has.start(1)] + str(regs) + ptx[has.end(1):], f".maxnreg {has.group(1)} -> {regs}"
    else:
        ptx2, what = ptx[:m.end()] + f"\n.maxnreg {regs}" + ptx[m.end():], f"added .maxnreg {regs}"
    out.append(Mutation(kind="add_maxnreg", breaking=True, expect="launch_bounds", description=what, ptx=ptx2))
    out.append(Mutation(kind="add_global", breaking=True, expect="new_symbol", description=f"a new .global kl_g_{tag}",
                        ptx=_after_header(ptx, f".global .align 4 .b32 kl_g_{tag};")))
    out.append(Mutation(kind="add_extern", breaking=True, expect="new_extern", description=f"a new .extern kl_x_{tag}",
                        ptx=_after_header(ptx, f".extern .global .align 4 .b32 kl_x_{tag};")))
    return out


def _huge_shared(ptx: str, shared_bytes: int, rng: random.Random, tag: str) -> Mutation:
    size = (SHARED_LIMIT_SM90 - shared_bytes) // 16 * 16 + 16 * rng.randint(1, 64)
    return Mutation(kind="huge_shared", breaking=True, expect="shared_memory",
                    description=f"a static .shared array of {size} bytes (the launch has {shared_bytes})",
                    ptx=_after_header(ptx, f".shared .align 16 .b8 kl_s_{tag}[{size}];"))


def _harmless(ptx: str, rng: random.Random, tag: str) -> list[Mutation]:
    out = []
    loads = list(_PLAIN_LOAD.finditer(ptx))
    if loads:
        ld = rng.choice(loads)
        out.append(Mutation(kind="cache_hint", breaking=False, description=f"load at offset {ld.start()}: "
                            f"ld.global.{ld.group(1)} -> ld.global.ca.{ld.group(1)}",
                            ptx=ptx[:ld.start()] + f"ld.global.ca.{ld.group(1)}" + ptx[ld.end():]))
    lines = ptx.split("\n")
    pairs = []
    for i in range(len(lines) - 1):
        a, b = _ALU.match(lines[i]), _ALU.match(lines[i + 1])
        if a and b and a.group(2) != b.group(2) and a.group(2) not in re.findall(r"%\w+", b.group(3)) \
                and b.group(2) not in re.findall(r"%\w+", a.group(3)):
            pairs.append(i)
    if pairs:
        i = rng.choice(pairs)
        swapped = lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2:]
        out.append(Mutation(kind="swap", breaking=False, description=f"lines {i + 1} and {i + 2} swapped: "
                            f"{lines[i].strip()!r} / {lines[i + 1].strip()!r}", ptx="\n".join(swapped)))
    body = ptx.find("{", _ENTRY_HEAD.search(ptx).end()) if _ENTRY_HEAD.search(ptx) else -1
    if body >= 0:
        out.append(Mutation(kind="comment", breaking=False, description="a comment line in the body",
                            ptx=ptx[:body + 1] + f"\n\t// kernelloop mutation {tag}" + ptx[body + 1:]))
    return out


def mutations(ptx: str, seed: int = 0, shared_bytes: int = 0) -> list[Mutation]:
    """Every applicable edit of `ptx`, chosen by `seed`; `shared_bytes` is the launch's dynamic shared memory."""
    rng = random.Random(seed)
    tag = f"kl{seed}"
    if not parse.entries(ptx):
        return []
    return (_abi(ptx, rng, tag) + _declarations(ptx, rng, tag) + [_huge_shared(ptx, shared_bytes, rng, tag)]
            + _harmless(ptx, rng, tag))


# --- wrong edits that keep the ABI: only running the kernel can catch them ---------------------------------

_GLOBAL_ST = re.compile(r"^(\s*)(@!?%\w+\s+)?st\.global[\w.:]*\s+\[\s*(%\w+)\s*\+\s*(-?\d+)\s*\]")
_GLOBAL_LD = re.compile(r"^(\s*)(@!?%\w+\s+)?ld\.global[\w.:]*\s+.*?\[\s*(%\w+)\s*\+\s*(-?\d+)\s*\]")
_VEC_BYTES = re.compile(r"\.v([248])\.[bsuf](\d+)|\.[bsuf](\d+)\s")
_SETP = re.compile(r"\bsetp\.(lt|le|gt|ge)\.([su]\d+)\s+(%p\d+)")


def _width(line: str) -> int:
    m = _VEC_BYTES.search(line)
    if m is None:
        return 4
    return int(m.group(1)) * int(m.group(2)) // 8 if m.group(1) else int(m.group(3)) // 8


def wrong_edits(ptx: str, seed: int = 0) -> list[Mutation]:
    """Seeded edits that assemble and pass every static check yet compute something else: drop_store (one global
    store removed), negate_predicate (a predicated global store runs where it should not and not where it should),
    change_compare (a bounds test `setp.lt` <-> `setp.le` whose predicate guards a global access: off by one at the
    edge), store_offset / load_offset (one global access moved by its own width). The differential proof must
    reject each (`expect` "differential")."""
    rng = random.Random(seed)
    lines = ptx.split("\n")
    stores = [i for i, ln in enumerate(lines) if _GLOBAL_ST.match(ln)]
    loads = [i for i, ln in enumerate(lines) if _GLOBAL_LD.match(ln)]
    out: list[Mutation] = []

    def mutation(kind: str, i: int, new: str | None, what: str) -> Mutation:
        edited = lines[:i] + ([new] if new is not None else []) + lines[i + 1:]
        return Mutation(kind=kind, breaking=True, expect="differential", ptx="\n".join(edited),
                        description=f"line {i + 1}: {what}")
    if stores:
        i = rng.choice(stores)
        out.append(mutation("drop_store", i, None, f"removed {lines[i].strip()!r}"))
        pred = [i for i in stores if _GLOBAL_ST.match(lines[i]).group(2)]
        if pred:
            i = rng.choice(pred)
            m = _GLOBAL_ST.match(lines[i])
            p = m.group(2).strip()
            flipped = "@" + (p[2:] if p.startswith("@!") else "!" + p[1:])
            out.append(mutation("negate_predicate", i, lines[i].replace(p, flipped, 1), f"{p} -> {flipped} on a store"))
        i = rng.choice(stores)
        m = _GLOBAL_ST.match(lines[i])
        w = _width(lines[i])
        new = lines[i][:m.start(4)] + str(int(m.group(4)) + w) + lines[i][m.end(4):]
        out.append(mutation("store_offset", i, new, f"store address + {w} bytes"))
    if loads:
        i = rng.choice(loads)
        m = _GLOBAL_LD.match(lines[i])
        w = _width(lines[i])
        new = lines[i][:m.start(4)] + str(int(m.group(4)) + w) + lines[i][m.end(4):]
        out.append(mutation("load_offset", i, new, f"load address + {w} bytes"))
    guards = {m.group(2).strip()[1:].lstrip("!") for i in stores + loads
              if (m := (_GLOBAL_ST.match(lines[i]) or _GLOBAL_LD.match(lines[i]))) and m.group(2)}
    compares = [i for i, ln in enumerate(lines) if (m := _SETP.search(ln)) and m.group(3) in guards]
    if compares:
        i = rng.choice(compares)
        m = _SETP.search(lines[i])
        swap = {"lt": "le", "le": "lt", "gt": "ge", "ge": "gt"}[m.group(1)]
        new = lines[i][:m.start(1)] + swap + lines[i][m.end(1):]
        out.append(mutation("change_compare", i, new, f"setp.{m.group(1)} -> setp.{swap} guarding a global access"))
    return out
