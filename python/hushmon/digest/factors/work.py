"""The "useful work" rate analyzers compare: FLOPS when the PMU gives them,
otherwise user CPU time (busy-polling MPI waits count as user time, so it is
the weaker signal, and the evidence says which one was used)."""

from __future__ import annotations

import numpy as np

from hushmon.digest.jobdata import JobData

WORK_SENSORS = ("pmu.flops_per_s", "cpu.user_pct")


def work_matrix(job: JobData) -> tuple[str, np.ndarray] | None:
    for name in WORK_SENSORS:
        m = job.matrix(name)
        if m is not None and np.isfinite(m).any():
            return name, m
    return None
