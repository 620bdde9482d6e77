"""The GPU factors (gpu_idle, gpu_memory, gpu_throttle, gpu_transfer) and
the GPU sensors of the digest, on synthetic GPU jobs whose answer is known
(tests/python/gpujob.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gpujob import CAPACITY, GpuScenario, gpu_store
from hushmon.digest.build import build_digest
from hushmon.digest.factors import (
    gpu_idle,
    gpu_memory,
    gpu_throttle,
    gpu_transfer,
    parameters,
    run_factors,
)
from hushmon.digest.factors.base import SkipReason
from hushmon.digest.jobdata import JobData, load_job

GPU_FACTORS = ("gpu_idle", "gpu_memory", "gpu_throttle", "gpu_transfer")


@pytest.fixture(scope="module")
def troubled(tmp_path_factory: pytest.TempPathFactory) -> JobData:
    sc = GpuScenario(
        idle=[(1, 2), (1, 3)],
        mem_full={(0, 0): (20, 60)},
        power_capped={(1, 0): (10, 60), (1, 1): (10, 60)},
        transfer_bound={(0, 1): (30, 60)},
    )
    return load_job(gpu_store(sc, tmp_path_factory.mktemp("gpu")), "g1")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> JobData:
    return load_job(gpu_store(GpuScenario(), tmp_path_factory.mktemp("clean")), "g1")


def test_gpu_sensors_across_nodes(troubled: JobData) -> None:
    # 8 GPUs on 2 nodes; node001 has two idle GPUs: its mean SM is half of node000's.
    sm = troubled.matrix("gpu.sm_pct")
    assert sm is not None and sm.shape == (2, 60)
    assert np.nanmean(sm[1, :10]) == pytest.approx(np.nanmean(sm[0, :10]) / 2, rel=0.02)
    assert np.nanmax(troubled.matrix("gpu.min_sm_pct")[1]) == 0  # type: ignore[index]
    stats = troubled.stats["gpu.mem_used_pct"]
    assert stats.max[25] == 97 and stats.min[25] == 50 and stats.avg[5] == 50
    used = troubled.matrix("gpu.pcie_used_pct")
    assert used is not None and used[0, 40] == pytest.approx(85.0)
    assert troubled.has("gpu.power_w") and troubled.has("gpu.pcie_bytes_per_s")


def test_idle_gpus_are_named(troubled: JobData) -> None:
    (f,) = gpu_idle.FACTOR.analyze(troubled, parameters()["gpu_idle"])
    assert f.evidence["gpus"] == 8
    assert f.evidence["mostly_idle_gpus"] == "node001/gpu2, node001/gpu3"
    assert f.evidence["idle_share_of_gpu_time"] == pytest.approx(2 / 8, abs=0.01)
    assert f.severity == "low"
    assert "one process per GPU" in f.hint and "node001/gpu2" in f.hint


def test_memory_near_full(troubled: JobData) -> None:
    (f,) = gpu_memory.FACTOR.analyze(troubled, parameters()["gpu_memory"])
    assert f.evidence["near_full_gpus"] == "node000/gpu0"
    assert f.evidence["peak_mem_used_pct"] == 97
    assert f.evidence["share_of_time_near_full"] == pytest.approx(40 / 60, abs=0.02)
    assert f.evidence["gpu_mem_gib"] == 80
    assert f.span_s == (20.0, 60.0)
    assert "97.0% of 80.0 GiB" in f.hint
    assert gpu_memory.FACTOR.metric(troubled, parameters()["gpu_memory"]) == pytest.approx(0.97)


def test_power_throttling(troubled: JobData) -> None:
    (f,) = gpu_throttle.FACTOR.analyze(troubled, parameters()["gpu_throttle"])
    # busy GPU-periods: 6 busy GPUs x 60 s minus node000/gpu1's 30 transfer-bound s (SM 20)
    busy = 6 * 60 - 30
    assert f.evidence["busy_gpu_periods"] == busy
    assert f.evidence["power_share"] == pytest.approx(2 * 50 / busy, abs=0.005)
    assert f.evidence["thermal_share"] == 0
    assert f.evidence["sm_clock_mhz_throttled"] == 1400
    assert f.evidence["sm_clock_mhz_unthrottled"] == 1980
    assert f.evidence["throttled_gpus"] == "node001/gpu0, node001/gpu1"
    assert f.severity == "medium" and "power limit" in f.hint


def test_thermal_throttling_is_told_apart(tmp_path: Path) -> None:
    sc = GpuScenario(nodes=1, gpus=2, hot={(0, 0): (0, 60), (0, 1): (0, 60)})
    job = load_job(gpu_store(sc, tmp_path), "g1")
    (f,) = gpu_throttle.FACTOR.analyze(job, parameters()["gpu_throttle"])
    assert f.evidence["thermal_share"] == 1 and f.evidence["max_temp_c"] == 88
    assert f.severity == "high" and "cooling" in f.hint


def test_transfer_bound(troubled: JobData) -> None:
    (f,) = gpu_transfer.FACTOR.analyze(troubled, parameters()["gpu_transfer"])
    assert f.evidence["gpus_near_capacity"] == "node000/gpu1"
    assert f.evidence["share_of_time_near_capacity"] == pytest.approx(30 / 60, abs=0.02)
    assert f.evidence["peak_used_pct"] == pytest.approx(85.0)
    assert f.evidence["link_capacity_gb_per_s"] == pytest.approx(CAPACITY / 1e9, abs=0.1)
    assert f.evidence["main_direction"] == "host to device"
    assert f.evidence["avg_sm_pct_while_near_capacity"] == 20
    assert "wait for their data" in f.hint and f.severity == "high"
    assert f.span_s == (30.0, 60.0)


def test_clean_gpu_job_has_no_gpu_findings(clean: JobData) -> None:
    result = run_factors(clean)
    assert not [f for f in result.findings if f.factor in GPU_FACTORS]
    assert not [s for s in result.skipped if s.factor in GPU_FACTORS]
    m = gpu_idle.FACTOR.metric(clean, parameters()["gpu_idle"])
    assert m == 0.0


def test_job_without_gpus_skips_gpu_factors(tmp_path: Path) -> None:
    from hushmon.store.synthetic import Scenario, synthetic_store

    job = load_job(synthetic_store(Scenario(nodes=2, seconds=20, job="j"), tmp_path), "j")
    skipped = {s.factor: s.reason for s in run_factors(job).skipped}
    for name in GPU_FACTORS:
        assert skipped[name] is SkipReason.MISSING_SENSOR


def test_digest_report_has_gpu_plots(troubled: JobData, tmp_path: Path) -> None:
    db = gpu_store(
        GpuScenario(idle=[(1, 2), (1, 3)], mem_full={(0, 0): (20, 60)}), tmp_path / "store"
    )
    digest = build_digest(db, "g1", tmp_path / "out")
    html = (tmp_path / "out" / "report.html").read_text()
    assert "gpu.sm_pct per node and period" in html
    assert "gpu.mem_used_pct per node and period" in html
    data = json.loads((tmp_path / "out" / "digest.json").read_text())
    names = {s["name"] if isinstance(s, dict) else s for s in data["sensors"]}
    assert "gpu.sm_pct" in names
    assert {f.factor for f in digest.findings} >= {"gpu_idle", "gpu_memory"}
