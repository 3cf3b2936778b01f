"""Recorded files read and written whatever their compression: the one definition every reader of a kept archive,
space, profile export or run pack goes through.

The name decides: `.xz` is LZMA (the xz container, what committed results are kept in), `.gz` is gzip (older
recordings, and what users may still hold); any other name is read by its first bytes (a gzip or xz stream without
the suffix still reads), else as plain bytes. Writing by the name: `.xz` at preset 9 extreme, `.gz` at level 9,
both with no timestamp, so the same content always gives the same bytes.

A damaged or mislabelled stream raises `CompressedFileError` (an OSError naming the file), whichever codec read it.
"""

from __future__ import annotations

import gzip
import io
import lzma
import shutil
from pathlib import Path
from typing import BinaryIO, TextIO

XZ = ".xz"
GZ = ".gz"
SUFFIXES = (XZ, GZ)
_MAGIC = {GZ: b"\x1f\x8b", XZ: b"\xfd7zXZ\x00"}
XZ_PRESET = 9 | lzma.PRESET_EXTREME
_ERRORS = (OSError, EOFError, lzma.LZMAError)


class CompressedFileError(OSError):
    """A compressed file that does not decompress (damaged, truncated, or not the format its name says)."""


def suffix_of(path: str | Path) -> str | None:
    """`.xz` or `.gz` when the name ends so, else None."""
    name = Path(path).name
    return next((s for s in SUFFIXES if name.endswith(s)), None)


def plain_name(path: str | Path) -> str:
    """The file's name without its compression suffix (`a.sqlite.xz` -> `a.sqlite`)."""
    name = Path(path).name
    suffix = suffix_of(name)
    return name[: -len(suffix)] if suffix else name


def _codec(path: Path) -> str | None:
    """The compression of `path`: by its suffix, else by its first bytes; None for plain."""
    suffix = suffix_of(path)
    if suffix:
        return suffix
    with open(path, "rb") as f:
        head = f.read(6)
    return next((s for s, magic in _MAGIC.items() if head.startswith(magic)), None)


def open_bytes(path: str | Path) -> BinaryIO:
    """A binary stream of the decompressed content (the file itself when plain); the caller closes it.
    Decompression errors surface while reading, as the codec raises them; `read_bytes`/`decompress_to` name them."""
    path = Path(path)
    codec = _codec(path)
    if codec == XZ:
        return lzma.open(path, "rb")
    if codec == GZ:
        return gzip.open(path, "rb")
    return open(path, "rb")


def open_text(path: str | Path, encoding: str = "utf-8", errors: str = "strict") -> TextIO:
    """A text stream of the decompressed content; the caller closes it."""
    return io.TextIOWrapper(open_bytes(path), encoding=encoding, errors=errors)


def read_bytes(path: str | Path) -> bytes:
    """The whole decompressed content; CompressedFileError when the stream does not decompress."""
    path = Path(path)
    try:
        with open_bytes(path) as f:
            return f.read()
    except FileNotFoundError:
        raise
    except _ERRORS as e:
        raise CompressedFileError(f"{path}: does not decompress: {e}") from e


def read_text(path: str | Path, encoding: str = "utf-8", errors: str = "strict") -> str:
    """The whole decompressed content as text."""
    return read_bytes(path).decode(encoding, errors)


def decompress_to(path: str | Path, dst: str | Path) -> Path:
    """Write the decompressed content of `path` to the file `dst` (a plain copy when `path` is plain)."""
    path, dst = Path(path), Path(dst)
    try:
        with open_bytes(path) as src, open(dst, "wb") as out:
            shutil.copyfileobj(src, out)
    except FileNotFoundError:
        raise
    except _ERRORS as e:
        raise CompressedFileError(f"{path}: does not decompress: {e}") from e
    return dst


def compress(data: bytes, suffix: str) -> bytes:
    """`data` compressed for a name ending in `suffix` (`.xz` or `.gz`; any other suffix: `data` unchanged).
    Deterministic: the same data gives the same bytes."""
    if suffix == XZ:
        return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)
    if suffix == GZ:
        return gzip.compress(data, compresslevel=9, mtime=0)
    return data


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path`, compressed as its name says (plain for any other name); returns the path."""
    path = Path(path)
    path.write_bytes(compress(data, suffix_of(path) or ""))
    return path


__all__ = ["CompressedFileError", "GZ", "SUFFIXES", "XZ", "XZ_PRESET", "compress", "decompress_to", "open_bytes",
           "open_text", "plain_name", "read_bytes", "read_text", "suffix_of", "write_bytes"]
