"""neighbour and imbalance on synthetic jobs whose answer is known: a CPU hog
beside one rank of a 4-node job.

The lines are what node-scoped agents write on the test bed (4 nodes on one
2-CPU machine, every node may use both CPUs): each node's cgroup CPU time
(``cpu,cpu=total``), the machine's (``scope=host``: the same on every node),
the job's own cgroup (``cgroup``, % of the node's CPUs) and its tasks
(``procio``). The job has one rank per node, always runnable; the hog runs
on n2. Five runnable tasks share the machine's 2 CPUs alike: each gets 0.4
CPU (20 % of a node's 2 CPUs), so stopping the hog gives each rank 0.5 CPU:
the run takes 4/5 of its time, a saving of 20 %."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import imbalance, neighbour, parameters
from hushmon.digest.factors.base import AnalyzerSkip, SkipReason
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS

SECONDS = 30
HOSTS = ("n1", "n2", "n3", "n4")


def _job(
    tmp: Path,
    node_pct: dict[str, float],
    job_pct: float | dict[str, float],
    host_busy_pct: float | None,
    tasks: int = 1,
    job_cgroup: bool = True,
) -> JobData:
    spool = tmp / "spool"
    spool.mkdir()
    for host in node_pct:
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * 1_000_000_000
            busy = node_pct[host]
            mine = job_pct[host] if isinstance(job_pct, dict) else job_pct
            lines.append(
                f"cpu,host={host},cpu=total user_pct={busy},system_pct=0,"
                f"idle_pct={100 - busy} {ts}\n"
            )
            if host_busy_pct is not None:
                lines.append(
                    f"cpu,host={host},cpu=total,scope=host user_pct={host_busy_pct},"
                    f"system_pct=0,idle_pct={100 - host_busy_pct},iowait_pct=0 {ts}\n"
                )
            lines.append(f"node_cgroup,host={host} cpus=2 {ts}\n")
            lines.append(f"job,host={host},job=j active=1i {ts}\n")
            if job_cgroup:
                lines.append(
                    f"cgroup,host={host},job=j,cgroup=bed/{host}/job_j "
                    f"cpu_usage_pct={mine},cpu_user_pct={mine},cpu_system_pct=0 {ts}\n"
                )
                # procio: % of one CPU, summed over the tasks (2 CPUs per node)
                lines.append(f"procio,host={host},job=j tasks={tasks},cpu_pct={2 * mine} {ts}\n")
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    return load_job(db, "j")


BED = {"n1": 21.0, "n2": 41.0, "n3": 21.0, "n4": 21.0}  # 1 point of daemons on each


def test_the_hog_is_a_neighbour_not_imbalance(tmp_path: Path) -> None:
    job = _job(tmp_path, BED, job_pct=20.0, host_busy_pct=100.0)
    name, _ = work_matrix(job) or ("", None)
    assert name == "cgroup.cpu_user_pct"  # the job's own CPU time, not the node's
    assert imbalance.FACTOR.analyze(job, parameters()["imbalance"]) == []
    (f,) = neighbour.FACTOR.analyze(job, parameters()["neighbour"])
    assert f.evidence["node"] == "n2"
    assert f.evidence["other_work_cpu_pct"] == pytest.approx(21.0)
    assert f.loss is not None
    # low end: the hog's 21 contended points shared in proportion (20 of the other 79):
    # 5.3 -> 5.3 / 25.3 = 21 %; high end: shared by the job's 4 ranks on the machine:
    # 21 x 20 / 80 = 5.25 -> the same. The known answer: 1 - 4/5 = 20 %
    assert f.loss.low_share == pytest.approx(0.2, abs=0.015)
    assert f.loss.high_share == pytest.approx(0.2, abs=0.015)


def test_node_cpu_time_alone_reads_the_hog_as_imbalance(tmp_path: Path) -> None:
    """The bug this guards: without the job's cgroup the hog is n2's work."""
    job = _job(tmp_path, BED, job_pct=20.0, host_busy_pct=100.0, job_cgroup=False)
    (f,) = imbalance.FACTOR.analyze(job, parameters()["imbalance"])
    assert f.evidence["busiest_node"] == "n2" and f.evidence["work_sensor"] == "cpu.user_pct"
    with pytest.raises(AnalyzerSkip) as skip:
        neighbour.FACTOR.analyze(job, parameters()["neighbour"])
    assert skip.value.reason is SkipReason.MISSING_SENSOR


def test_free_cpus_make_the_neighbour_free(tmp_path: Path) -> None:
    # the machine 60 % busy: the hog took CPU time nobody was refused
    job = _job(tmp_path, BED, job_pct=20.0, host_busy_pct=60.0)
    assert neighbour.FACTOR.analyze(job, parameters()["neighbour"]) == []


def test_a_rank_with_a_cpu_of_its_own_loses_nothing(tmp_path: Path) -> None:
    # dedicated 2-CPU nodes (no machine-wide lines): a rank and a hog each hold a
    # CPU; the node is full, but the rank's task had a whole CPU (procio 100 %)
    nodes = {"n1": 50.0, "n2": 100.0}
    job = _job(tmp_path, nodes, job_pct=50.0, host_busy_pct=None)
    assert neighbour.FACTOR.analyze(job, parameters()["neighbour"]) == []


def test_a_neighbour_on_a_dedicated_node_costs_its_whole_share(tmp_path: Path) -> None:
    # 2 ranks per 2-CPU node; on n2 a hog: each of the 3 tasks gets 2/3 CPU, the
    # ranks 66.7 % of the node; stopping it gives them 100 %: a third of the time
    nodes = {"n1": 100.0, "n2": 100.0}
    job = _job(tmp_path, nodes, {"n1": 100.0, "n2": 66.7}, host_busy_pct=None, tasks=2)
    (f,) = neighbour.FACTOR.analyze(job, parameters()["neighbour"])
    assert f.evidence["node"] == "n2"
    assert f.loss is not None
    assert f.loss.low_share == pytest.approx(1 / 3, abs=0.01)
    assert f.loss.high_share == pytest.approx(1 / 3, abs=0.01)
