"""The pipeline on several local interpreter workers: the same archive as one worker (same candidates, verdicts,
messages and order), each trial naming the device it ran on."""

from modes import modes_op, run_archive, single  # noqa: F401 - fixtures


def test_two_local_workers_give_the_single_workers_archive(modes_op, single, tmp_path, monkeypatch):
    two = run_archive(modes_op, tmp_path / "run", monkeypatch, devices=["interpret:0", "interpret:1"])
    assert len(single) == 3 and {t[3] for t in single} == {"PASSED", "WRONG_VALUES", "RUNTIME_ERROR"}
    assert [t[:6] for t in two] == [t[:6] for t in single]     # candidates, verdicts, messages, cases, order
    assert {t[6] for t in single} == {"interpret"}
    assert {t[6] for t in two} == {"interpret:0", "interpret:1"}   # both devices worked, each trial names its own
