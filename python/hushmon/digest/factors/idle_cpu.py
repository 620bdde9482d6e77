"""Idle or waiting CPUs: cores the job was given but did not use.

Idle time means fewer runnable threads than cores (blocking waits,
serial phases, under-subscription); iowait means waiting for storage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import Finding, longest_run, span_of
from hushmon.digest.jobdata import JobData


class IdleCpu:
    name = "idle_cpu"
    title = "Idle or waiting CPUs"
    requires = ("cpu.idle_pct",)
    optional = ("cpu.iowait_pct",)

    def _waiting(self, job: JobData) -> tuple[np.ndarray, np.ndarray]:
        idle = job.matrix("cpu.idle_pct")
        assert idle is not None
        iowait = job.matrix("cpu.iowait_pct")
        return idle, (np.zeros_like(idle) if iowait is None else np.nan_to_num(iowait))

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Job-average idle + iowait, % of the cores."""
        idle, iowait = self._waiting(job)
        return float(np.nanmean(idle + iowait))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        idle, iowait = self._waiting(job)
        waiting = idle + iowait
        avg = float(np.nanmean(waiting))
        if avg < params["idle_medium_pct"]:
            return []
        with np.errstate(all="ignore"):
            per_node = np.nanmean(waiting, axis=1)
            per_time = np.nanmean(waiting, axis=0)
        idle_nodes = [job.hosts[i] for i in np.flatnonzero(per_node >= params["node_idle_pct"])]
        evidence = {
            "idle_pct": round(float(np.nanmean(idle)), 1),
            "iowait_pct": round(float(np.nanmean(iowait)), 1),
            "nodes_mostly_idle": len(idle_nodes),
            "mostly_idle_nodes": ", ".join(idle_nodes[:10]) or "none",
            "share_of_time_over_threshold": round(
                float(np.mean(per_time >= params["idle_medium_pct"])), 3
            ),
        }
        severity = "high" if avg >= params["idle_high_pct"] else "medium"
        hint = (
            f"On average {avg:.0f}% of the job's CPU time is idle ({evidence['idle_pct']}%) "
            f"or waiting for I/O ({evidence['iowait_pct']}%); "
            f"{len(idle_nodes)} of {len(job.hosts)} node(s) are idle at least "
            f"{params['node_idle_pct']}% of the time. Run one process (or thread) per core, "
            "overlap communication with computation, or look for serial phases."
        )
        run = longest_run(per_time >= params["idle_medium_pct"])
        return [Finding(self.name, self.title, severity, evidence, hint, span_of(job, run))]


FACTOR = IdleCpu()
