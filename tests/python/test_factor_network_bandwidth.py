"""Network bandwidth limit on synthetic jobs with known answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hushmon.digest.factors import network_bandwidth, parameters, run_factors
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import JobData, load_job
from hushmon.store.synthetic import Scenario, synthetic_store


def _job(tmp: Path, **kw: object) -> JobData:
    sc = Scenario(nodes=4, seconds=120, job="j", **kw)  # type: ignore[arg-type]
    return load_job(synthetic_store(sc, tmp), "j")


@pytest.fixture(scope="module")
def saturated(tmp_path_factory: pytest.TempPathFactory) -> JobData:
    return _job(tmp_path_factory.mktemp("sat"), network="saturated", ceiling_bytes_per_s=1.1e9)


def test_saturated_link_is_found_with_its_ceiling(saturated: JobData) -> None:
    findings = network_bandwidth.FACTOR.analyze(saturated, parameters()["network_bandwidth"])
    assert len(findings) == 1
    f = findings[0]
    assert f.severity == "high"
    assert f.evidence["ceiling_MB_per_s"] == pytest.approx(1100, rel=0.02)
    assert f.evidence["share_of_busy_time_at_ceiling"] > 0.9
    # the seed's Fig. 6: averages of transmit and receive move against each other
    assert f.evidence["corr_avg_tx_vs_avg_rx"] < -0.5
    assert f.evidence["cv_of_avg_tx_plus_rx"] < 0.02
    assert f"{f.evidence['ceiling_MB_per_s']:.0f} MB/s" in f.hint  # the hint quotes the numbers
    assert f.span_s == (0.0, 120.0)


def test_light_traffic_is_not_a_limit(tmp_path: Path) -> None:
    job = _job(tmp_path, network="light")
    assert network_bandwidth.FACTOR.analyze(job, parameters()["network_bandwidth"]) == []
    metric = network_bandwidth.FACTOR.metric(job, parameters()["network_bandwidth"])
    assert metric is not None and metric < 0.3


def test_management_traffic_only_is_not_a_limit(tmp_path: Path) -> None:
    # no InfiniBand traffic, a few kB/s on Ethernet: its "ceiling" is below the threshold
    job = _job(tmp_path, network="none")
    params = parameters()["network_bandwidth"]
    assert network_bandwidth.FACTOR.analyze(job, params) == []
    assert network_bandwidth.FACTOR.metric(job, params) == 0.0


def test_missing_network_sensors_skip_not_crash(tmp_path: Path) -> None:
    job = _job(tmp_path, omit=("net", "ib"))
    result = run_factors(job)
    skipped = {s.factor: s for s in result.skipped}
    assert skipped["network_bandwidth"].reason is SkipReason.MISSING_SENSOR
    assert "network.tx_bytes_per_s" in skipped["network_bandwidth"].detail
    assert skipped["topology"].reason is SkipReason.MISSING_SENSOR
