"""kernelloop.base.compressed: one reader for recorded files, whatever their compression (.xz, .gz, plain)."""

import gzip
import lzma
import subprocess
import shutil

import pytest

from kernelloop.base.compressed import (CompressedFileError, compress, decompress_to, open_text, plain_name,
                                        read_bytes, read_text, suffix_of, write_bytes)

DATA = ("configuration,µs\n" + "".join(f"{i},{i * 0.37:.3f}\n" for i in range(200))).encode()


@pytest.fixture
def three(tmp_path):
    """The same content kept plain, gzipped and xz-compressed, each written by its own library (not by us)."""
    (tmp_path / "a.csv").write_bytes(DATA)
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(DATA))
    (tmp_path / "a.csv.xz").write_bytes(lzma.compress(DATA))
    return [tmp_path / n for n in ("a.csv", "a.csv.gz", "a.csv.xz")]


def test_every_form_reads_as_the_same_content(three, tmp_path):
    for path in three:
        assert read_bytes(path) == DATA
        assert read_text(path) == DATA.decode()
        with open_text(path) as f:
            assert f.readline() == "configuration,µs\n"
        out = decompress_to(path, tmp_path / f"out-{path.name}")
        assert out.read_bytes() == DATA
    assert [suffix_of(p) for p in three] == [None, ".gz", ".xz"]
    assert [plain_name(p) for p in three] == ["a.csv"] * 3


def test_a_stream_without_its_suffix_reads_by_its_first_bytes(three, tmp_path):
    for path in three[1:]:
        bare = tmp_path / f"bare-{path.suffix[1:]}.json"
        bare.write_bytes(path.read_bytes())
        assert read_bytes(bare) == DATA


def test_writing_is_deterministic_and_xz_matches_the_xz_tool(tmp_path):
    for suffix in (".xz", ".gz"):
        a, b = write_bytes(tmp_path / f"a{suffix}", DATA), write_bytes(tmp_path / f"b{suffix}", DATA)
        assert a.read_bytes() == b.read_bytes() != DATA and read_bytes(a) == DATA
    assert write_bytes(tmp_path / "plain.json", DATA).read_bytes() == DATA
    assert compress(DATA, ".txt") == DATA
    if shutil.which("xz"):        # what `xz -9e` makes of it, single-threaded: the same bytes
        tool = subprocess.run(["xz", "-9e", "-T1", "-c"], input=DATA, capture_output=True, check=True).stdout
        assert (tmp_path / "a.xz").read_bytes() == tool


@pytest.mark.parametrize("name", ["bad.sqlite.gz", "bad.sqlite.xz"])
def test_a_mislabelled_or_damaged_stream_is_a_clear_error(tmp_path, name):
    bad = tmp_path / name
    bad.write_bytes(b"plain text, not compressed")
    with pytest.raises(CompressedFileError, match="bad.sqlite.*does not decompress"):
        read_bytes(bad)
    with pytest.raises(CompressedFileError):
        decompress_to(bad, tmp_path / "out")
    truncated = tmp_path / f"cut-{name}"
    truncated.write_bytes(compress(DATA, suffix_of(name))[:40])
    with pytest.raises(CompressedFileError):
        read_bytes(truncated)
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing.xz")
