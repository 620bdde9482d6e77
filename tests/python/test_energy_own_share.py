"""hushmon's own energy: each node-period's agent CPU time priced at that period's
package energy per busy CPU-second (factors/energy.py ``own_energy_j``).

The synthetic job has two halves with the same package power and different
busy CPU: the first half 3 CPUs at 90 %, the second at 10 %, so the energy
per busy CPU-second is 100 / 2.7 J and then 100 / 0.3 J. The agent's CPU time
is 100 us a period in the first half and 400 us in the second: the
per-period rule charges the busy-little half nine times the price, where a
whole-job ratio (the rule before) would charge both halves alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hushmon.digest.agent_cpu import agent_cpu_s_by_period, attach_agent_cpu
from hushmon.digest.factors import energy, parameters
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 40
PACKAGE_W = 100.0


def _cpu(idle: float) -> str:
    return (
        f"user_pct={100 - idle},nice_pct=0,system_pct=0,idle_pct={idle},iowait_pct=0,"
        "irq_pct=0,softirq_pct=0,steal_pct=0"
    )


def _job(tmp: Path, agent: bool = True) -> JobData:
    sc = Scenario(nodes=2, seconds=SECONDS, job="j", omit=("cgroup", "cpu", "hushmon_agent"))
    spool = tmp / "spool"
    write_spool(sc, spool)
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * sc.period_ns
            first = i < SECONDS // 2
            lines.append(
                f"rapl,host={host},domain=package-0,zone=intel-rapl:0 "
                f"energy_j={PACKAGE_W},power_w={PACKAGE_W} {ts}\n"
            )
            lines += [
                f"cpu,host={host},cpu={c} {_cpu(10 if first else 90)} {ts}\n"
                for c in ("total", "cpu0", "cpu1", "cpu2")
            ]
            if agent:
                lines.append(f"hushmon_agent,host={host} cpu_us={100 if first else 400} {ts}\n")
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    job = load_job(db, "j")
    attach_agent_cpu(job, db)
    return job


def test_each_period_priced_at_its_own_energy_per_busy_cpu_second(tmp_path: Path) -> None:
    job = _job(tmp_path)
    by_period = agent_cpu_s_by_period(job)
    assert by_period is not None and by_period.shape == (2, SECONDS)
    half = SECONDS // 2
    assert by_period[:, :half] == pytest.approx(100e-6)
    assert by_period[:, half:] == pytest.approx(400e-6)
    got = energy.own_energy_j(job)
    assert not isinstance(got, str)
    agent_j, agent_s, package_j, mean_ratio = got
    # 2 nodes x 20 periods at each price
    want = 2 * half * (100e-6 * PACKAGE_W / 2.7 + 400e-6 * PACKAGE_W / 0.3)
    assert agent_j == pytest.approx(want, rel=1e-3)
    assert agent_s == pytest.approx(2 * half * 500e-6, rel=1e-6)
    assert package_j == pytest.approx(2 * SECONDS * PACKAGE_W)
    # the whole-job ratio (8 kJ over 2 x 20 x (2.7 + 0.3) CPU-s = 66.7 J per CPU-s)
    # would have given 1.33 J: the rule is not that one
    whole_job = agent_s * package_j / (2 * half * (2.7 + 0.3))
    assert agent_j > 1.5 * whole_job
    assert mean_ratio == pytest.approx(agent_j / agent_s)
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    assert f.evidence["hushmon_energy_j"] == round(want, 3)
    assert "busy CPU-second" in f.hint and "busy" in f.evidence["hushmon_energy_rule"]


def test_without_the_agent_lines_the_share_is_not_known(tmp_path: Path) -> None:
    job = _job(tmp_path, agent=False)
    got = energy.own_energy_j(job)
    assert isinstance(got, str) and got.startswith("not known")
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    assert f.evidence["hushmon_energy"].startswith("not known")
    assert "hushmon_energy_j" not in f.evidence


def test_an_attachment_off_the_job_s_axis_is_not_known(tmp_path: Path) -> None:
    """A view of the job whose periods differ from the attachment's (a phase's
    slice that did not slice it) says so instead of failing."""
    job = _job(tmp_path)
    job.__dict__["agent_cpu_s_by_period"] = np.zeros((2, 5))
    got = energy.own_energy_j(job)
    assert isinstance(got, str) and "not on this view" in got
