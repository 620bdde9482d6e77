"""A matmul on the bed gets a roofline verdict: the bed's agents run the
simulated PMU (python/hushmon/testbed/agents.py: FLOPs and memory traffic,
tagged backend=sim), ``hushmon probe`` stores this machine's ceilings for the
bed's nodes, and the digest of the Slurm job places each node-period under
those roofs.

A bed of its own (2 nodes, 1 rack, Slurm): run under the bed lock
(flock /tmp/hushmon-bed.lock)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bedlib import LiveBed, bed_unavailable, bed_up, hushmon

from hushmon.paths import build_bin_dir


@pytest.fixture(scope="module")
def roofline_bed() -> Iterator[LiveBed]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    with bed_up("--nodes", "2", "--racks", "1", "--period-ms", "500") as (info, data):
        yield LiveBed(info, data)


def test_matmul_gets_a_roofline_verdict_with_the_probes_ceilings(roofline_bed: LiveBed) -> None:
    data = str(roofline_bed.data)
    probe = hushmon(
        "probe", "--data-dir", data, "--seconds", "0.3", "--array-mib", "64", "--hosts", "n[1-2]",
        "--json", "-",
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    (record,) = json.loads(probe.stdout)["records"]
    run = hushmon(
        "run", "--data-dir", data, "--json", "-", "--",
        "srun", "-N", "2", str(build_bin_dir() / "matmul"), "--size", "1536", "--repeat", "2",
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    digest = json.loads(Path(json.loads(run.stdout)["digest"]["json"]).read_text())
    found = [f for f in digest["findings"] if f["factor"] == "roofline"]
    assert len(found) == 1, (digest["skipped"], run.stderr[-2000:])
    [f] = found
    ev = f["evidence"]
    assert f["title"].startswith("Roofline: ") and "SIMULATED PMU" in f["title"]
    assert ev["verdict"] in ("compute-bound", "memory-bound", "below both roofs")
    assert ev["pmu"] == "simulated" and ev["node_types"] == [record["key"]]
    assert ev["peak_gflop_per_s"] == [round(record["gflop_per_s"], 2)]
    # the simulated workload's compute phase (120 FLOP/byte) and memory phase
    # (0.04) alternate every 2 s: the points lie on both sides of the ridge
    assert ev["node_periods"] >= 4
    assert f["loss"] is not None
    html = Path(json.loads(run.stdout)["digest"]["report"]).read_text()
    assert "<h2>Roofline</h2>" in html
