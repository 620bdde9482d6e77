"""Scalability factors: one analyzer per file, registered in ``FACTORS``.

Adding a factor = a new file defining ``FACTOR`` (see ``base.Factor``), its
thresholds as a section of ``parameters.toml``, and one line below.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from hushmon.digest.factors import (
    app_timeline,
    decomposition,
    disk_swap,
    gpu_idle,
    gpu_memory,
    gpu_throttle,
    gpu_transfer,
    idle_cpu,
    imbalance,
    network_bandwidth,
    topology,
)
from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Factor,
    FactorResult,
    Skipped,
    SkipReason,
)
from hushmon.digest.jobdata import JobData

FACTORS: tuple[Factor, ...] = (
    network_bandwidth.FACTOR,
    topology.FACTOR,
    disk_swap.FACTOR,
    imbalance.FACTOR,
    idle_cpu.FACTOR,
    decomposition.FACTOR,
    gpu_idle.FACTOR,
    gpu_memory.FACTOR,
    gpu_throttle.FACTOR,
    gpu_transfer.FACTOR,
    app_timeline.FACTOR,
)

PARAMETERS_FILE = Path(__file__).with_name("parameters.toml")


@cache
def parameters() -> Mapping[str, Mapping[str, Any]]:
    with PARAMETERS_FILE.open("rb") as f:
        params = tomllib.load(f)
    missing = [f.name for f in FACTORS if f.name not in params]
    if missing:
        raise RuntimeError(f"{PARAMETERS_FILE} lacks sections for: {', '.join(missing)}")
    return params


def missing_sensors(factor: Factor, job: JobData) -> list[str]:
    return [s for s in factor.requires if not job.has(s)]


def run_factors(job: JobData) -> FactorResult:
    """Every factor on the job: findings, and typed reasons for the skipped ones."""
    result = FactorResult()
    params = parameters()
    for factor in FACTORS:
        missing = missing_sensors(factor, job)
        if missing:
            result.skipped.append(
                Skipped(factor.name, SkipReason.MISSING_SENSOR, f"needs {', '.join(missing)}")
            )
            continue
        try:
            result.findings.extend(factor.analyze(job, params[factor.name]))
        except AnalyzerSkip as skip:
            result.skipped.append(Skipped(factor.name, skip.reason, skip.detail))
    return result


def factor_metric(factor: Factor, job: JobData) -> float | None:
    """The factor's influence number for ``compare`` (None when it cannot say)."""
    if missing_sensors(factor, job):
        return None
    try:
        return factor.metric(job, parameters()[factor.name])
    except AnalyzerSkip:
        return None
