"""The idle_cpu factor's estimate for CPUs shared with other nodes of the machine
(factors/cpu_share.py): what a rank per node CPU would save, 0 to a high end
from the CPUs the machine left idle (a busy machine's scheduler shares its
CPUs among groups, not tasks: more ranks take nothing from the others), on
synthetic jobs whose answers are worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import apply_loss_rule, idle_cpu, parameters
from hushmon.digest.factors.base import Finding
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 30
WAITING = 6  # the last periods: the job waits (2 % of a CPU), it does not compute


def _cpu(busy: float) -> str:
    return (
        f"user_pct={busy},nice_pct=0,system_pct=0,idle_pct={100 - busy},iowait_pct=0,"
        "irq_pct=0,softirq_pct=0,steal_pct=0"
    )


def _job(
    tmp: Path,
    job_cpu_pct: float,
    tasks: int,
    host_busy_pct: float,
    procio: bool = True,
    nodes: int = 1,
) -> JobData:
    """Nodes of 2 CPUs on one machine of 2 CPUs (every node may use every CPU): the
    host-wide lines are the same on every node, as on the bed."""
    sc = Scenario(nodes=nodes, seconds=SECONDS, job="j", omit=("cgroup", "cpu", "procio", "load"))
    spool = tmp / "spool"
    write_spool(sc, spool)
    for n in range(nodes):
        host = sc.host(n)
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * sc.period_ns
            used = job_cpu_pct if i < SECONDS - WAITING else 2.0
            node_busy = used / 2  # % of the node's 2 CPUs
            lines += [
                f"cpu,host={host},cpu=total {_cpu(node_busy)} {ts}\n",
                f"cpu,host={host},cpu=total,scope=host {_cpu(host_busy_pct)} {ts}\n",
                f"cpu,host={host},cpu=cpu0,scope=host {_cpu(host_busy_pct)} {ts}\n",
                f"cpu,host={host},cpu=cpu1,scope=host {_cpu(host_busy_pct)} {ts}\n",
                f"node_cgroup,host={host} cpus=2,cpuset_cpus=2i {ts}\n",
            ]
            if procio:
                lines.append(f"procio,host={host},job=j cpu_pct={used},tasks={tasks}i {ts}\n")
        (spool / f"{host}-{START_NS}-902.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    return load_job(db, "j")


def _shared(job: JobData) -> Finding:
    (f,) = idle_cpu.FACTOR.analyze(job, parameters()["idle_cpu"])
    assert f.title == "CPUs shared with other nodes of the machine"
    return f


COMPUTING = (SECONDS - WAITING) / SECONDS


def test_one_rank_on_a_busy_machine_gains_nothing(tmp_path: Path) -> None:
    # 1 task at 40 % of a CPU while the machine's 2 CPUs are all busy: a second rank
    # would share the job's scheduling group's time, not take the others' (the bed:
    # two ranks got 0.26-0.39 CPUs together, one alone 0.27-0.42), so nothing is
    # there to gain; the fair-share estimate this replaces said 40 % of the
    # computing periods, a [medium] finding on most bed jobs at load
    f = _shared(_job(tmp_path, 40.0, 1, 100.0))
    assert f.loss is not None
    assert f.loss.low_share == 0.0 and f.loss.high_share == 0.0
    apply_loss_rule(f, parameters()["loss"])
    assert f.severity == "low"
    assert f.evidence["cpu_share_per_task"] == pytest.approx(0.4, abs=0.01)
    assert f.evidence["machine_idle_cpus"] == 0.0
    assert f.evidence["job_cpus_with_a_rank_per_cpu"] == pytest.approx(0.4, abs=0.01)
    assert f.evidence["share_of_run_computing"] == pytest.approx(COMPUTING, abs=0.01)
    assert any("divides evenly" in a for a in f.loss.assumptions)
    assert any("low end: 0" in a for a in f.loss.assumptions)
    assert any("not among tasks" in a for a in f.loss.assumptions)
    assert "had 0.00 idle" in f.loss.basis
    assert "at most 0%" in f.hint
    # 40 % of a CPU per task: the CPUs are oversubscribed, and the finding says that
    # more ranks may run slower (the bed at load 16-22: 24-78 % slower), not only 0
    assert any("run slower" in a for a in f.loss.assumptions) and "run slower" in f.hint


def test_a_rank_per_cpu_already_saves_nothing(tmp_path: Path) -> None:
    f = _shared(_job(tmp_path, 47.0, 2, 90.0))
    assert f.loss is not None and f.loss.high_share == 0.0


def test_the_machines_idle_cpus_are_what_a_second_rank_gets(tmp_path: Path) -> None:
    # 1 task at a whole CPU, the machine 90 % busy: 0.2 of its 2 CPUs idle, which a
    # second rank would take: the job's tasks use 1.2 CPUs, the computing periods
    # take 1 / 1.2 of their time
    f = _shared(_job(tmp_path, 100.0, 1, 90.0))
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx((1 - 1 / 1.2) * COMPUTING, abs=0.01)
    assert f.evidence["machine_idle_cpus"] == pytest.approx(0.2, abs=0.01)
    assert f.evidence["job_cpus_with_a_rank_per_cpu"] == pytest.approx(1.2, abs=0.01)
    assert not any("run slower" in a for a in f.loss.assumptions)


def test_the_jobs_nodes_on_one_machine_share_its_idle_cpus(tmp_path: Path) -> None:
    # 2 nodes of the job on one machine, a task at 80 % of a CPU each, the machine
    # 90 % busy: both nodes would add a rank, so each gets half the 0.2 idle CPUs
    # (0.8 -> 0.9 CPUs), not all of it (0.8 -> 1.0)
    f = _shared(_job(tmp_path, 80.0, 1, 90.0, nodes=2))
    assert f.loss is not None
    assert f.evidence["job_nodes_on_the_machine"] == 2
    assert f.loss.high_share == pytest.approx((1 - 0.8 / 0.9) * COMPUTING, abs=0.01)
    assert "shared by the job's 2 nodes" in f.loss.basis


def test_without_the_jobs_own_cpu_time_no_estimate(tmp_path: Path) -> None:
    f = _shared(_job(tmp_path, 40.0, 1, 100.0, procio=False))
    assert f.loss is None and "procio" in f.loss_unknown


def test_idle_cpus_low_end_counts_only_the_periods_the_job_computed(tmp_path: Path) -> None:
    # 1 task at a whole CPU of the node's 2, the machine's other CPU idle: the node
    # idles 50 % throughout, but in the last periods the job waits (2 % of a CPU), and
    # a second rank would not shorten those: the low end counts the idle time of the
    # computing periods only (the bench's idle-cpu case: 35-49 % predicted, 43 % saved
    # where the earlier rule said 49-49 %); the high end stays all of it
    job = _job(tmp_path, 100.0, 1, 50.0)
    (f,) = idle_cpu.FACTOR.analyze(job, parameters()["idle_cpu"])
    assert f.title == idle_cpu.IdleCpu.title
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx(0.5, abs=0.01)
    assert f.loss.low_share == pytest.approx(0.5 * COMPUTING, abs=0.01)
    assert any("in which the job computed" in a for a in f.loss.assumptions)
