"""A worker started with relative paths (a run folder like `runs/x`, the default of `kernelloop optimize`) from
any working directory: the worker process runs in its own folder, so the paths it gets must be absolute."""

from pathlib import Path

from kernelloop.core.execute.pool import Worker


def test_relative_work_dir_and_log_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("runs/x").mkdir(parents=True)
    worker = Worker("interpret", Path("runs/x/jobs"), log_path=Path("runs/x/worker.log"))
    try:
        reply = worker.request({"op": "load", "source": "def launch():\n    pass\n", "source_hash": "h"},
                               timeout=120)
        assert reply.status == "ok", reply
        assert worker.log_path == tmp_path / "runs/x/worker.log" and worker.log_path.is_file()
    finally:
        worker.close()
