"""The report's figures: a Pareto panel needs two measured objectives, so a run whose builds reported no
registers (the interpreter's) gets no plot (the report shows the front's table alone); ranges spanning decades
get a log axis."""

import pytest

from kernelloop.deliver.report import figures


def _points(registers):
    return [{"candidate": "c-a", "kernel_us": 10.0, "registers": registers[0]},
            {"candidate": "c-b", "kernel_us": 12.0, "registers": registers[1]}]


def test_front_needs_measured_registers():
    with pytest.raises(ValueError, match="two measured objectives"):
        figures.front(_points([None, None]), {"c-a"}, "w")
    svg = figures.front(_points([40, 32]), {"c-a", "c-b"}, "w", key="front-3")
    assert "registers per thread" in svg and 'id="front-3-legend"' in svg and 'id="front-3-ax-0-data"' in svg


def test_a_range_wider_than_a_decade_is_logarithmic():
    assert figures.spans_decades([7.0, 71.0]) and not figures.spans_decades([7.0, 69.0])
    assert not figures.spans_decades([None, 0.0, 5.0])
