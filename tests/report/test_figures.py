"""The report's figures: the Pareto panel of a run whose builds reported no registers (the interpreter's) says
so instead of drawing every candidate at 0 registers."""

from kernelloop.deliver.report import figures


def _points(registers):
    return [{"candidate": "c-a", "kernel_us": 10.0, "registers": registers[0]},
            {"candidate": "c-b", "kernel_us": 12.0, "registers": registers[1]}]


def test_front_without_registers_says_they_were_not_measured():
    svg = figures.front(_points([None, None]), {"c-a"}, "w")
    assert "registers: not measured" in svg and "registers per thread" not in svg
    svg = figures.front(_points([40, 32]), {"c-a", "c-b"}, "w")
    assert "registers per thread" in svg and "not measured" not in svg
