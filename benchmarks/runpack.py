"""The per-run records of the search-strategy benchmarks, packed: one `.jsonl.xz` in place of a folder of `.jsonl`
files.

`benchmarks/strategies.py` and `benchmarks/strategies_failures.py` keep one `.jsonl` file per (strategy, space[,
condition], budget) in their --cache folder, one JSON line per seed, and compute their tables from them. A results
folder keeps them as `runs.jsonl.xz`: one line per run, `{"file": <the cache file's name>, "run": <its line>}`, in
file-name order, so unpacking gives back the cache folder line for line and the tables computed from it are the
same. Both scripts take `--runs PACK` (the cache is seeded from it) and write the pack of the runs they summarised
next to their tables. A pack is written xz-compressed (`.jsonl.xz`, deterministic bytes); one gzipped
(`.jsonl.gz`, as packs were kept before) reads the same.

    python benchmarks/runpack.py pack CACHE_DIR OUT.jsonl.xz [--glob '*--b100.jsonl']
    python benchmarks/runpack.py unpack PACK.jsonl.xz CACHE_DIR [--only staged,optuna-tpe]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kernelloop.base.compressed import read_text, write_bytes

PACK_NAME = "runs.jsonl.xz"


def pack(files, out: Path) -> int:
    """Write the runs of the .jsonl `files` to the pack `out` (compressed as its name says: .xz, or .gz;
    deterministic bytes); returns the run count."""
    lines = []
    for f in sorted(files, key=lambda p: Path(p).name):
        f = Path(f)
        lines += [json.dumps({"file": f.name, "run": json.loads(line)}) + "\n"
                  for line in f.read_text().splitlines() if line.strip()]
    out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes(out, "".join(lines).encode())
    return len(lines)


def read(path: Path) -> dict[str, list[dict]]:
    """The pack's runs by cache file name, in the order packed."""
    files: dict[str, list[dict]] = {}
    for i, line in enumerate(read_text(path).splitlines(), 1):
        try:
            rec = json.loads(line)
            files.setdefault(rec["file"], []).append(rec["run"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}:{i}: not a packed run ({e})") from None
    return files


def unpack(path: Path, folder: Path, only: set[str] | None = None) -> list[Path]:
    """Write the pack's cache files into `folder` (the strategies named in `only`, by the file name's first field,
    when given); a file already there is left as it is. Returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, runs in read(path).items():
        if Path(name).name != name or not name.endswith(".jsonl"):
            raise ValueError(f"{path}: {name!r} is not a cache file name")
        if only is not None and name.split("--", 1)[0] not in only:
            continue
        target = folder / name
        if target.exists():
            continue
        target.write_text("".join(json.dumps(r) + "\n" for r in runs))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="a cache folder's .jsonl files into one pack")
    p.add_argument("folder", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--glob", default="*.jsonl")
    u = sub.add_parser("unpack", help="a pack into a cache folder")
    u.add_argument("pack", type=Path)
    u.add_argument("folder", type=Path)
    u.add_argument("--only", default="", help="comma-separated strategies (file names' first field, ':' as '_')")
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        n = pack(sorted(args.folder.glob(args.glob)), args.out)
        print(f"{n} runs -> {args.out}", file=sys.stderr)
    else:
        only = {s.replace(":", "_") for s in args.only.split(",") if s} or None
        files = unpack(args.pack, args.folder, only)
        print(f"{len(files)} files -> {args.folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
