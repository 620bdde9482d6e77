"""outofcore on a bed node with a small page cache is found I/O-bound from
its own tasks (issue 23): a 1-node bed whose node may use 384 MiB, 768 MiB
of data streamed through a 32 MiB buffer under Slurm. The job's cgroup
(python/hushmon/testbed/jobcgroups.py) gives the agent the job's tasks, so
its procio lines carry their bytes and their block I/O wait (delay
accounting), which a loaded machine's host iowait hides; the energy finding
reads the node's simulated RAPL and says so.

A bed of its own: run under the bed lock (flock /tmp/hushmon-bed.lock)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bedlib import LiveBed, bed_unavailable, bed_up, hushmon

from hushmon.digest.factors.io_bound import JOB_OWN
from hushmon.paths import build_bin_dir

pytestmark = [pytest.mark.testbed, pytest.mark.slow]


@pytest.fixture(scope="module")
def small_cache_bed() -> Iterator[LiveBed]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    options = ("--nodes", "1", "--racks", "1", "--node-memory", "384M", "--period-ms", "500")
    with bed_up(*options) as (info, data):
        yield LiveBed(info, data)


def test_outofcore_is_io_bound_from_its_own_tasks(small_cache_bed: LiveBed) -> None:
    bed = small_cache_bed
    ooc = [str(build_bin_dir() / "outofcore"), "--data", "768M", "--memory", "32M"]
    ooc += ["--passes", "1", "--no-fsync", "--dir", str(bed.data)]
    run = hushmon("run", "--data-dir", str(bed.data), "--json", "-", "--", "srun", "-N", "1", *ooc)
    assert run.returncode == 0, run.stderr[-2000:]
    job = json.loads(run.stdout)["job"]
    digest = json.loads(Path(json.loads(run.stdout)["digest"]["json"]).read_text())
    found = {f["factor"]: f for f in digest["findings"]}
    assert "io_bound" in found, [f["factor"] for f in digest["findings"]]
    ev = found["io_bound"]["evidence"]
    # the job's own tasks: bytes from /proc/PID/io, wait from delay accounting
    assert ev["bytes_source"].startswith("the job's tasks")
    assert ev["iowait_of"] == JOB_OWN
    # found on the wait's share of the tasks' CPU time + wait; its share of their
    # wall-clock time (what the loss counts) is lower by their other time off a CPU
    assert ev["iowait_pct_of_cpu_and_wait_in_io_periods"] >= 10
    assert 0 < ev["iowait_pct_in_io_periods"] < ev["iowait_pct_of_cpu_and_wait_in_io_periods"]
    assert 0 < found["io_bound"]["loss"]["low_share"] < found["io_bound"]["loss"]["high_share"]
    assert ev["file_system"].startswith("local disk")
    assert ev["gb_moved_per_node_in_io_periods"] > 0.3  # of 768 MiB written, read, checked
    assert found["io_bound"]["loss"]["high_share"] > 0
    # energy from the node's simulated RAPL, marked as such
    energy = found["energy"]["evidence"]
    assert energy["sources_not_this_hardware"] == "rapl (simulated)"
    assert energy["energy_kj"] > 0 and "node the package measures" in energy["apportioned_by"]
    # the agent's lines that made it: the job's cgroup and its tasks
    spool = "".join(p.read_text() for p in (bed.data / "spool" / "n1").glob("*.lp*"))
    assert f"procio,host=n1,job={job} " in spool and "blkio_wait_pct=" in spool
    assert f"cgroup,host=n1,job={job},cgroup=" in spool
