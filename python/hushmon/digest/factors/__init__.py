"""Scalability factors: one analyzer per file, registered in ``FACTORS``.

Adding a factor = a new file defining ``FACTOR`` (see ``base.Factor``), its
thresholds as a section of ``parameters.toml``, and one line below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hushmon.digest.factors import (
    app_timeline,
    decomposition,
    disk_swap,
    energy,
    gpu_idle,
    gpu_memory,
    gpu_throttle,
    gpu_transfer,
    idle_cpu,
    imbalance,
    io_bound,
    neighbour,
    network_bandwidth,
    power_cap,
    roofline,
    topology,
)
from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Factor,
    FactorResult,
    Finding,
    Skipped,
    SkipReason,
    severity_from_loss,
)
from hushmon.digest.factors.params import PARAMETERS_FILE, load_parameters
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE, RAW

FACTORS: tuple[Factor, ...] = (
    network_bandwidth.FACTOR,
    topology.FACTOR,
    disk_swap.FACTOR,
    io_bound.FACTOR,
    imbalance.FACTOR,
    idle_cpu.FACTOR,
    neighbour.FACTOR,
    decomposition.FACTOR,
    gpu_idle.FACTOR,
    gpu_memory.FACTOR,
    gpu_throttle.FACTOR,
    gpu_transfer.FACTOR,
    app_timeline.FACTOR,
    energy.FACTOR,
    power_cap.FACTOR,
    roofline.FACTOR,
)


def parameters() -> Mapping[str, Mapping[str, Any]]:
    """parameters.toml, checked to hold a section for every registered factor."""
    params = load_parameters()
    missing = [f.name for f in FACTORS if f.name not in params]
    if missing:
        raise RuntimeError(f"{PARAMETERS_FILE} lacks sections for: {', '.join(missing)}")
    return params


def missing_sensors(factor: Factor, job: JobData) -> list[str]:
    return [s for s in factor.requires if not job.has(s)]


def _data_used(factor: Factor, job: JobData) -> dict[str, str]:
    """What the factor needs and what this job's data gave it."""
    res = job.resolution
    source = RAW if res is None else res.source
    needs = (
        "each node's values over time"
        if factor.resolution == PER_NODE
        else "min / average / max over nodes per period"
    )
    if source == RAW:
        had = "every period of every node (raw data)"
    elif res is not None and res.per_node:
        had = res.note()
    else:
        had = "the summaries only" + ("" if factor.resolution != PER_NODE else ": not enough")
    return {"resolution": factor.resolution, "needs": needs, "had": had, "source": source}


def run_factors(job: JobData) -> FactorResult:
    """Every factor on the job: findings, and typed reasons for the skipped ones.

    A factor that needs each node's values is skipped on a job read from the
    summaries alone; a finding computed on bins says so in its evidence."""
    result = FactorResult()
    params = parameters()
    res = job.resolution
    for factor in FACTORS:
        result.data_used[factor.name] = _data_used(factor, job)
        missing = missing_sensors(factor, job)
        if missing:
            result.skipped.append(
                Skipped(factor.name, SkipReason.MISSING_SENSOR, f"needs {', '.join(missing)}")
            )
            continue
        if res is not None and not res.per_node and factor.resolution == PER_NODE:
            result.skipped.append(
                Skipped(
                    factor.name,
                    SkipReason.NOT_APPLICABLE,
                    "needs each node's values over time; the summaries hold only min / "
                    "average / max over nodes (digest the raw store for it)",
                )
            )
            continue
        try:
            found = factor.analyze(job, params[factor.name])
        except AnalyzerSkip as skip:
            result.skipped.append(Skipped(factor.name, skip.reason, skip.detail))
            continue
        note = "" if res is None else res.note()
        for f in found:
            if note:
                f.evidence["resolution"] = note
            apply_loss_rule(f, params["loss"])
        result.findings.extend(found)
    return result


def apply_loss_rule(f: Finding, rule: Mapping[str, Any]) -> None:
    """Severity from the estimated loss ([loss] in parameters.toml), the same for
    every factor; an info finding (the factor does not limit the job) stays info,
    and a finding without an estimate keeps its factor's own rule, saying so."""
    if f.severity == "info":
        f.severity_rule = "info: the factor does not limit this job"
        return
    if f.loss is None:
        why = f.loss_unknown or "the factor gives no estimate"
        f.loss_unknown = why
        f.severity_rule = f"the factor's own threshold (no loss estimate: {why})"
        return
    f.severity = severity_from_loss(f.loss, rule)
    f.severity_rule = (
        f"from the estimated loss {f.loss.range_text()} of the run time (middle "
        f"{f.loss.mid_share:.0%}): high from {rule['high_share']:.0%} with the low end at "
        f"{rule['high_min_low_share']:.0%}+, medium from {rule['medium_share']:.0%}"
    )


def factor_metric(factor: Factor, job: JobData) -> float | None:
    """The factor's influence number for ``compare`` (None when it cannot say)."""
    if missing_sensors(factor, job):
        return None
    try:
        return factor.metric(job, parameters()[factor.name])
    except AnalyzerSkip:
        return None
