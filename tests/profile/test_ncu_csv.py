"""The CSV details-page parser against the CSV recorded on an H200 (tests/fixtures/ncu)."""

from pathlib import Path

import pytest

from kernelloop.tune.profile.metrics import EXTRA_RAW_METRICS, normalize
from kernelloop.tune.profile.ncu_csv import (NcuParseError, parse_details_csv, parse_number, read_csv_text, read_details_csv,
                                        select_kernel, split_preamble)

NCU_CSV = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "h200-torch-layernorm-sol-occupancy-launch.csv.xz"

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
          '"Rule Description","Estimated Speedup Type","Estimated Speedup"')


def _row(section: str, name: str, unit: str, value: str, kid: str = "0") -> str:
    return (f'"{kid}","1","python","h","k_fn","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","{section}","{name}",'
            f'"{unit}","{value}",')


def test_launches_kernels_and_geometry(h200_profiles):
    assert [p.launch_id for p in h200_profiles] == list(range(7))
    ln = [p for p in h200_profiles if "vectorized_layer_norm_kernel" in p.kernel]
    assert [p.launch_id for p in ln] == [2, 3, 4]
    assert all(p.block == [32, 4, 1] and p.grid == [4096, 1, 1] and p.cc == "9.0" for p in ln)
    gemm = h200_profiles[6]
    assert gemm.kernel.startswith("nvjet_sm90") and gemm.block == [384, 1, 1] and gemm.grid == [2, 66, 1]
    assert all(p.source == "csv" for p in h200_profiles)


def test_values_with_thousands_separators_in_canonical_units(h200_profiles):
    ln = h200_profiles[2].metrics
    assert ln["dram_frequency_hz"] == pytest.approx(3_196_789_321.79)
    assert ln["duration_ns"] == 29_568.0
    assert ln["elapsed_cycles"] == 57_899.0
    assert ln["sol_compute_pct"] == 65.06 and ln["sol_memory_pct"] == 47.53 and ln["sol_dram_pct"] == 32.33
    assert ln["threads"] == 524_288.0 and ln["registers_per_thread"] == 32.0
    assert ln["occupancy_achieved_pct"] == 82.90 and ln["occupancy_theoretical_pct"] == 100.0
    assert ln["dynamic_shared_per_block"] == 24.0 and ln["block_limit_registers"] == 16.0
    # Unmapped metrics are kept with section, name and unit; strings stay strings.
    extra = h200_profiles[2].extra
    assert extra["Launch Statistics / Cluster Scheduling Policy"] == "PolicySpread"
    assert extra["Launch Statistics / Shared Memory Configuration Size [byte]"] == 32_768.0


def test_rule_rows_become_rule_hits_not_metrics(h200_profiles):
    ln = h200_profiles[2]
    names = [r.name for r in ln.rules]
    assert names == ["SOLBottleneck", "LaunchConfiguration", "AchievedOccupancy"]
    launch = ln.rules[1]
    assert launch.section == "LaunchStats" and launch.type == "OPT"
    assert launch.speedup_type == "global" and launch.speedup_pct == 50.0
    assert "partial wave" in launch.message
    assert ln.rules[2].speedup_type == "local" and ln.rules[2].speedup_pct == 17.1
    assert ln.rules[0].speedup_pct is None
    assert not any(k == "" for k in ln.metrics) and not any(k.endswith("/ ") for k in ln.extra)


def test_a_gzipped_export_reads_as_the_plain_one(tmp_path):
    plain = tmp_path / "export.csv"
    plain.write_text(read_csv_text(NCU_CSV))
    assert plain.read_text().startswith("==") and '"ID","Process ID"' in plain.read_text()
    assert read_details_csv(plain) == read_details_csv(NCU_CSV)


def test_preamble_and_trailing_tool_messages_are_skipped():
    text = read_csv_text(NCU_CSV)
    notes, body = split_preamble(text + "==PROF== Report: x.ncu-rep\n")
    assert notes[0].startswith("==WARNING==") and any("Connected" in n for n in notes)
    assert notes[-1].startswith("==PROF== Report")
    assert body.startswith('"ID"') and "==PROF" not in body
    assert len(parse_details_csv(text + "==PROF== Report: x.ncu-rep\n")) == 7


@pytest.mark.parametrize("text, expected", [
    ("3,196,789,321.79", 3196789321.79), ("1,024", 1024.0), ("83,937", 83937.0), ("0.09", 0.09), ("100", 100.0),
    ("-4.5", -4.5), ("1e3", 1000.0), ("(256, 1, 1)", "(256, 1, 1)"), ("PolicySpread", "PolicySpread"),
    ("", ""), ("1,2", "1,2"), ("all", "all"), ("n/a", "n/a"),
])
def test_parse_number(text, expected):
    assert parse_number(text) == expected


def test_same_label_in_two_sections_and_raw_metric_rows():
    rows = [HEADER,
            _row("GPU Speed Of Light Throughput", "Memory Throughput", "%", "47.53"),
            _row("Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "2,270.5"),
            _row("Command line profiler metrics", "dram__bytes.sum", "Mbyte", "67.4"),
            _row("Command line profiler metrics", "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active"
                 ".ratio", "", "3.25"),
            _row("GPU Speed Of Light Throughput", "Duration", "usecond", "29.57")]
    (p,) = parse_details_csv("\n".join(rows))
    assert p.metrics["sol_memory_pct"] == 47.53
    assert p.metrics["dram_bytes_per_s"] == pytest.approx(2270.5e9)
    assert p.metrics["dram_bytes"] == pytest.approx(67.4e6)
    assert p.metrics["stall_long_scoreboard"] == 3.25
    assert p.metrics["duration_ns"] == pytest.approx(29570.0)


@pytest.mark.parametrize("value, unit, expected", [
    (29.57, "usecond", (29570.0, "ns")), (1.5, "msecond", (1.5e6, "ns")), (64, "Kbyte", (64e3, "byte")),
    (2, "KiB", (2048.0, "byte")), (3.2, "Ghz", (3.2e9, "hz")), (1.95, "cycle/nsecond", (1.95e9, "hz")),
    (3.3, "Tbyte/s", (3.3e12, "byte/s")), (1, "Kbyte/block", (1e3, "byte/block")),
    (32, "register/thread", (32, "register/thread")),
    (47.5, "%", (47.5, "%")),
])
def test_unit_normalisation(value, unit, expected):
    got = normalize(value, unit)
    assert got[1] == expected[1] and got[0] == pytest.approx(expected[0])


def test_select_kernel(h200_profiles):
    assert select_kernel(h200_profiles, "layer_norm").launch_id == 2
    assert select_kernel(h200_profiles, "layer_norm", index=2).launch_id == 4
    assert select_kernel(h200_profiles, "^nvjet").launch_id == 6
    assert select_kernel(h200_profiles).launch_id == 0
    with pytest.raises(LookupError, match="out of range"):
        select_kernel(h200_profiles, "layer_norm", index=3)
    with pytest.raises(LookupError, match="nvjet"):
        select_kernel(h200_profiles, "softmax")


def test_not_a_details_csv():
    with pytest.raises(NcuParseError, match="header"):
        parse_details_csv("==PROF== nothing profiled\n")
    with pytest.raises(NcuParseError, match="Metric Value"):
        parse_details_csv('"ID","Kernel Name","Section Name","Metric Name","Metric Unit"\n"0","k","s","m","u"\n')


def test_extra_metrics_requested_are_raw_names_without_section_labels():
    assert "dram__bytes.sum" in EXTRA_RAW_METRICS
    assert "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio" in EXTRA_RAW_METRICS
    assert "gpu__time_duration.sum" not in EXTRA_RAW_METRICS  # the SpeedOfLight section prints it already
