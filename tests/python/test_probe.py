"""hushmon-probe (c/probe) and ``hushmon probe``: briefly run on small arrays,
figures positive and consistent with the counts the program reports, the
record stored once per node type and listed by --show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hushmon.probe.ceilings import Ceilings, ceilings_path, load_ceilings

SHORT = ("--seconds", "0.2", "--array-mib", "4")


def probe(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "hushmon-probe"), *args], capture_output=True, text=True, check=False
    )


def hushmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args], capture_output=True, text=True, check=False
    )


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def largest_cache_bytes() -> int:
    """cpu0's largest data or unified cache, as sysfs gives it (0: none listed)."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        if (index / "type").read_text().strip() == "Instruction":
            continue
        size = (index / "size").read_text().strip()
        scale = {"K": 1024, "M": 1024**2}.get(size[-1], 1)
        best = max(best, int(size.rstrip("KM")) * scale)
    return best


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def test_probe_figures_are_positive_and_consistent(bin_dir: Path) -> None:
    done = probe(bin_dir, *SHORT, "--json", "-")
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)  # stdout holds the JSON and nothing else
    assert "GB/s" in done.stderr and "GFLOP/s" in done.stderr
    cpus = sorted(os.sched_getaffinity(0))
    assert out["threads"] == len(cpus) and out["cpus"] == cpus
    assert out["online_cpus"] >= out["threads"]
    assert out["cpu_model"] == cpu_model() and out["llc_bytes"] == largest_cache_bytes()
    triad, fma = out["triad"], out["fma"]
    for kernel in (triad, fma):
        assert kernel["reps"] >= 3
        assert 0 < kernel["best_s"] <= kernel["median_s"]
    # the rates are the counted work over the best repetition
    assert triad["gb_per_s"] > 0
    assert triad["gb_per_s"] == pytest.approx(triad["bytes_per_rep"] / triad["best_s"] / 1e9)
    assert triad["median_gb_per_s"] <= triad["gb_per_s"]
    elements = triad["array_bytes"] // 8
    assert triad["bytes_per_rep"] == 24 * elements * triad["passes_per_rep"]
    assert triad["array_bytes"] <= 4 * 2**20 and triad["array_bytes"] > 4 * 2**20 - 8 * len(cpus)
    assert triad["beyond_llc"] == (0 < out["llc_bytes"] <= triad["array_bytes"] // 4)
    assert fma["gflop_per_s"] > 0
    flop = 2 * out["threads"] * fma["iterations"] * fma["chains"] * fma["lanes"]
    assert fma["flop_per_rep"] == flop
    assert fma["gflop_per_s"] == pytest.approx(flop / fma["best_s"] / 1e9)
    assert fma["median_gflop_per_s"] <= fma["gflop_per_s"]
    # the kernel is the widest the CPU has
    flags = cpu_flags()
    want = "avx512f" if "avx512f" in flags else "avx2+fma" if {"avx2", "fma"} <= flags else "sse2"
    assert fma["isa"] == want
    assert fma["lanes"] == {"avx512f": 8, "avx2+fma": 4, "sse2": 2}[want]


def test_probe_one_kernel_and_threads(bin_dir: Path) -> None:
    done = probe(bin_dir, *SHORT, "--kernel", "fma", "--threads", "1", "--json", "-")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["triad"] is None and out["fma"]["gflop_per_s"] > 0 and out["threads"] == 1


@pytest.mark.parametrize(
    "args",
    [
        ("--seconds", "0"),
        ("--seconds", "x"),
        ("--array-mib", "0"),
        ("--threads", "100000"),
        ("--kernel", "gpu"),
        ("--no-such-option",),
    ],
)
def test_probe_bad_input_is_one_line(bin_dir: Path, args: tuple[str, ...]) -> None:
    done = probe(bin_dir, *args)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "hushmon-probe" in done.stderr


def test_hushmon_probe_stores_one_record_per_node_type(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    first = hushmon("probe", "--data-dir", data, *SHORT, "--json", "-")
    assert first.returncode == 0, first.stderr
    path = ceilings_path(tmp_path / "data")
    (record,) = load_ceilings(path)
    assert record.gb_per_s > 0 and record.gflop_per_s > 0
    assert record.ridge_flop_per_byte == pytest.approx(record.gflop_per_s / record.gb_per_s)
    assert json.loads(first.stdout)["records"][0]["key"] == record.key
    # the same node type again: not measured, the hosts added
    again = hushmon("probe", "--data-dir", data, *SHORT, "--hosts", "n[1-3]")
    assert again.returncode == 0, again.stderr
    assert "stored already" in again.stdout
    (kept,) = load_ceilings(path)
    assert kept.measured_at == record.measured_at and kept.gb_per_s == record.gb_per_s
    assert kept.covers("n2") and kept.covers(record.probed_host) and not kept.covers("n4")
    shown = hushmon("probe", "--data-dir", data, "--show")
    assert shown.returncode == 0 and record.key in shown.stdout and "GFLOP/s" in shown.stdout


def test_hushmon_probe_bad_input(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    for args in (("--seconds", "-1"), ("--hosts", "n[1-x]"), ("--launch", "/no/such/launcher")):
        done = hushmon("probe", "--data-dir", data, *args)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    path = ceilings_path(tmp_path / "data")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    done = hushmon("probe", "--data-dir", data, "--show")
    assert done.returncode == 1 and "not a ceilings file" in done.stderr


def test_ceilings_record_rejects_non_positive() -> None:
    fields = dict(
        cpu_model="X",
        online_cpus=4,
        gb_per_s=0.0,
        gflop_per_s=10.0,
        isa="sse2",
        threads=4,
        beyond_llc=True,
        array_bytes=1,
        probed_host="h",
        measured_at="t",
        load_avg="0",
    )
    with pytest.raises(ValueError):
        Ceilings.from_json(fields)
