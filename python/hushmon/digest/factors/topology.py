"""Communication topology: where a job's partners sit (seed 001, Figs. 2-3).

The seed's butterfly and snake send the same messages, yet butterfly's
network rate is four times snake's: butterfly's partners sit on other nodes,
snake's mostly on the same node. Monitoring sees that as bytes on the
network interfaces versus bytes that never leave the node (loopback counts
as staying inside; shared-memory transfers are invisible to the OS, so a job
with no network traffic on several nodes communicates inside nodes only).

On a tree network the next question is which traffic crosses between racks.
With Slurm's topology.conf (:mod:`hushmon.digest.fabric`) the racks of the
job's nodes are known, and node counters bound what each rack sent to the
others: at most everything its nodes sent, and when that is more than the
rack's uplink can carry, at least the excess stayed in the rack. The
finding's severity follows the pressure on the uplinks: partners that may
all sit in other racks behind a nearly full uplink (butterfly across racks)
are a high finding; a job of which a good part provably stayed inside the
racks (snake, whose neighbours share a rack) is a low one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason, mb, spans_text
from hushmon.digest.factors.links import LinkStats, link_params, link_stats, uplinks
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import PER_NODE


class Topology:
    name = "topology"
    title = "Communication topology (where the partners sit)"
    requires = ("network.tx_bytes_per_s",)
    optional = ("loopback.tx_bytes_per_s",)
    # what it needs (digest/resolution.py): which node sent what
    resolution = PER_NODE

    def _rates(self, job: JobData) -> tuple[np.ndarray, float]:
        tx = job.matrix("network.tx_bytes_per_s")
        assert tx is not None
        with np.errstate(all="ignore"):
            per_node = np.nanmean(tx, axis=1)
        lo = job.matrix("loopback.tx_bytes_per_s")
        inside = float(np.nanmean(lo)) if lo is not None and np.isfinite(lo).any() else 0.0
        return per_node, inside

    def _uplinks(self, job: JobData) -> list[LinkStats]:
        stats = [link_stats(link) for link in uplinks(job)]
        return [s for s in stats if s is not None and s.utilization is not None]

    @staticmethod
    def _may_cross(stats: list[LinkStats]) -> float:
        """Upper bound of the share of the racks' traffic that crossed an uplink in their
        busiest message periods (the rack that keeps least inside sets it)."""
        return 1.0 - min(s.stayed_share for s in stats)

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of the traffic that may cross between racks (an upper bound), when the
        racks are known; share leaving the node otherwise; 0 on one node or one rack."""
        if len(job.hosts) < 2:
            return 0.0
        fabric = job.fabric
        if fabric is not None and len(fabric.racks(job.hosts)) == 1:
            return 0.0
        stats = self._uplinks(job)
        if stats:
            return round(self._may_cross(stats), 4)
        per_node, inside = self._rates(job)
        external = float(np.nanmean(per_node))
        if external < params["min_traffic_bytes_per_s"]:
            return 0.0
        return external / (external + inside) if external + inside > 0 else 0.0

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        if len(job.hosts) < 2:
            return self._one_node(job, params)
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
        evidence: dict[str, Any] = {
            "external_MB_per_s_per_node": mb(external),
            "loopback_MB_per_s_per_node": mb(inside),
            "share_leaving_node": round(share, 3),
            "node_spread_cv": round(cv, 3),
            "busiest_node": busiest,
            "busiest_node_MB_per_s": mb(float(np.nanmax(per_node))),
        }
        fabric = job.fabric
        if fabric is not None:
            racks = fabric.racks(job.hosts)
            evidence["racks"] = "; ".join(f"{r}: {', '.join(h)}" for r, h in sorted(racks.items()))
            if len(racks) == 1:
                (rack,) = racks
                return [
                    Finding(
                        self.name,
                        self.title,
                        "info",
                        evidence,
                        f"All {len(job.hosts)} nodes sit under switch {rack} "
                        f"({fabric.source}): {share:.0%} of the traffic leaves the nodes "
                        f"({mb(external)} MB/s per node), but none of it has to cross an "
                        "uplink between racks.",
                    )
                ]
            stats = self._uplinks(job)
            if stats:
                return [self._across_racks(job, params, evidence, stats)]
        else:
            evidence["racks"] = (
                job.fabric_info.describe() if job.fabric_info is not None else "not looked up"
            )
        severity = "medium" if share >= params["external_share_medium"] else "low"
        hint = (
            f"{share:.0%} of the traffic leaves the node ({mb(external)} MB/s per node "
            f"sent over the network, spread across nodes CV {cv:.0%}). Partners on other "
            "nodes (butterfly-like) load the network; placing ranks that exchange most on "
            "the same node (snake-like, e.g. --map-by core / block distribution) keeps "
            "that traffic in memory. Where the racks are is not known, so whether it "
            "crosses a narrow uplink cannot be told (--topology FILE)."
        )
        return [Finding(self.name, self.title, severity, evidence, hint)]

    def _one_node(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        """One node: its ranks' messages over loopback (TCP) are all one can see."""
        lo = job.matrix("loopback.tx_bytes_per_s")
        if lo is None or not np.isfinite(lo).any():
            raise AnalyzerSkip(
                SkipReason.NOT_APPLICABLE,
                "the job ran on one node: all its communication stayed inside the node",
            )
        row = lo[0]
        busy = np.nan_to_num(row) >= params["min_traffic_bytes_per_s"]
        if busy.sum() < 2:
            raise AnalyzerSkip(
                SkipReason.NOT_APPLICABLE,
                "the job ran on one node and sent nothing over loopback: its communication "
                "(if any) went through shared memory, which no sensor sees",
            )
        peak = float(np.nanquantile(row[busy], 0.9))
        evidence = {
            "nodes": 1,
            "loopback_MB_per_s_peak": mb(peak),
            "loopback_MB_per_s_while_sending": mb(float(np.nanmean(row[busy]))),
            "share_of_time_sending": round(float(busy.mean()), 3),
            "periods": spans_text(job, busy),
            "network_MB_per_s": mb(float(np.nanmean(self._rates(job)[0]))),
        }
        hint = (
            f"The job ran on one node ({job.hosts[0]}): its ranks exchanged up to "
            f"{mb(peak):g} MB/s over the loopback interface (TCP inside the node) in "
            f"{busy.mean():.0%} of its time ({evidence['periods']}), and nothing of it left "
            "the node. Where partners sit only matters across nodes: run it on several "
            "(hushmon testbed up; srun -N 4 ...) to see the network and topology factors."
        )
        return [Finding(self.name, self.title, "info", evidence, hint)]

    def _across_racks(
        self,
        job: JobData,
        params: Mapping[str, Any],
        evidence: dict[str, Any],
        stats: list[LinkStats],
    ) -> Finding:
        may_cross = self._may_cross(stats)
        worst = max(stats, key=lambda s: s.utilization or 0.0)
        util = worst.utilization or 0.0
        pressure = min(1.0, util)
        lp = link_params()
        evidence.update(
            {
                "share_that_may_cross_racks": round(may_cross, 3),
                "share_that_stayed_in_racks_at_least": round(1 - may_cross, 3),
                "uplink_capacity_MB_per_s": mb(worst.link.capacity or 0.0),
                "uplink_capacity_source": worst.link.source,
                "rack_send_ceiling_MB_per_s": mb(worst.ceiling),
                "rack_send_share_of_uplink": round(util, 3),
                "per_rack": "; ".join(
                    f"{s.link.rack}: sends {mb(s.ceiling)} MB/s = {s.utilization or 0.0:.0%} "
                    f"of its uplink, at least {s.stayed_share:.0%} stayed in the rack "
                    "(busiest periods)"
                    for s in stats
                ),
            }
        )
        cap = mb(worst.link.capacity or 0.0)
        if may_cross >= params["may_cross_high"]:
            severity = (
                "high"
                if pressure >= params["uplink_pressure_high"]
                else "medium"
                if pressure >= params["uplink_pressure_medium"]
                else "low"
            )
            hint = (
                f"The racks send up to {mb(worst.ceiling):g} MB/s ({util:.0%} of their "
                f"{cap:g} MB/s uplinks), all of which may cross between racks: nothing in the "
                "counters shows traffic staying inside a rack, as when every rank's partner "
                "sits in another rack (butterfly-like). "
            )
            if severity == "high":
                hint += (
                    "The uplink is the narrow part of this job's path: keep the job in one "
                    "rack (sbatch --switches=1) or order the ranks so that partners share a "
                    "rack."
                )
            else:
                hint += "The uplinks still have room, so this placement costs little now."
        else:
            severity = "low"
            over = util > lp["over_capacity"]
            hint = (
                "In their busiest message periods at least "
                f"{1 - may_cross:.0%} of what the racks sent stayed inside them"
                + (
                    f": they sent up to {mb(worst.ceiling):g} MB/s, more than their "
                    f"{cap:g} MB/s uplinks can carry, so at most {may_cross:.0%} crossed"
                    if over
                    else ""
                )
                + ". Partners sit partly in the same rack (snake-like), so the uplinks "
                "carry less of this job's traffic than of a job whose partners are all in "
                "other racks."
            )
        return Finding(self.name, self.title, severity, evidence, hint)


FACTOR = Topology()
