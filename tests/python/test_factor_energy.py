"""energy on a synthetic job with known RAPL power and a job using half the CPU time.

The lines added to the synthetic scenario are the nodes' 3 CPUs 90 % busy,
what the agent's ``rapl`` source writes for a package and a DRAM zone at
constant power, and the job's cgroup at 45 % of the node's CPUs, so the
job's share of the package (the apportioning rule) is known: one half."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hushmon.digest.agent_cpu import attach_agent_cpu
from hushmon.digest.compare import compare_runs
from hushmon.digest.factors import energy, parameters
from hushmon.digest.factors.base import AnalyzerSkip, SkipReason
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 60
PACKAGE_W, DRAM_W = 100.0, 20.0


CPU = (
    "user_pct=88,nice_pct=0,system_pct=2,idle_pct=10,iowait_pct=0,irq_pct=0,softirq_pct=0,"
    "steal_pct=0"
)


def _job(
    tmp: Path,
    rapl: bool = True,
    backend: str = "",
    usage_pct: float = 45.0,
    name: str = "j",
    bmc_w: float | None = None,
    bmc_seconds: int = SECONDS,
) -> JobData:
    start_ns = START_NS + (0 if name == "j" else 10**12)  # another job: 1000 s later
    sc = Scenario(nodes=2, seconds=SECONDS, job=name, omit=("cgroup", "cpu"), start_ns=start_ns)
    spool = tmp / f"spool-{name}"
    write_spool(sc, spool)
    tag = f",backend={backend}" if backend else ""
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i in range(SECONDS):
            ts = start_ns + i * sc.period_ns
            if rapl:
                lines.append(
                    f"rapl,host={host}{tag},domain=package-0,zone=intel-rapl:0 "
                    f"energy_j={PACKAGE_W},power_w={PACKAGE_W} {ts}\n"
                    f"rapl,host={host}{tag},domain=dram,zone=intel-rapl:0:0 "
                    f"energy_j={DRAM_W},power_w={DRAM_W} {ts}\n"
                )
            if bmc_w is not None and i < bmc_seconds:  # what the agent's bmc source writes
                lines.append(
                    f"bmc,host={host},backend=redfish power_w={bmc_w},"
                    f"energy_total_j={bmc_w * i},age_s=0.4 {ts}\n"
                )
            lines += [
                f"cpu,host={host},cpu={c} {CPU} {ts}\n" for c in ("total", "cpu0", "cpu1", "cpu2")
            ]
            lines.append(
                f"cgroup,host={host},job={name},cgroup=/hushmon/{name} "
                f"cpu_usage_pct={usage_pct} {ts}\n"
            )
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    job = load_job(db, name)
    attach_agent_cpu(job, db)  # as build_digest does
    return job


def test_energy_apportioned_by_the_job_cpu_time(tmp_path: Path) -> None:
    job = _job(tmp_path)
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    ev = f.evidence
    assert f.severity == "info" and f.loss is None and f.loss_unknown
    # 2 nodes x 60 s x 100 W x one half = 6 kJ; DRAM 1.2 kJ
    assert ev["cpu_package_kj"] == 6.0
    assert ev["dram_kj"] == 1.2
    assert ev["energy_kj"] == 7.2
    assert ev["cpu_package_share"] == round(6 / 7.2, 3)
    assert ev["job_share_of_package_mean"] == 0.5
    assert ev["power_w_mean"] == 120.0  # (100 + 20) x 2 nodes x one half
    assert len(ev["power_w_by_tenth_of_run"]) == 10
    # hushmon: the synthetic agents' 80-150 us a period, 120 node-periods, x each
    # period's 100 W over 3 x 0.9 busy CPUs = 37.04 J per busy CPU-second
    assert 120 * 80e-6 < ev["hushmon_cpu_s"] < 120 * 150e-6
    assert ev["package_j_per_busy_cpu_s"] == round(100 / 2.7, 2)
    assert abs(ev["hushmon_energy_j"] - ev["hushmon_cpu_s"] * 100 / 2.7) < 0.01
    assert "hushmon's agents used" in f.hint
    assert "sources_not_this_hardware" not in ev
    assert "7.2 kJ" in f.hint and "cgroup CPU time" in f.hint


def test_a_job_using_every_busy_cpu_gets_the_whole_package_and_fixture_marked(
    tmp_path: Path,
) -> None:
    job = _job(tmp_path, backend="fixture", usage_pct=90.0)
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    assert f.evidence["cpu_package_kj"] == 12.0
    assert f.evidence["sources_not_this_hardware"] == "rapl (fixture)"
    assert "not this machine's hardware" in f.hint


def test_node_power_from_the_bmc_gives_energy_to_solution_and_other(tmp_path: Path) -> None:
    """The BMC reads 200 W per node beside the 100 W package and 20 W DRAM:
    the job's half of 2 nodes x 60 s x 200 W is 12 kJ, of which the parts
    measured are 7.2 kJ and the rest (fans, disks, supplies) 4.8 kJ."""
    job = _job(tmp_path, bmc_w=200.0)
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    ev = f.evidence
    assert ev["node_bmc_kj"] == 12.0 and ev["parts_measured_kj"] == 7.2
    assert ev["energy_kj"] == 12.0 and ev["other_kj"] == 4.8
    assert ev["other_share"] == 0.4 and ev["cpu_package_share"] == 0.5
    assert ev["node_periods_with_bmc_reading"] == 1.0
    assert ev["power_w_mean"] == 200.0  # 200 W x 2 nodes x one half: the BMC's, not the parts'
    assert "by its nodes' BMC (7.2 kJ of it measured" in f.hint
    assert "other (fans, disks, NICs, supply loss) 40%" in f.hint
    assert energy.job_energy_j(job) == 12000.0  # compare's energy per unit of work uses it


def test_bmc_gaps_below_the_parts_and_bmc_alone(tmp_path: Path) -> None:
    # The BMC's lines stop after 30 s (stale readings are not published): its
    # 6 kJ fall below the parts' 7.2, so the parts stay the energy to solution.
    job = _job(tmp_path, bmc_w=200.0, bmc_seconds=30)
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    ev = f.evidence
    assert ev["node_periods_with_bmc_reading"] == 0.5 and ev["node_bmc_kj"] == 6.0
    assert "other_kj" not in ev and ev["energy_kj"] == 7.2 and "node_below_parts" in ev
    # Only the BMC: its energy is the job's, one part named node, not other.
    job = _job(tmp_path / "alone", rapl=False, bmc_w=200.0, name="k")
    [f] = energy.FACTOR.analyze(job, parameters()["energy"])
    assert f.evidence["node_kj"] == 12.0 and f.evidence["energy_kj"] == 12.0
    assert "other_kj" not in f.evidence and "no CPU, memory or GPU energy sensors" in f.hint


def test_skipped_without_energy_sources(tmp_path: Path) -> None:
    job = _job(tmp_path, rapl=False)
    try:
        energy.FACTOR.analyze(job, parameters()["energy"])
    except AnalyzerSkip as skip:
        assert skip.reason == SkipReason.MISSING_SENSOR
    else:
        raise AssertionError("no skip without RAPL or GPU power")
    assert job.__dict__["agent_cpu_s"] > 0  # the agents' CPU time was there all along
    assert np.isnan(energy.FACTOR.metric(job, parameters()["energy"]) or np.nan)


def test_compare_shows_energy_per_unit_of_work(tmp_path: Path) -> None:
    """Two runs in one store with the same power and CPU, so the same energy per
    unit of work; compare.json and the table carry it."""
    _job(tmp_path)
    _job(tmp_path, name="k")
    out = compare_runs(tmp_path / "hushmon.duckdb", ["j@1", "k@2"], tmp_path / "cmp")
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    per_work = [r["energy_j_per_work"] for r in data["runs"]]
    # 7.2 kJ (package and DRAM at the job's half) / the FLOPs: the synthetic PMU's
    # 88 % busy x 2.4 GFLOP/s x 3 CPUs, x 2 nodes x 60 s = 9.5e-9 J per FLOP
    assert data["runs"][0]["work_sensor"] == "pmu.flops_per_s"
    assert all(abs(e / (7200 / (0.88 * 2.4e9 * 3 * 2 * 60)) - 1) < 0.05 for e in per_work)
    assert [r["energy_j"] for r in data["runs"]] == [7200.0, 7200.0]
    assert out.runs[0].energy_j == 7200.0


class _GpuJob:
    """The three things gpu_energy_j reads of a job: a counter read every
    10th period from period 2 (as the agent's gpu.energy_every_ms leaves
    it) beside power_w every period."""

    period_s = 1.0

    def __init__(self, power_w: float, periods: int, power: bool = True) -> None:
        t = np.arange(periods, dtype=np.float64)
        counter = np.full((2, periods), np.nan)
        counter[:, 2::10] = 5e6 + power_w * 1e3 * t[2::10]
        self._m = {"gpu.energy_mj[gpu=0]": counter}
        if power:
            self._m["gpu.power_w[gpu=0]"] = np.full((2, periods), power_w)

    def base_sensors(self, prefix: str) -> list[str]:
        return [s for s in self._m if s.startswith(prefix + "[")]

    def matrix(self, sensor: str) -> np.ndarray | None:
        return self._m.get(sensor)


def test_gpu_energy_from_a_counter_read_every_tenth_period() -> None:
    # 2 nodes x 60 periods at 300 W: 36 kJ. The counter alone (readings at
    # periods 2..52) sees 50 s of it; power_w x period fills the 10 others.
    got = energy.gpu_energy_j(_GpuJob(300.0, 60))  # type: ignore[arg-type]
    assert got is not None
    assert got[0] == 36_000.0
    assert "before its first and after its last reading" in got[1]
    without_power = energy.gpu_energy_j(_GpuJob(300.0, 60, power=False))  # type: ignore[arg-type]
    assert without_power is not None and without_power[0] == 30_000.0
    # A row with no reading at all: its power x period.
    m = np.full((1, 5), np.nan)
    assert energy.counter_energy_mj(m, np.full((1, 5), 100.0), 2.0) == 1_000_000.0
