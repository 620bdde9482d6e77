"""io_bound on a synthetic job with a known phase of file I/O over NFS.

The synthetic scenario's ``io_phases`` make the nodes wait for I/O (~30 %)
with user CPU at ~40 % and the local disk busy; the lines added here give the
job's tasks' /proc/PID/io bytes and an NFS mount's traffic in the same
seconds, as the agent's ``procio`` and ``nfs`` sources write them
(docs/formats.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hushmon.digest.factors import io_bound, parameters
from hushmon.digest.jobdata import JobData, load_job
from hushmon.paths import REPO_ROOT
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 120
IO = (30, 60)  # the seconds of file I/O
IoSpan = tuple[int, int] | None
OOC = REPO_ROOT / "tests" / "fixtures" / "spool" / "testbed-ooc-512M"


def _job(
    tmp: Path,
    io_phases: list[tuple[int, int]],
    nfs_bytes_per_s: float,
    blkio_in: IoSpan = None,
    own_pct: tuple[float, float] = (40.0, 60.0),
    tasks: str = "tasks=2i,",
    node_cpus: float | None = None,
) -> JobData:
    """``own_pct``: each task's CPU and block I/O wait in ``blkio_in``, % of its
    wall-clock time (2 tasks: procio sums them); ``tasks``: procio's task count field
    ("" leaves it out); ``node_cpus``: a node_cgroup line with the node's CPUs."""
    sc = Scenario(nodes=2, seconds=SECONDS, job="j", io_phases=io_phases)
    spool = tmp / "spool"
    write_spool(sc, spool)
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * sc.period_ns
            busy = any(a <= i < b for a, b in io_phases)
            waits = blkio_in is not None and blkio_in[0] <= i < blkio_in[1]
            rd = 2.0e8 if busy or waits else 1.0e4
            # the tasks' own CPU and wait (delay accounting), summed over 2 tasks
            on_cpu, wait = own_pct if waits else (90.0, 0.0)
            own = f"cpu_pct={2 * on_cpu},blkio_wait_pct={2 * wait}," if blkio_in is not None else ""
            lines.append(
                f"procio,host={host},job=j read_bytes_per_s={rd},write_bytes_per_s=0,"
                f"rchar_bytes_per_s={rd},wchar_bytes_per_s=0,syscr_per_s=50,syscw_per_s=0,"
                f"{own}{tasks}tasks_refused=0i {ts}\n"
            )
            if node_cpus is not None:
                lines.append(f"node_cgroup,host={host} cpus={node_cpus} {ts}\n")
            nfs = nfs_bytes_per_s if busy else 0.0
            lines.append(
                f"nfs,host={host},mount=/home,server=fs1,fstype=nfs4 read_bytes_per_s={nfs},"
                f"write_bytes_per_s=0 {ts}\n"
            )
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    report = ingest_spool(db, spool)
    assert report.rejected_lines == 0
    return load_job(db, "j")


def test_io_phase_found_with_the_nfs_mount_named_and_its_loss(tmp_path: Path) -> None:
    job = _job(tmp_path, [IO], nfs_bytes_per_s=5e8)
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    ev = f.evidence
    assert ev["io_bound_share_of_time"] == 0.25  # 30 of 120 s
    assert ev["periods"] == "30-60 s"
    assert ev["file_system"] == "NFS /home (server fs1)"  # 500 MB/s against the disk's ~200
    assert ev["bytes_source"].startswith("the job's tasks")
    assert ev["mb_per_s_per_node_in_io_periods"] == 200.0
    assert ev["work_rate_in_io_periods_rel"] < 0.6  # flops at ~40 % busy vs ~88 %
    # known answer: iowait ~30 %, busy ~42.6 % (user 40 + system 2 + irq 0.1 + softirq 0.2
    # + the rest), for 25 % of the run: 0.25 x 30 / 72.6 = 10.3 % of the run time
    assert f.loss is not None
    assert 0.09 <= f.loss.low_share <= f.loss.high_share <= 0.12
    assert f.loss.low_share <= 0.104 and f.loss.high_share >= 0.102
    assert "NFS /home" in f.hint and "25%" in f.hint


def test_the_tasks_own_wait_is_found_when_the_machine_shows_no_iowait(tmp_path: Path) -> None:
    """No host iowait at all (a busy machine counts it only on idle CPUs), but the
    job's tasks waited for block I/O 60 % of their active time for 30 s."""
    job = _job(tmp_path, [], nfs_bytes_per_s=0.0, blkio_in=IO)
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    ev = f.evidence
    assert ev["iowait_of"] == io_bound.JOB_OWN
    assert ev["io_bound_share_of_time"] == 0.25 and ev["periods"] == "30-60 s"
    assert ev["iowait_pct_in_io_periods"] == 60.0 and ev["iowait_pct_elsewhere"] == 0.0
    assert f.loss is not None  # known answer: 25 % of the run x 60 % waiting = 15 %
    assert f.loss.low_share == pytest.approx(0.15) and f.loss.high_share == pytest.approx(0.15)
    assert "tasks waited for block I/O 60.0% of their wall-clock time (on CPU 40.0%)" in f.hint
    assert f.evidence["iowait_share_of"] == io_bound.TASKS_WALL
    assert not any("host-wide" in a for a in f.loss.assumptions)


def test_the_tasks_wait_is_a_share_of_their_wall_clock_time(tmp_path: Path) -> None:
    """Each task waits 30 % of the wall-clock time and runs 20 % (the rest: a CPU
    taken by other work, an MPI wait): the wait is 30 % of its time, not the 60 % of
    its CPU + wait that the loss read before (the bench's memory case at load: [high]
    while raising the limit saved nothing). The high end is its 80 % off a CPU: all of
    it gone with the I/O (module doc)."""
    job = _job(tmp_path, [], nfs_bytes_per_s=0.0, blkio_in=IO, own_pct=(20.0, 30.0))
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    ev = f.evidence
    assert ev["iowait_pct_in_io_periods"] == 30.0  # 60 summed over 2 tasks / 2 / 100 %
    assert ev["tasks_on_cpu_pct_in_io_periods"] == 20.0
    # found I/O-bound on the share of CPU + wait, whatever CPU other work left them
    assert ev["iowait_pct_of_cpu_and_wait_in_io_periods"] == 60.0
    assert "30.0% of their wall-clock time (on CPU 20.0%)" in f.hint
    assert f.loss is not None  # 25 % of the run x 30 % .. 25 % x (100 - 20) %
    assert f.loss.low_share == pytest.approx(0.075)
    assert f.loss.high_share == pytest.approx(0.20)
    assert any(a.startswith("low end: the tasks' other time off a CPU") for a in f.loss.assumptions)


@pytest.mark.parametrize(
    ("tasks", "node_cpus", "per", "pct", "off_cpu_pct"),
    [
        ("", 4.0, io_bound.CPUS_WALL, 15.0, 90.0),  # 60 summed / 4 CPUs; 40 / 4 on one
        ("", None, io_bound.ACTIVE_ONLY, 60.0, 60.0),  # 60 / (60 + 40): nothing to divide by
        ("tasks=0i,", 4.0, io_bound.CPUS_WALL, 15.0, 90.0),  # no task read: the CPUs
    ],
)
def test_without_a_task_count_the_wait_is_of_the_nodes_cpus(
    tmp_path: Path, tasks: str, node_cpus: float | None, per: str, pct: float, off_cpu_pct: float
) -> None:
    job = _job(
        tmp_path,
        [],
        nfs_bytes_per_s=0.0,
        blkio_in=IO,
        own_pct=(20.0, 30.0),
        tasks=tasks,
        node_cpus=node_cpus,
    )
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    assert f.evidence["iowait_share_of"] == per
    assert f.evidence["iowait_pct_in_io_periods"] == pct
    assert f.loss is not None and f.loss.low_share == pytest.approx(0.25 * pct / 100)
    assert f.loss.high_share == pytest.approx(0.25 * off_cpu_pct / 100)


def test_local_disk_named_without_nfs_traffic(tmp_path: Path) -> None:
    job = _job(tmp_path, [IO], nfs_bytes_per_s=0.0)
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    assert f.evidence["file_system"] == "local disk sda"


def test_no_finding_without_io(tmp_path: Path) -> None:
    job = _job(tmp_path, [], nfs_bytes_per_s=0.0)
    assert io_bound.FACTOR.analyze(job, parameters()["io_bound"]) == []
    metric = io_bound.FACTOR.metric(job, parameters()["io_bound"])
    assert metric is not None and metric < 0.01


def test_bed_outofcore_is_io_bound_on_the_local_disk(tmp_path: Path) -> None:
    """The bed's recording of outofcore with 1 GiB of data on 512 MiB nodes (no procio
    then, and the node's cgroup has no I/O wait of its own: the machine's is used)."""
    spool = tmp_path / "spool"
    spool.mkdir()
    for f in OOC.glob("*.lp"):
        shutil.copy(f, spool / f.name)
    assert ingest_spool(tmp_path / "h.duckdb", spool).rejected_lines == 0
    job = load_job(tmp_path / "h.duckdb", "1")
    [f] = io_bound.FACTOR.analyze(job, parameters()["io_bound"])
    assert f.evidence["file_system"] == "local disk vda"
    assert f.evidence["iowait_of"].startswith("the machine's")
    assert f.evidence["io_bound_share_of_time"] > 0.9
    assert f.loss is not None and f.loss.low_share > 0.3  # the machine waited 53 %
    assert any("host-wide" in a for a in f.loss.assumptions)
