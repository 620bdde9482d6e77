"""Decomposition limit (seed 001, Figs. 12-13): compares runs, not one job.

The seed's matrix multiplication: at 1024x1024 the average rate is above
420 MFLOPS, at 512x512 it stays under 270 -- too little work per process, so
organizing the computation costs as much as the computation. Given runs of
one program at several sizes (or process counts), we compare the work rate
per node: when it falls as the work per process shrinks, the decomposition
limit is reached. In a single job's digest this analyzer is skipped with
the reason ``needs_several_runs``; ``hushmon compare`` runs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import ACROSS_NODES


class Decomposition:
    name = "decomposition"
    title = "Decomposition limit"
    requires = ("cpu.user_pct",)
    optional = ("pmu.flops_per_s",)
    # what it needs (digest/resolution.py): the work rate per node averaged over nodes and time
    resolution = ACROSS_NODES

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Average work rate per node (FLOPS or user CPU %)."""
        work = work_matrix(job)
        if work is None:
            return None
        return float(np.nanmean(work[1]))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        raise AnalyzerSkip(
            SkipReason.NEEDS_SEVERAL_RUNS,
            "compare runs of the same program at different sizes: hushmon compare",
        )

    def analyze_runs(
        self,
        labels: Sequence[str],
        sizes: Sequence[float],
        rates: Sequence[float | None],
        work_sensor: str,
        params: Mapping[str, Any],
    ) -> list[Finding]:
        """Runs ordered by work per process, largest first."""
        pts = [
            (lab, s, r)
            for lab, s, r in zip(labels, sizes, rates, strict=True)
            if r is not None and np.isfinite(r)
        ]
        if len(pts) < 2:
            return []
        best = max(pts, key=lambda x: x[2])
        worst = min(pts, key=lambda x: x[2])
        drop = 1 - worst[2] / best[2] if best[2] > 0 else 0.0
        if drop < params["rate_drop_medium"]:
            return []
        severity = "high" if drop >= params["rate_drop_high"] else "medium"
        evidence = {
            "work_sensor": work_sensor,
            "best_run": best[0],
            "best_rate": round(best[2], 4),
            "worst_run": worst[0],
            "worst_rate": round(worst[2], 4),
            "rate_drop": round(drop, 3),
        }
        hint = (
            f"The work rate per node falls {drop:.0%} from run {best[0]} "
            f"({work_sensor} {best[2]:.3g}) to run {worst[0]} ({worst[2]:.3g}). When the "
            "work per process gets small, organizing the computation costs as much as "
            "the computation: use fewer processes for this size, or a larger problem."
        )
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                loss_unknown="compares runs of different sizes: the time a larger problem per "
                "process would save depends on the size chosen",
            )
        ]


FACTOR = Decomposition()
