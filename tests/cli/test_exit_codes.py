"""One exit-code scheme: `common.ExitCode` is the table docs/architecture.md documents, and capture, e2e, fuse and
accelerate exit through it."""

import re
from pathlib import Path

from kernelloop.cli import accelerate, capture, common, e2e, fuse

ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_table_is_the_enum():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("### Exit codes"):]
    rows = re.findall(r"^\| (\d+) \| (\w+) \|", section, flags=re.M)
    assert {int(code): name for code, name in rows} == {c.value: c.name for c in common.ExitCode}
    assert common.STOPPED is common.ExitCode.STOPPED and common.BAD_INPUT == 2


def test_capture_e2e_fuse_and_accelerate_exit_through_the_enum():
    for module in (capture, e2e, fuse, accelerate):
        src = Path(module.__file__).read_text()
        assert "ExitCode." in src, module.__name__
        assert not re.search(r"typer\.Exit\((\d+|common\.)", src), module.__name__
