"""Reading PTX text (entries, parameters, directives, module-scope symbols, shared memory) and the cubin's own
account of itself (SASS, `.nv.info` attributes) in forms two builds can be compared by."""

from __future__ import annotations

import re

from .records import PtxEntry, PtxParam

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_ENTRY = re.compile(r"(\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\((.*?)\)\s*((?:\.\w+[\s\d,]*)*)\{", re.S)
_DIRECTIVE = re.compile(r"\.(\w+)\s+([\d\s,]+)")
_TYPE = re.compile(r"^\.(?:[bsuf]\d+|pred)$")
_NAME = re.compile(r"^([\w$]+)(?:\[(\d+)\])?$")
_SHARED = re.compile(r"\.shared\b[^;{]*?\s([\w$]+)\[(\d*)\]\s*;")
_SCALAR_SHARED = re.compile(r"\.shared\b\s+(?:\.align\s+\d+\s+)?\.([bsuf])(\d+)\s+([\w$]+)\s*;")


def strip_comments(ptx: str) -> str:
    return _COMMENT.sub("", ptx)


def _param(text: str) -> PtxParam:
    tokens = text.replace(".param", "", 1).split()
    m = _NAME.match(tokens[-1]) if tokens else None
    if m is None:
        raise ValueError(f"cannot read PTX parameter {text.strip()!r}")
    qual, attrs, typ = tokens[:-1], [], ""
    i = 0
    while i < len(qual):
        if not typ and _TYPE.match(qual[i]):
            typ = qual[i]
        elif qual[i] == ".align" and i + 1 < len(qual):
            attrs.append(f".align {qual[i + 1]}")
            i += 1
        else:
            attrs.append(qual[i])
        i += 1
    return PtxParam(name=m.group(1), type=typ, attrs=attrs, count=int(m.group(2) or 1))


def entries(ptx: str) -> list[PtxEntry]:
    """Every `.entry` of the PTX, in order, with parameters and performance directives."""
    out = []
    for m in _ENTRY.finditer(strip_comments(ptx)):
        params = [_param(p) for p in m.group(3).split(",") if p.strip()]
        directives: dict[str, list[int]] = {}
        for d in _DIRECTIVE.finditer(m.group(4)):   # a repeated directive keeps every value
            directives.setdefault(d.group(1), []).extend(int(v) for v in re.split(r"[\s,]+", d.group(2).strip()) if v)
        out.append(PtxEntry(name=m.group(2), visible=bool(m.group(1)) and "visible" in m.group(1),
                            params=params, directives=directives))
    return out


def header(ptx: str) -> dict[str, str]:
    """The module's `.version`, `.target` and `.address_size`."""
    text = strip_comments(ptx)
    out = {}
    for key in ("version", "target", "address_size"):
        m = re.search(rf"^\s*\.{key}\s+([^\n]+)", text, re.M)
        if m:
            out[key] = m.group(1).strip()
    return out


def module_scope(ptx: str) -> list[str]:
    """The statements outside every function body (declarations of symbols), each on one line."""
    text = re.sub(r"^\s*\.(?:version|target|address_size|file)\b[^\n]*", "", strip_comments(ptx), flags=re.M)
    depth, init, cur, out = 0, False, [], []
    for ch in text:
        if init:   # a module-scope initializer `= {1, 2, ...};` belongs to its declaration
            cur.append(ch)
            init = ch != "}"
            continue
        if ch == "{" and depth == 0 and "=" in "".join(cur):
            cur.append(ch)
            init = True
        elif ch == "{":
            if depth == 0 and "".join(cur).strip():
                out.append(" ".join("".join(cur).split()) + " {")   # a function's header (an .entry / .func)
                cur = []
            depth += 1
        elif ch == "}":
            depth -= 1
            cur = [] if depth == 0 else cur
        elif depth == 0:
            cur.append(ch)
            if ch == ";":
                stmt = " ".join("".join(cur).split())
                if stmt:
                    out.append(stmt)
                cur = []
    return out


def symbols(ptx: str) -> dict[str, str]:
    """Module-scope symbols by linkage or space (`global`, `visible`, `extern`, `const`, `shared`, `weak`): each
    symbol's name to its declaration. A `.global` array declared with an initializer keeps its name."""
    out: dict[str, str] = {}
    for stmt in module_scope(ptx):
        head = stmt.split("=", 1)[0].split("(", 1)[0].rstrip(" ;{")
        words = head.split()
        kinds = [w[1:] for w in words if w in (".global", ".visible", ".extern", ".const", ".shared", ".weak")]
        if not kinds or not words:
            continue
        m = _NAME.match(words[-1]) or re.match(r"^([\w$]+)\[", words[-1])
        if m:
            for k in kinds:
                out[f"{k}:{m.group(1)}"] = stmt
    return out


def static_shared_bytes(ptx: str) -> int:
    """Bytes of statically sized `.shared` declarations anywhere in the PTX (extern `[]` arrays count 0: their
    size is the launch's dynamic shared memory)."""
    text = strip_comments(ptx)
    total = 0
    for m in _SHARED.finditer(text):
        if not m.group(2):
            continue
        decl = m.group(0)
        t = re.search(r"\.[bsuf](\d+)\b", decl)
        total += int(m.group(2)) * (int(t.group(1)) // 8 if t else 1)
    total += sum(int(m.group(2)) // 8 for m in _SCALAR_SHARED.finditer(text))
    return total


# --- the cubin's side ---------------------------------------------------------------------------------------

_ADDR = re.compile(r"/\*[0-9a-fA-F]{4,}\*/")
_ENCODING = re.compile(r"/\*\s*0x[0-9a-fA-F]+\s*\*/")
_LABEL = re.compile(r"\.L_x_\d+|\$L__\w+")


def normalise_sass(text: str, names: dict[str, str] | None = None) -> list[str]:
    """SASS instructions (cuobjdump -sass or nvdisasm) without addresses, encodings, header lines or label
    numbers; `names` renames symbols (e.g. the entry to "<entry>") so two builds compare by code alone."""
    out = []
    for line in text.splitlines():
        if not _ADDR.search(line) and not line.strip().startswith("Function"):
            continue
        line = _ENCODING.sub("", _ADDR.sub("", line))
        line = _LABEL.sub(".L", line)
        for old, new in (names or {}).items():
            line = re.sub(rf"\b{re.escape(old)}\b", new, line)
        line = " ".join(line.split())
        if line:
            out.append(line)
    return out


def nv_info(elf_text: str) -> dict[str, list[str]]:
    """`.nv.info*` attributes from `cuobjdump -elf`: "section/ATTRIBUTE" to its values in order (an attribute
    may repeat, e.g. one EIATTR_KPARAM_INFO per parameter); values keep their text, whitespace collapsed."""
    out: dict[str, list[str]] = {}
    section, attr, value = None, None, None
    def flush() -> None:
        if section and attr is not None and value is not None:
            out.setdefault(f"{section}/{attr}", []).append(" ".join(value.split()))
    for line in elf_text.splitlines():
        if line.startswith(".") and not line.startswith("\t"):
            flush()
            attr, value = None, None
            section = line.strip() if line.startswith(".nv.info") else None
            continue
        if section is None:
            continue
        s = line.strip()
        if s.startswith("Attribute:"):
            flush()
            attr, value = s.split(":", 1)[1].strip(), None
        elif s.startswith("Value:"):
            value = s.split(":", 1)[1]
        elif s.startswith("<0x") or s.startswith("Format:"):
            continue
        elif value is not None and s:
            value += " " + s
    flush()
    return out


def kparams(info: dict[str, list[str]], kernel: str) -> list[tuple[int, int, int]]:
    """The cubin's parameter layout of `kernel`: (ordinal, offset, size) per parameter, by ordinal."""
    rows = []
    for v in info.get(f".nv.info.{kernel}/EIATTR_KPARAM_INFO", []):
        f = dict(re.findall(r"(Ordinal|Offset|Size)\s*:\s*(0x[0-9a-fA-F]+)", v))
        if len(f) == 3:
            rows.append((int(f["Ordinal"], 16), int(f["Offset"], 16), int(f["Size"], 16)))
    return sorted(rows)


def param_base(info: dict[str, list[str]], kernel: str) -> int:
    """Where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK's low half; 0x210 on sm_90)."""
    vals = info.get(f".nv.info.{kernel}/EIATTR_PARAM_CBANK", ["0x0 0x210"])[0].split()
    return int(vals[-1], 16) & 0xFFFF


def ptx_layout(entry: PtxEntry, base: int = 0x210) -> list[tuple[int, int, int]]:
    """The parameter layout the PTX signature implies: (ordinal, offset from the first parameter's slot, size),
    each aligned in the constant bank (`base` + offset) to its array's .align or its natural size."""
    rows, offset = [], 0
    for i, p in enumerate(entry.params):
        align = next((int(a.split()[1]) for a in p.attrs if a.startswith(".align ")), None)
        align = align if align and p.count != 1 else max(1, p.size // p.count)
        offset = (base + offset + align - 1) // align * align - base
        rows.append((i, offset, p.size))
        offset += p.size
    return rows
