"""The "useful work" rate analyzers compare: FLOPS when the PMU gives them,
else the job's own user CPU time (its cgroup: the agent's ``cgroup`` source,
summed over the job's cgroups on each node), else the node's user CPU time.

Why the job's cgroup before the node's: the node's CPU time counts every
process on the node, so a neighbour (another job, a daemon, a CPU hog)
would count as the job's work and make its node look like the busiest one
(a false load imbalance). The job's cgroup is used only when every node of
the job has it, so nodes are never compared on different measures.
Busy-polling MPI waits count as user time in both, so CPU time is the weaker
signal, and the evidence says which one was used."""

from __future__ import annotations

import numpy as np

from hushmon.digest.jobdata import JobData

# The job's own CPU time per node (factors/work.py job_cpu), named like a sensor.
JOB_USER_CPU = "cgroup.cpu_user_pct"
JOB_CPU = "cgroup.cpu_usage_pct"
WORK_SENSORS = ("pmu.flops_per_s", JOB_USER_CPU, "cpu.user_pct")
# Work measured as CPU time: a rank that polls while it waits counts as working.
CPU_TIME_SENSORS = (JOB_USER_CPU, "cpu.user_pct")


def _tags(sensor: str) -> dict[str, str]:
    if "[" not in sensor:
        return {}
    inner = sensor[sensor.index("[") + 1 : sensor.rindex("]")]
    return dict(p.split("=", 1) for p in inner.split(",") if "=" in p)


def job_cpu_sensors(job: JobData, field: str) -> list[str]:
    """The job's cgroup series of ``field`` (``cgroup.cpu_usage_pct``...): those tagged
    with this job, or untagged (a store holding one job)."""
    return [s for s in job.base_sensors(field) if _tags(s).get("job") in (None, job.job)]


def job_cpu(job: JobData, field: str = JOB_USER_CPU) -> np.ndarray | None:
    """Per node and period, the job's own CPU time (% of the node's CPUs, as the
    node's ``cpu`` lines), summed over its cgroups on the node; None unless every
    node of the job has it."""
    mats = [m for m in (job.matrix(s) for s in job_cpu_sensors(job, field)) if m is not None]
    if not mats:
        return None
    stacked = np.stack(mats)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    if not np.isfinite(out).any(axis=1).all():
        return None
    return out


def per_period_mean(m: np.ndarray) -> np.ndarray:
    """The mean over nodes per period, NaN where no node has a value (the job's cgroup
    has none in its first period: a rate needs two readings), without numpy's
    empty-slice warning."""
    finite = np.isfinite(m)
    n = finite.sum(axis=0)
    total = np.where(finite, m, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def work_matrix(job: JobData) -> tuple[str, np.ndarray] | None:
    for name in WORK_SENSORS:
        m = job_cpu(job) if name == JOB_USER_CPU else job.matrix(name)
        if m is not None and np.isfinite(m).any():
            if name == JOB_USER_CPU and not job.has(name):
                # the report's plots and the evidence read a work sensor's statistics
                job.add_stats(name, m)
                job.derived_inputs[name] = job_cpu_sensors(job, name)
            return name, m
    return None
