"""Load imbalance across nodes (seed 001, section 2, third group).

Per node, the mean work rate over the job; the balance is mean / max (the
share of the busiest node's work the average node does). Nodes far from the
median are named. Work is FLOPS when the PMU gives them, else the job's own
user CPU time (its cgroup), else the node's (factors/work.py): a neighbour's
CPU time on a node is not the job's work (factors/neighbour.py prices it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, Loss, SkipReason, share_of_time
from hushmon.digest.factors.work import (
    CPU_TIME_SENSORS,
    JOB_USER_CPU,
    per_period_mean,
    work_matrix,
)
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE
from hushmon.digest.scope import in_node_scope, is_host_wide


class Imbalance:
    name = "imbalance"
    title = "Load imbalance across nodes"
    requires = ("cpu.user_pct",)
    optional = ("pmu.flops_per_s",)
    # what it needs (digest/resolution.py): each node's mean work rate
    resolution = PER_NODE

    def _per_node(self, job: JobData) -> tuple[str, np.ndarray]:
        work = work_matrix(job)
        assert work is not None
        name, m = work
        with np.errstate(all="ignore"):
            per_node = np.nanmean(m, axis=1)
        return name, per_node

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """1 - mean/max of per-node work."""
        if len(job.hosts) < 2:
            return 0.0
        _, per_node = self._per_node(job)
        mx = float(np.nanmax(per_node))
        return 1 - float(np.nanmean(per_node)) / mx if mx > 0 else None

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        if len(job.hosts) < 2:
            raise AnalyzerSkip(SkipReason.NOT_APPLICABLE, "one node: nothing to balance")
        name, per_node = self._per_node(job)
        ok = np.isfinite(per_node)
        if ok.sum() < 2:
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, f"{name} known on fewer than 2 nodes")
        mx, mean, med = (
            float(np.nanmax(per_node)),
            float(np.nanmean(per_node)),
            float(np.nanmedian(per_node)),
        )
        if mx <= 0:
            return []
        imbalance = 1 - mean / mx
        if imbalance < params["imbalance_medium"]:
            return []
        rel = np.abs(per_node - med) / med if med > 0 else np.zeros_like(per_node)
        outliers = [
            (job.hosts[i], float(per_node[i]))
            for i in np.flatnonzero(ok & (rel > params["outlier_rel"]))
        ]
        outliers.sort(key=lambda x: -abs(x[1] - med))
        i_max, i_min = int(np.nanargmax(per_node)), int(np.nanargmin(per_node))
        evidence: dict[str, Any] = {
            "work_sensor": name,
            "balance_mean_over_max": round(mean / mx, 3),
            "imbalance": round(imbalance, 3),
            "busiest_node": job.hosts[i_max],
            "busiest_value": round(mx, 4),
            "least_busy_node": job.hosts[i_min],
            "least_busy_value": round(float(per_node[i_min]), 4),
            "median_value": round(med, 4),
            "outlier_nodes": ", ".join(h for h, _ in outliers[:10]) or "none",
        }
        evidence["per_node"] = ", ".join(
            f"{h} {v:.3g}" for h, v in zip(job.hosts, per_node, strict=True) if np.isfinite(v)
        )
        inputs = job.derived_inputs.get(name, [name])
        evidence["measured_by"] = (
            f"{name} (the job's own cgroup on each node: its tasks only)"
            if name == JOB_USER_CPU
            else ", ".join(inputs)
            + (
                " (host-wide: every process on the machine)"
                if any(is_host_wide(s) for s in inputs)
                else " (the node's own cgroup)"
                if in_node_scope(job)
                else ""
            )
        )
        waiting = ""
        system = job.matrix("cpu.system_pct")
        if system is not None and name == "cpu.user_pct":
            with np.errstate(all="ignore"):
                sys_node = np.nanmean(system, axis=1)
            if np.isfinite(sys_node[i_min]) and np.isfinite(sys_node[i_max]):
                evidence["system_pct_least_vs_busiest"] = (
                    f"{job.hosts[i_min]} {sys_node[i_min]:.1f} vs {job.hosts[i_max]} "
                    f"{sys_node[i_max]:.1f}"
                )
                if sys_node[i_min] > 2 * sys_node[i_max] + 1:
                    waiting = (
                        f" The least busy node spends {sys_node[i_min]:.0f}% of its CPU in "
                        f"the kernel against {sys_node[i_max]:.0f}% on {job.hosts[i_max]}: "
                        "its ranks poll for messages that come late."
                    )
        severity = "high" if imbalance >= params["imbalance_high"] else "medium"
        hint = (
            f"The average node does {mean / mx:.0%} of the work of the busiest one "
            f"({job.hosts[i_max]}: {name} {mx:.3g} vs median {med:.3g}; least busy "
            f"{job.hosts[i_min]}: {float(per_node[i_min]):.3g}). "
            f"Outlying nodes: {evidence['outlier_nodes']}.{waiting} The others wait for the "
            "busiest at every synchronization, so adding nodes helps little; rebalance the "
            "decomposition (or check that node for a hardware or placement problem)."
        )
        finding = Finding(self.name, self.title, severity, evidence, hint)
        self._estimate(job, finding)
        return [finding]

    def _estimate(self, job: JobData, finding: Finding) -> None:
        """The run time an even spread of the work would save: in the periods the job
        works (across-node mean work at half its high quantile or more), every node waits
        for the busiest, so they would take mean / max of their time."""
        work = work_matrix(job)
        assert work is not None
        name, m = work
        per_period = per_period_mean(m)
        finite = np.isfinite(per_period)
        if finite.sum() < 3:
            finding.loss_unknown = "fewer than 3 periods with the work rate measured"
            return
        top = float(np.nanquantile(per_period, 0.9))
        working = finite & (per_period >= 0.5 * top)
        with np.errstate(all="ignore"):
            node_w = np.nanmean(m[:, working], axis=1)
        mx = float(np.nanmax(node_w)) if np.isfinite(node_w).any() else 0.0
        if mx <= 0:
            finding.loss_unknown = "no node did measurable work"
            return
        imb_w = 1 - float(np.nanmean(node_w)) / mx
        share = share_of_time(working)
        finding.evidence["work_periods_share"] = round(share, 3)
        finding.evidence["imbalance_in_work_periods"] = round(imb_w, 3)
        high = max(imb_w, float(finding.evidence["imbalance"]))
        if name in CPU_TIME_SENSORS:
            # a waiting rank that polls counts as working, which hides part of the
            # spread: the work may be as uneven as the least busy node's gap to the busiest
            high = max(high, 1 - float(np.nanmin(node_w)) / mx)
        finding.loss = Loss(
            share * imb_w,
            high,
            f"in the {int(working.sum())} work periods ({share:.0%} of the run) the average "
            f"node does {1 - imb_w:.0%} of the busiest node's work ({name})",
            [
                "the same total work spread evenly over the nodes",
                "the others wait for the busiest node in the work periods (low end) or "
                "throughout the run (high end)",
                f"{name} measures the work"
                + (
                    " (a waiting rank that polls counts as working, so the imbalance may be larger)"
                    if name in CPU_TIME_SENSORS
                    else ""
                ),
            ],
        )


FACTOR = Imbalance()
