"""Reading an archive never writes beside it: `report` (and every read-only open) on a WAL archive leaves no -wal or
-shm file next to it; with a -wal file already there (a run still writing) its last commits are read."""

from pathlib import Path

from typer.testing import CliRunner

from kernelloop.base.compressed import decompress_to
from kernelloop.cli.app import app
from kernelloop.core.archive import Archive

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "archives" / "h200-layernorm-planner.sqlite.xz"


def _plain_archive(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "archive.sqlite"
    decompress_to(FIXTURE, path)
    Archive(path).close()   # opened once for writing: WAL mode, checkpointed and closed (no -wal left)
    assert sorted(p.name for p in folder.iterdir()) == ["archive.sqlite"]
    return path


def test_report_leaves_no_wal_or_shm_beside_the_archive(tmp_path):
    run = _plain_archive(tmp_path / "run")
    before = run.read_bytes()
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", str(run.parent), "--out", str(out)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert out.is_file() and run.read_bytes() == before
    assert sorted(p.name for p in run.parent.iterdir()) == ["archive.sqlite"]


def test_a_readonly_open_reads_commits_still_in_the_wal(tmp_path):
    run = _plain_archive(tmp_path / "live")
    writer = Archive(run)   # a run still writing: its -wal holds commits not yet checkpointed
    try:
        writer._conn.execute("PRAGMA wal_autocheckpoint = 0")
        writer._conn.execute("UPDATE runs SET op = 'changed-in-the-wal'")
        assert Path(f"{run}-wal").exists()
        with Archive(run, readonly=True) as reader:
            assert {r[0] for r in reader._conn.execute("SELECT op FROM runs")} == {"changed-in-the-wal"}
    finally:
        writer.close()
