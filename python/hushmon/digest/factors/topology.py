"""Communication topology: how much traffic leaves the node (seed 001, Figs. 2-3).

The seed's butterfly and snake send the same messages, yet butterfly's
network rate is four times snake's: butterfly's partners sit on other nodes,
snake's mostly on the same node. Monitoring sees the difference as bytes on
the network interfaces versus bytes that never leave the node. Per job we
report the share of traffic that crosses the network (loopback counts as
staying inside; shared-memory transfers are invisible to the OS, so a job
with no network traffic on several nodes communicates inside nodes only)
and how evenly nodes use the network; ``hushmon compare`` sets runs side by
side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, mb
from hushmon.digest.jobdata import JobData


class Topology:
    name = "topology"
    title = "Communication topology (traffic leaving the node)"
    requires = ("network.tx_bytes_per_s",)
    optional = ("loopback.tx_bytes_per_s",)

    def _rates(self, job: JobData) -> tuple[np.ndarray, float]:
        tx = job.matrix("network.tx_bytes_per_s")
        assert tx is not None
        with np.errstate(all="ignore"):
            per_node = np.nanmean(tx, axis=1)
        lo = job.matrix("loopback.tx_bytes_per_s")
        inside = float(np.nanmean(lo)) if lo is not None and np.isfinite(lo).any() else 0.0
        return per_node, inside

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Mean bytes per second each node sends off-node."""
        per_node, _ = self._rates(job)
        return float(np.nanmean(per_node))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        if len(job.hosts) < 2:
            raise AnalyzerSkip(
                SkipReason.NOT_APPLICABLE,
                "the job ran on one node: all its communication stayed inside the node",
            )
        per_node, inside = self._rates(job)
        external = float(np.nanmean(per_node))
        if external < params["min_traffic_bytes_per_s"]:
            return [
                Finding(
                    self.name,
                    self.title,
                    "info",
                    {"external_MB_per_s_per_node": mb(external), "nodes": len(job.hosts)},
                    f"The {len(job.hosts)} nodes send only {mb(external)} MB/s each over the "
                    "network: communication stays inside nodes (a snake-like placement) or "
                    "the job hardly communicates.",
                )
            ]
        share = external / (external + inside) if external + inside > 0 else 1.0
        with np.errstate(all="ignore"):
            cv = float(np.nanstd(per_node) / np.nanmean(per_node))
        busiest = job.hosts[int(np.nanargmax(per_node))]
        evidence = {
            "external_MB_per_s_per_node": mb(external),
            "loopback_MB_per_s_per_node": mb(inside),
            "share_leaving_node": round(share, 3),
            "node_spread_cv": round(cv, 3),
            "busiest_node": busiest,
            "busiest_node_MB_per_s": mb(float(np.nanmax(per_node))),
        }
        severity = "medium" if share >= params["external_share_medium"] else "low"
        hint = (
            f"{share:.0%} of the traffic leaves the node ({mb(external)} MB/s per node "
            f"sent over the network, spread across nodes CV {cv:.0%}). Partners on other "
            "nodes (butterfly-like) load the network; placing ranks that exchange most on "
            "the same node (snake-like, e.g. --map-by core / block distribution) keeps "
            "that traffic in memory."
        )
        return [Finding(self.name, self.title, severity, evidence, hint)]


FACTOR = Topology()
