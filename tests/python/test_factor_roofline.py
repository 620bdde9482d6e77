"""roofline on synthetic jobs whose answer is known: the PMU's FLOPs and memory
traffic per node and period (as the agent's pmu source writes them) against
ceilings stored as ``hushmon probe`` stores them."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.build import build_digest
from hushmon.digest.factors import parameters, roofline
from hushmon.digest.factors.base import AnalyzerSkip, SkipReason
from hushmon.digest.jobdata import JobData, load_job
from hushmon.probe.ceilings import Ceilings, ceilings_path, save_ceilings
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

PEAK_GFLOP_PER_S = 100.0
PEAK_GB_PER_S = 20.0  # ridge 5 FLOP/byte


def ceilings(hosts: list[str]) -> Ceilings:
    return Ceilings(
        cpu_model="Test CPU",
        online_cpus=8,
        gb_per_s=PEAK_GB_PER_S,
        gflop_per_s=PEAK_GFLOP_PER_S,
        isa="avx2+fma",
        threads=8,
        beyond_llc=True,
        array_bytes=1 << 30,
        probed_host=hosts[0],
        measured_at="2026-11-27T00:00:00Z",
        load_avg="0.1",
        hosts=hosts,
    )


def spool_job(
    tmp: Path, phases: list[tuple[int, float, float]], with_bytes: bool = True, tags: str = ""
) -> Path:
    """Two nodes; each phase: (seconds, GFLOP/s, GB/s). Returns the store."""
    seconds = sum(p[0] for p in phases)
    sc = Scenario(nodes=2, seconds=seconds, job="j", omit=("pmu",))
    spool = tmp / "spool"
    write_spool(sc, spool)
    rates = [(f, b) for n, f, b in phases for _ in range(n)]
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i, (f, b) in enumerate(rates):
            ts = START_NS + i * sc.period_ns
            traffic = f",mem_bytes_per_s={b * 1e9}" if with_bytes else ""
            lines.append(
                f"pmu,host={host},cpu=total,backend=sim{tags} flops_per_s={f * 1e9}{traffic} {ts}\n"
            )
        (spool / f"{host}-{START_NS}-pmu.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    return db


def job_with(db: Path, hosts: list[str] | None) -> JobData:
    if hosts is not None:
        save_ceilings(ceilings_path(db.parent), [ceilings(hosts)])
    job = load_job(db, "j")
    roofline.attach_ceilings(job, db)
    return job


def test_compute_then_memory_phase_known_shares_and_loss(tmp_path: Path) -> None:
    # 40 s at 80 GFLOP/s on 1 GB/s (AI 80: 80 % of the peak), then 20 s at
    # 1.5 GFLOP/s on 15 GB/s (AI 0.1: roof 2 GFLOP/s, 75 % of it)
    db = spool_job(tmp_path, [(40, 80.0, 1.0), (20, 1.5, 15.0)])
    job = job_with(db, ["node[000-001]"])
    [f] = roofline.FACTOR.analyze(job, parameters()["roofline"])
    ev = f.evidence
    assert f.title == "Roofline: compute-bound (SIMULATED PMU: synthetic rates)"
    assert ev["share_compute_bound"] == pytest.approx(2 / 3, abs=1e-3)
    assert ev["share_memory_bound"] == pytest.approx(1 / 3, abs=1e-3)
    assert ev["share_below_both_roofs"] == 0
    assert ev["ridge_flop_per_byte"] == [5.0]
    assert ev["pmu"] == "simulated"
    # gap to the roof: 0.2 for 40 s, 0.25 for 20 s -> 0.2167; with twice the
    # traffic the memory phase's roof halves to 1 GFLOP/s, below its 1.5: 0
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx((40 * 0.2 + 20 * 0.25) / 60, abs=1e-3)
    assert f.loss.low_share == pytest.approx(40 * 0.2 / 60, abs=1e-3)
    assert ev["points_at_or_above_roof"] == 0


def test_below_both_roofs(tmp_path: Path) -> None:
    # 5 GFLOP/s on 2 GB/s: AI 2.5 left of the ridge, 10 % of the bandwidth
    db = spool_job(tmp_path, [(30, 5.0, 2.0)])
    [f] = roofline.FACTOR.analyze(job_with(db, ["node000", "node001"]), parameters()["roofline"])
    assert f.evidence["verdict"] == "below both roofs"
    assert f.evidence["share_below_both_roofs"] == 1.0
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx(0.9, abs=1e-3)  # 1 - 5 / (2.5 x 20)
    assert f.loss.low_share == pytest.approx(0.8, abs=1e-3)  # 1 - 5 / (1.25 x 20)
    assert "latency" in f.hint


def test_memory_bound(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(30, 1.8, 18.0)])  # AI 0.1, 90 % of the bandwidth
    [f] = roofline.FACTOR.analyze(job_with(db, ["node[000-001]"]), parameters()["roofline"])
    assert f.evidence["verdict"] == "memory-bound"
    assert f.loss is not None and f.loss.high_share == pytest.approx(0.1, abs=1e-3)


def test_no_record_for_a_node_says_so(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(30, 80.0, 1.0)])
    [f] = roofline.FACTOR.analyze(job_with(db, ["node000"]), parameters()["roofline"])
    assert f.severity == "info" and f.loss is None
    assert f.evidence["hosts_without_record"] == ["node001"]
    assert "no probe record" in f.title and "hushmon probe" in f.hint
    assert f.evidence["median_intensity_flop_per_byte"] == 80.0
    # no ceilings file at all: the same, never a guess
    other = tmp_path / "other"
    other.mkdir()
    db2 = spool_job(other, [(30, 80.0, 1.0)])
    [g] = roofline.FACTOR.analyze(job_with(db2, None), parameters()["roofline"])
    assert g.severity == "info" and g.evidence["hosts_without_record"] == ["node000", "node001"]


def test_traffic_without_flops_has_no_loss_estimate(tmp_path: Path) -> None:
    # 18 GB/s and no floating-point work: memory-bound, but no gap to a roof
    db = spool_job(tmp_path, [(30, 0.0, 18.0)])
    [f] = roofline.FACTOR.analyze(job_with(db, ["node[000-001]"]), parameters()["roofline"])
    assert f.evidence["verdict"] == "memory-bound"
    assert f.loss is None and "no node-period did floating-point work" in f.loss_unknown


def test_host_wide_counters_are_used_and_named(tmp_path: Path) -> None:
    # an agent in node scope (the bed) tags the machine's counters scope=host
    db = spool_job(tmp_path, [(30, 1.8, 18.0)], tags=",scope=host")
    [f] = roofline.FACTOR.analyze(job_with(db, ["node[000-001]"]), parameters()["roofline"])
    assert f.evidence["verdict"] == "memory-bound"
    assert f.evidence["pmu_scope"].startswith("host-wide")


def test_skipped_without_memory_traffic(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(30, 80.0, 1.0)], with_bytes=False)
    with pytest.raises(AnalyzerSkip) as skip:
        roofline.FACTOR.analyze(job_with(db, ["node[000-001]"]), parameters()["roofline"])
    assert skip.value.reason == SkipReason.MISSING_SENSOR


def test_digest_has_the_finding_and_the_plot(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(40, 80.0, 1.0), (20, 1.5, 15.0)])
    save_ceilings(ceilings_path(db.parent), [ceilings(["node[000-001]"])])
    d = build_digest(db, "j", tmp_path / "report")
    [f] = [f for f in d.findings if f.factor == "roofline"]
    assert f.severity in ("medium", "high") and f.severity_rule.startswith("from the estimated")
    html = d.report_path.read_text()
    assert "<h2>Roofline</h2>" in html and "arithmetic intensity" in html
