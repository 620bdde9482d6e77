"""The idle_cpu factor's estimate for CPUs shared with other nodes of the machine
(factors/cpu_share.py): what a rank per node CPU would save, 0 to a high end
from the kernel's fair share, on synthetic one-node jobs whose answers are
worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import idle_cpu, parameters
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
    tmp: Path, job_cpu_pct: float, tasks: int, host_busy_pct: float, procio: bool = True
) -> JobData:
    """One node of 2 CPUs on a machine of 2 CPUs (every node may use every CPU)."""
    sc = Scenario(nodes=1, seconds=SECONDS, job="j", omit=("cgroup", "cpu", "procio", "load"))
    spool = tmp / "spool"
    write_spool(sc, spool)
    host = sc.host(0)
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


def test_one_rank_on_a_busy_machine_gains_its_fair_share(tmp_path: Path) -> None:
    # 1 task at 40 % of a CPU while the machine's 2 CPUs are all busy: by fair share
    # 2 / 0.4 = 5 runnable tasks, 4 of them others'; with 2 ranks each gets
    # 2 / (4 + 2) = 1/3 of a CPU, the job 2/3 instead of 0.4: the computing periods
    # take 0.4 / (2/3) = 60 % of their time
    f = _shared(_job(tmp_path, 40.0, 1, 100.0))
    assert f.loss is not None
    assert f.loss.low_share == 0.0
    assert f.loss.high_share == pytest.approx(0.4 * COMPUTING, abs=0.01)
    assert f.evidence["cpu_share_per_task"] == pytest.approx(0.4, abs=0.01)
    assert f.evidence["cpu_share_per_task_with_a_rank_per_cpu"] == pytest.approx(1 / 3, abs=0.01)
    assert f.evidence["other_tasks_cpus"] == pytest.approx(4.0, abs=0.05)
    assert f.evidence["share_of_run_computing"] == pytest.approx(COMPUTING, abs=0.01)
    assert any("divides evenly" in a for a in f.loss.assumptions)
    assert any("low end: 0" in a for a in f.loss.assumptions)
    assert "fair share" in f.loss.basis
    assert "at most" in f.hint
    # 40 % of a CPU per task: the CPUs are oversubscribed, and the finding says that
    # more ranks may run slower (the bed at load 16-22: 24-78 % slower), not only 0
    assert any("run slower" in a for a in f.loss.assumptions) and "run slower" in f.hint


def test_a_rank_per_cpu_already_saves_nothing(tmp_path: Path) -> None:
    f = _shared(_job(tmp_path, 47.0, 2, 100.0))
    assert f.loss is not None and f.loss.high_share == 0.0


def test_with_cpus_free_the_others_use_what_they_used(tmp_path: Path) -> None:
    # 1 task at a whole CPU, the machine 90 % busy (1.8 CPUs: 0.8 the others'): with
    # 2 ranks each gets min(1, 2 / (0.8 + 2)) = 0.714 of a CPU, the job 1.43
    f = _shared(_job(tmp_path, 100.0, 1, 90.0))
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx((1 - 1 / (2 * 2 / 2.8)) * COMPUTING, abs=0.01)
    assert "used" in f.loss.basis and "fair share" not in f.loss.basis
    assert not any("run slower" in a for a in f.loss.assumptions)


def test_without_the_jobs_own_cpu_time_no_estimate(tmp_path: Path) -> None:
    f = _shared(_job(tmp_path, 40.0, 1, 100.0, procio=False))
    assert f.loss is None and "procio" in f.loss_unknown
