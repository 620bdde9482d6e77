"""power_cap on synthetic jobs whose answer is known: the agent's ``rapl`` lines
with their power limits and ``thermal`` lines as the agent writes them.

Two nodes, 60 one-second periods. Node 0's package draws 104 W against an
enabled 105 W long-term limit (PL1; PL2 125 W) in periods 10-39 and 60 W
otherwise; node 1's draws 60 W throughout. So 30 of the 60 periods have a
node at its cap (0.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import factor_metric, parameters, power_cap, run_factors
from hushmon.digest.factors.base import AnalyzerSkip, SkipReason
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 60
HELD = range(10, 40)
PL1_W, PL2_W = 105.0, 125.0


def _job(
    tmp: Path,
    limits: str = "enabled",
    held_w: float = 104.0,
    clock: bool = False,
    thermal_pct: float | None = None,
    backend: str = "",
    node1_pl1_w: float = PL1_W,
) -> JobData:
    sc = Scenario(nodes=2, seconds=SECONDS, job="j", omit=("pmu",))
    spool = tmp / "spool"
    write_spool(sc, spool)
    tag = f",backend={backend}" if backend else ""
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = []
        for i in range(SECONDS):
            ts = START_NS + i * sc.period_ns
            held = node == 0 and i in HELD
            power_w = held_w if held else 60.0
            fields = f"energy_j={power_w},power_w={power_w}"
            if limits != "none":
                fields += (
                    f",long_term_limit_w={PL1_W if node == 0 else node1_pl1_w},"
                    "long_term_window_s=0.999,"
                    f"short_term_limit_w={PL2_W},short_term_window_s=0.00244,"
                    f"limits_enabled={1 if limits == 'enabled' else 0}i"
                )
            key = f"rapl,host={host}{tag},domain=package-0,zone=intel-rapl:0"
            lines.append(f"{key} {fields} {ts}\n")
            if clock:  # the clock 0.8 of nominal while held, 1.0 otherwise
                cycles = 2.0e9 * (0.8 if held else 1.0)
                lines.append(
                    f"pmu,host={host},cpu=total cycles_per_s={cycles},ref_cycles_per_s=2e9 {ts}\n"
                )
            if thermal_pct is not None:
                pct = thermal_pct if node == 1 and i < 30 else 0.0
                lines.append(
                    f"thermal,host={host},package=0 package_throttles_per_s={1 if pct else 0},"
                    f"package_throttled_pct={pct}"
                    + (
                        f",core_throttled_pct_max={2 * pct},cores_throttled=1i"
                        if i % 10 == 0
                        else ""
                    )
                    + f" {ts}\n"
                )
        (spool / f"{host}-{START_NS}-900.lp").write_text("".join(lines), encoding="ascii")
    db = tmp / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    return load_job(db, "j")


def _params() -> dict[str, float]:
    return dict(parameters()["power_cap"])


def test_power_at_the_cap_without_a_clock_is_bounded_by_pl2(tmp_path: Path) -> None:
    job = _job(tmp_path)
    [f] = power_cap.FACTOR.analyze(job, _params())
    ev = f.evidence
    assert ev["verdict"] == "throttled"
    assert ev["held_share_of_periods"] == 0.5
    assert ev["held_share_of_node_periods"] == 0.25
    assert ev["power_held_share"] == 0.5 and ev["thermal_held_share"] == 0.0
    assert ev["held_nodes"] == "node000"
    assert ev["long_term_limit_w"] == PL1_W and ev["short_term_limit_w"] == PL2_W
    assert ev["package_w_median_held"] == 104.0
    # at most 1 - (105/125)^(1/3) of the clock in half of the periods
    bound = 1 - (PL1_W / PL2_W) ** (1 / 3)
    assert f.loss is not None
    assert f.loss.low_share == 0.0
    assert f.loss.high_share == pytest.approx(0.5 * bound, rel=1e-6)
    assert "PL2" in f.loss.basis and f.loss.assumptions
    assert f.span_s == (10.0, 40.0)
    assert "105" in f.hint and "PL1" in f.hint


def test_the_held_node_s_limit_is_the_one_named(tmp_path: Path) -> None:
    """Nodes with different limits (a cap written on one): the evidence names the
    limit of the held node-periods, not a median over every node."""
    job = _job(tmp_path, node1_pl1_w=250.0)
    [f] = power_cap.FACTOR.analyze(job, _params())
    assert f.evidence["long_term_limit_w"] == PL1_W
    assert f.evidence["held_nodes"] == "node000"


def test_a_measured_clock_gives_the_loss(tmp_path: Path) -> None:
    job = _job(tmp_path, clock=True)
    [f] = power_cap.FACTOR.analyze(job, _params())
    assert f.evidence["clock_ratio_held"] == 0.8 and f.evidence["clock_ratio_unheld"] == 1.0
    assert f.loss is not None
    # node 0 lost 20 % of its clock in 30 of 60 periods; node 1 nothing
    assert f.loss.low_share == pytest.approx(0.2 * 30 / 120)
    assert f.loss.high_share == pytest.approx(0.2 * 30 / 60)
    assert "cycles" in f.loss.basis


def test_thermal_throttling_alone(tmp_path: Path) -> None:
    job = _job(tmp_path, limits="none", thermal_pct=20.0)
    [f] = power_cap.FACTOR.analyze(job, _params())
    ev = f.evidence
    assert ev["verdict"] == "throttled" and ev["limits"] == "not visible"
    assert ev["thermal_held_share"] == 0.5 and ev["power_held_share"] == 0.0
    assert ev["held_nodes"] == "node001" and ev["thermal_throttled_pct_max"] == 20.0
    assert ev["core_throttled_pct_max"] == 40.0  # the cores' (every 10 s): evidence only
    assert f.loss is not None
    assert f.loss.high_share == pytest.approx(0.2 * 30 / 60)  # the time throttled, at most
    assert "cooling" in f.hint


def test_far_from_the_limit_is_not_throttled(tmp_path: Path) -> None:
    job = _job(tmp_path, held_w=80.0, thermal_pct=0.0)
    [f] = power_cap.FACTOR.analyze(job, _params())
    assert f.severity == "info" and f.evidence["verdict"] == "not throttled"
    assert f.evidence["package_power_of_limit_max"] == round(80 / PL1_W, 3)
    assert f.loss is not None and f.loss.high_share == 0.0
    assert "not throttled" in f.title and "no thermal throttling time" in f.hint


def test_limits_not_enabled_hold_nothing(tmp_path: Path) -> None:
    job = _job(tmp_path, limits="disabled")
    [f] = power_cap.FACTOR.analyze(job, _params())
    assert f.evidence["verdict"] == "not throttled"
    assert f.evidence["limits"] == "present, not enabled"


def test_skipped_when_no_cap_can_be_seen(tmp_path: Path) -> None:
    job = _job(tmp_path, limits="none")
    with pytest.raises(AnalyzerSkip) as skip:
        power_cap.FACTOR.analyze(job, _params())
    assert skip.value.reason == SkipReason.MISSING_SENSOR and "AMD" in skip.value.detail
    assert factor_metric(power_cap.FACTOR, job) is None  # compare follows nothing


def test_in_the_digest_simulated_and_severity_from_the_loss(tmp_path: Path) -> None:
    job = _job(tmp_path, backend="sim", clock=True)
    found = [f for f in run_factors(job).findings if f.factor == "power_cap"]
    assert len(found) == 1
    f = found[0]
    assert "SIMULATED" in f.title and "simulated" in f.evidence["rapl"]
    assert f.loss is not None and f.severity_rule.startswith("from the estimated loss")
    assert power_cap.FACTOR.metric(job, _params()) == 0.5
