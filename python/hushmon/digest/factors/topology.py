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
others (:func:`costs.crossed_bounds`): at most everything its nodes sent (less
what its uplink cannot have carried), and at least what no other job node of
the rack can have received (all of it, for a rack where the job has one
node). The finding says which: measured when the bounds meet, a range when
they do not, and it names no communication pattern the data does not show.
Where the nodes counted the bytes they received from each rack (``net_rack``
lines: the test bed's route realms) the share is measured instead
(:mod:`rack_traffic`). Its cost is the uplink's periods near capacity at the
node links' rate, for the share that crossed (a range from the bounds, or the
measured share), and its severity follows
from that cost (``[loss]`` in parameters.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors import costs, rack_traffic
from hushmon.digest.factors.base import AnalyzerSkip, Finding, Loss, SkipReason, mb, spans_text
from hushmon.digest.factors.links import (
    LinkStats,
    link_params,
    link_stats,
    node_links,
    traffic,
    uplinks,
)
from hushmon.digest.factors.params import load_parameters
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
        tx = traffic(job, "tx")
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
            f"sent over the network, spread across nodes CV {cv:.0%}): the job's partners "
            "sit on other nodes for that share. Placing ranks that exchange most on the "
            "same node (e.g. --map-by core / block distribution) keeps that traffic in "
            "memory. Where the racks are is not known, so whether it crosses a narrow uplink "
            "cannot be told (--topology FILE)."
        )
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                loss_unknown="the racks and the links' capacities are not known: the time the "
                "traffic leaving the nodes costs cannot be told",
            )
        ]

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
        crossed = {s.link.rack: costs.crossed_bounds(job, s) for s in stats}
        lo = min(c.low for c in crossed.values())
        measured = all(c.measured for c in crossed.values())
        if measured:  # counted per sending rack: the share itself, not bounds
            may_cross = max(c.high for c in crossed.values())
        evidence.update(
            {
                "share_that_may_cross_racks": round(may_cross, 3),
                "share_that_stayed_in_racks_at_least": round(1 - may_cross, 3),
                "share_that_crossed_racks_at_least": round(lo, 3),
                "uplink_capacity_MB_per_s": mb(worst.link.capacity or 0.0),
                "uplink_capacity_source": worst.link.source,
                "rack_send_ceiling_MB_per_s": mb(worst.ceiling),
                "rack_send_share_of_uplink": round(util, 3),
                "per_rack": "; ".join(
                    f"{s.link.rack}: sends {mb(s.ceiling)} MB/s = {s.utilization or 0.0:.0%} "
                    f"of its uplink; crossed {crossed[s.link.rack].low:.0%}-"
                    f"{crossed[s.link.rack].high:.0%} (busiest periods)"
                    for s in stats
                ),
                "partners": (
                    "measured: the bytes each job node received from each rack"
                    if measured
                    else "not measured: the node counters give bounds only"
                ),
            }
        )
        cap = mb(worst.link.capacity or 0.0)
        known = lo >= may_cross - 0.02
        if measured:
            what = (
                f"{lo:.0%}-{may_cross:.0%} of it crossed between racks"
                if lo < may_cross - 0.005
                else f"{lo:.0%} of it crossed between racks"
            ) + " (measured: the nodes counted the bytes they received from each rack)"
        elif known:
            what = (
                f"All of it crossed ({crossed[worst.link.rack].how})"
                if lo >= 0.98
                else f"{lo:.0%}-{may_cross:.0%} of it crossed"
            )
        else:
            what = (
                f"How much of it crossed between racks the counters cannot tell: at least "
                f"{lo:.0%}, at most {may_cross:.0%}"
                + (
                    f" (they sent more than the uplinks can carry: at least {1 - may_cross:.0%} "
                    "stayed inside them)"
                    if util > lp["over_capacity"]
                    else " (the job's nodes in each rack received as much as they sent, so "
                    "every byte may have stayed inside or crossed)"
                )
            )
        hint = (
            f"The racks send up to {mb(worst.ceiling):g} MB/s ({util:.0%} of their "
            f"{cap:g} MB/s uplinks) in their message periods. {what}."
        )
        if may_cross >= params["may_cross_high"]:
            severity = (
                "high"
                if pressure >= params["uplink_pressure_high"]
                else "medium"
                if pressure >= params["uplink_pressure_medium"]
                else "low"
            )
        else:
            severity = "low"
        finding = Finding(self.name, self.title, severity, evidence, hint)
        self._estimate(job, worst, crossed[worst.link.rack], lo, may_cross, finding)
        if finding.loss is not None and finding.loss.high_share >= 0.05:
            finding.hint += (
                " Keep the job in one rack (sbatch --switches=1) or place the ranks that "
                "exchange most in the same rack."
            )
        elif pressure < params["uplink_pressure_medium"]:
            finding.hint += " The uplinks still have room, so this placement costs little now."
        return finding

    def _estimate(
        self,
        job: JobData,
        worst: LinkStats,
        crossed: costs.Crossed,
        lo: float,
        hi: float,
        finding: Finding,
    ) -> None:
        """The run time a placement in one rack would save: the uplink's periods at the
        node links' rate, for the share of the bytes that crossed (bounds)."""
        params = load_parameters()
        rule = params["loss"]
        caps = {
            link.nodes[0]: link.capacity for link in node_links(job, params["network_bandwidth"])
        }
        nxt = costs.next_limit(job, worst, caps, rule)
        if nxt is None:
            finding.loss_unknown = "the nodes' own link capacities are not known"
            return
        eff = float(rule["next_link_efficiency_low"])
        if crossed.measured and self._measured_estimate(job, worst, nxt, eff, lo, hi, finding):
            return
        saving = costs.transfer_saving(job, worst, nxt[0], nxt[1], rule)
        low = min(lo, crossed.low) * saving.low_share
        high = max(hi, crossed.high) * saving.high_share
        basis = (
            f"with every rank in one rack, the {saving.periods_low} periods rack "
            f"{worst.link.rack}'s uplink ran near its capacity would move the bytes that "
            f"crossed ({lo:.0%}-{hi:.0%} of them) at {nxt[1]}"
        )
        assumptions = [
            "the job waits for these transfers (they do not overlap its computation)",
            f"in one rack the bytes move at {eff:.0%} (low end) to 100% (high end) of the "
            "node links' capacity",
        ]
        if lo < hi - 0.02:
            assumptions.append(
                f"the share that crossed lies between the counters' bounds ({lo:.0%} and "
                f"{hi:.0%}); which rank sent to which is not measured (per-destination byte "
                "counts would narrow it)"
            )
        finding.loss = Loss(low, high, basis, assumptions)

    @staticmethod
    def _measured_estimate(
        job: JobData,
        worst: LinkStats,
        nxt: tuple[float, str],
        eff: float,
        lo: float,
        hi: float,
        finding: Finding,
    ) -> bool:
        """With the bytes that crossed counted per period (rack_traffic.py), the uplink's
        own load is known: where it ran near its capacity the rack's exchange waited on
        it, and in one rack all the rack's bytes (not only the share that crossed) would
        move at the next limit. False when the counts do not cover the uplink's rack."""
        link = worst.link
        crossing = rack_traffic.crossing_load(job, link.rack, list(link.nodes))
        if crossing is None or not link.capacity:
            return False
        near_share = float(link_params()["near_capacity"])
        near = worst.message & (np.nan_to_num(crossing) >= near_share * link.capacity)
        sent = np.nan_to_num(link.load)  # the rack's job nodes' bytes sent, all of them
        n = max(1, len(worst.message))
        # low end: only the bytes that crossed were held up (the rest moved beside
        # them), so only their share of the period is saved; high end: the whole
        # exchange waited for them
        low = lo * float(np.clip(1.0 - sent[near] / (eff * nxt[0]), 0.0, 1.0).sum()) / n
        rule = load_parameters()["loss"]
        crossed_load = np.nan_to_num(crossing)[worst.message]
        high = (
            float(
                costs.waiting_share(
                    crossed_load, link.capacity, nxt[0], rule, sent=sent[worst.message]
                ).sum()
            )
            / n
        )
        finding.evidence["uplink_near_capacity_periods_measured"] = int(near.sum())
        basis = (
            f"the bytes that crossed rack {link.rack}'s uplink (counted: {lo:.0%}-{hi:.0%} of "
            f"the racks' traffic) ran it at {near_share:.0%}+ of its capacity in "
            f"{int(near.sum())} periods; with every rank in one rack the bytes that crossed "
            f"in those periods (low end) or all the rack's bytes of its "
            f"{int(worst.message.sum())} message periods (high end) would move at {nxt[1]}"
        )
        assumptions = [
            f"in a period where the uplink is full, the share that crossed ({lo:.0%}) was "
            "held up and the rest moved beside it (low end), or the whole exchange waited "
            "for the bytes crossing (high end: an all-to-all or a halo exchange finishes "
            "with its slowest part)",
            f"in one rack the bytes move at {eff:.0%} (low end) to 100% (high end) of the "
            "node links' capacity",
            "the shares that crossed are the ones counted (bytes each job node received "
            "from each rack)",
        ]
        finding.loss = Loss(low, high, basis, assumptions)
        return True


FACTOR = Topology()
