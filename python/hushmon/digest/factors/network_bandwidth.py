"""Network bandwidth limit (seed 001, Figs. 1-7).

Which link's capacity the job's messages ran into. Every link the job used
is measured against its capacity (:mod:`links`): each node's own link, and,
when Slurm's topology.conf says where the racks are and the job spans
several, each rack's uplink (whose traffic is bounded from above by what the
rack's nodes sent). In the periods a link carried messages, its load sits
near its capacity for much of the time: that link limits communication.

When no capacity is known anywhere, the seed's own signature is used: per
node, transmit + receive sits at a constant ceiling for much of the busy
time, the maximum across nodes is bounded above and the minimum below by
constants, and the across-node averages of transmit and receive move against
each other (their sum stays constant). With capacities known that signature
is kept as supporting evidence, and a plateau far below every known
capacity is reported as what it is: a limit somewhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors import costs
from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    Loss,
    SkipReason,
    longest_run,
    mb,
    span_of,
    spans_text,
)
from hushmon.digest.factors.congestion import congestion_evidence
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


def _seesaw(tx: np.ndarray, rx: np.ndarray) -> tuple[float, float]:
    """(corr of across-node average tx vs rx, CV of their sum) - the seed's Fig. 6."""
    with np.errstate(all="ignore"):
        avg_tx = np.nanmean(tx, axis=0)
        avg_rx = np.nanmean(rx, axis=0)
        ok = np.isfinite(avg_tx) & np.isfinite(avg_rx)
        corr = (
            float(np.corrcoef(avg_tx[ok], avg_rx[ok])[0, 1])
            if ok.sum() > 2 and np.std(avg_tx[ok]) > 0 and np.std(avg_rx[ok]) > 0
            else float("nan")
        )
        avg_sum = avg_tx[ok] + avg_rx[ok]
        cv = float(np.std(avg_sum) / np.mean(avg_sum)) if avg_sum.size else float("nan")
    return corr, cv


SOURCE_WORDS = {
    "configured": "the configured link rate",
    "topology": "from topology.conf",
    "driver": "as the driver reports it",
    "parameters": "from parameters.toml",
}


class NetworkBandwidth:
    name = "network_bandwidth"
    title = "Network bandwidth limit"
    requires = ("network.tx_bytes_per_s", "network.rx_bytes_per_s")
    optional = ("net.capacity_bits_per_s", "net.speed_bits_per_s")
    # what it needs (digest/resolution.py): each node's (and rack's) link over time
    resolution = PER_NODE

    def _totals(self, job: JobData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tx, rx = traffic(job, "tx"), traffic(job, "rx")
        assert tx is not None and rx is not None
        return tx, rx, tx + rx

    def _ceiling(self, total: np.ndarray, p: Mapping[str, Any]) -> tuple[float, np.ndarray]:
        busy = total[np.isfinite(total) & (total > 0)]
        if busy.size < 10:
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "fewer than 10 busy node-periods")
        ceiling = float(np.quantile(busy, p["ceiling_quantile"]))
        return ceiling, busy

    def _links(self, job: JobData, params: Mapping[str, Any]) -> list[LinkStats]:
        stats = [link_stats(link) for link in [*node_links(job, params), *uplinks(job)]]
        return [s for s in stats if s is not None]

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Load of the busiest link at its ceiling, share of its capacity (capped at 1);
        without any known capacity, the share of busy node-periods at the seed's ceiling."""
        stats = [s for s in self._links(job, params) if s.utilization is not None]
        if stats:
            return float(min(1.0, max(s.utilization or 0.0 for s in stats)))
        if any(link.capacity for link in node_links(job, params)):
            return 0.0  # capacities known, no link carried messages
        _, _, total = self._totals(job)
        ceiling, busy = self._ceiling(total, params)
        if ceiling < params["min_ceiling_bytes_per_s"]:
            return 0.0
        return float(np.mean(busy >= params["at_ceiling_fraction"] * ceiling))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        stats = self._links(job, params)
        known = [s for s in stats if s.utilization is not None]
        if known:
            return self._against_capacity(job, params, known)
        if any(link.capacity for link in node_links(job, params)):
            return []  # capacities known, but no link carried a message phase
        return self._seed_ceiling(job, params)

    # -- with capacities ---------------------------------------------------

    def _against_capacity(
        self, job: JobData, params: Mapping[str, Any], stats: list[LinkStats]
    ) -> list[Finding]:
        tx, rx, total = self._totals(job)
        node_stats = [s for s in stats if s.link.kind == "node"]
        up_stats = [s for s in stats if s.link.kind == "uplink"]
        worst = max(stats, key=lambda s: s.utilization or 0.0)
        util = worst.utilization or 0.0
        corr, cv = _seesaw(tx, rx)
        lp = link_params()
        if util < lp["near_capacity"] or worst.near_share < params["plateau_share_medium"]:
            return self._plateau_below_capacity(job, params, stats, total)
        link = worst.link
        loose = link.bound and util > lp["over_capacity"]
        severity = (
            "high"
            if not loose
            and worst.near_share >= params["plateau_share_high"]
            and util >= params["high_capacity"]
            else "medium"
        )
        cap_mb = mb(link.capacity or 0.0)
        evidence: dict[str, Any] = {
            "link": link.name,
            "link_capacity_MB_per_s": cap_mb,
            "link_capacity_Mbit_per_s": round((link.capacity or 0.0) * 8 / 1e6, 1),
            "link_capacity_source": link.source,
            "ceiling_MB_per_s": mb(worst.ceiling),
            "ceiling_share_of_capacity": round(util, 3),
            "message_periods": int(worst.message.sum()),
            "share_of_message_periods_near_capacity": round(worst.near_share, 3),
            "periods_near_capacity": spans_text(job, worst.near),
            "nodes": ", ".join(link.nodes),
        }
        if link.bound:
            evidence["traffic_is_upper_bound"] = (
                "bytes sent by the rack's job nodes; some may have gone to nodes of the same rack"
            )
            if worst.stayed_share > 0:
                evidence["share_that_stayed_in_rack_at_least"] = round(worst.stayed_share, 3)
        if node_stats and link.kind == "uplink":
            busiest = max(node_stats, key=lambda s: s.utilization or 0.0)
            evidence["node_link_capacity_source"] = busiest.link.source
            evidence["busiest_node_link"] = (
                f"{busiest.link.nodes[0]}: {mb(busiest.ceiling)} MB/s = "
                f"{busiest.utilization or 0.0:.0%} of {mb(busiest.link.capacity or 0)} MB/s"
            )
        others = [s for s in up_stats if s is not worst]
        if others:
            evidence["other_uplinks"] = "; ".join(
                f"{s.link.name}: {mb(s.ceiling)} MB/s = {s.utilization or 0.0:.0%}" for s in others
            )
        if np.isfinite(corr) and corr < -0.3:  # the seed's seesaw, when the data shows it
            evidence["corr_avg_tx_vs_avg_rx"] = round(corr, 3)
            evidence["cv_of_avg_tx_plus_rx"] = round(cv, 4)
        where = ("uplink" if link.kind == "uplink" else "link") + (
            f" ({(link.capacity or 0.0) * 8 / 1e6:g} Mbit/s = {cap_mb:g} MB/s, "
            f"{SOURCE_WORDS.get(link.source_kind, link.source_kind)})"
        )
        if link.bound and loose:
            load_text = (
                f"The nodes of rack {link.rack} ({', '.join(link.nodes)}) sent up to "
                f"{mb(worst.ceiling):g} MB/s in the message periods, {util:.0%} of what its "
                f"{where} can carry: the uplink may be full, but at least "
                f"{worst.stayed_share:.0%} of that traffic (in the busiest periods) stayed "
                "inside the rack, so how full "
                "cannot be told from the nodes' counters."
            )
        elif link.bound:
            load_text = (
                f"Rack {link.rack} ({', '.join(link.nodes)}) sends up to "
                f"{mb(worst.ceiling):g} MB/s to other racks (an upper bound: the bytes its "
                f"job nodes sent), {util:.0%} of its "
                f"{where}, in {worst.near_share:.0%} of its {int(worst.message.sum())} message "
                f"periods ({evidence['periods_near_capacity']})."
            )
        else:
            load_text = (
                f"{link.name.capitalize()} carries up to {mb(worst.ceiling):g} MB/s, "
                f"{util:.0%} of its {where}, in {worst.near_share:.0%} of its "
                f"{int(worst.message.sum())} message periods "
                f"({evidence['periods_near_capacity']})."
            )
        node_text = ""
        if link.kind == "uplink" and node_stats:
            top = max(s.utilization or 0.0 for s in node_stats)
            node_text = f" The nodes' own links are at most {top:.0%} used" + (
                "."
                if loose
                else ": the uplink between the racks, not the nodes' links, limits communication."
            )
        advice = (
            " Keep the job inside one rack (sbatch --switches=1), put ranks that exchange "
            "most in the same rack, or send less between racks (aggregate, compress, "
            "overlap with computation)."
            if link.kind == "uplink"
            else " Adding processes will not make communication faster: send less per "
            "node (more computation per byte, aggregation, compression) or place "
            "communicating ranks on the same node."
        )
        congestion = congestion_evidence(job, link.nodes, worst.near, link.kind == "uplink")
        if congestion is not None:  # counter-based: a full link waits, a busy one does not
            evidence.update(congestion[0])
        run = longest_run(worst.near)
        finding = Finding(
            self.name,
            self.title,
            severity,
            evidence,
            load_text + node_text + ("" if congestion is None else congestion[1]) + advice,
            span_of(job, run),
        )
        self._estimate(job, params, worst, finding)
        return [finding]

    def _estimate(
        self, job: JobData, params: Mapping[str, Any], worst: LinkStats, finding: Finding
    ) -> None:
        """The run time the link costs: its message periods at the next limit's rate
        (factors/costs.py), only the bytes that crossed for an uplink."""
        rule = load_parameters()["loss"]
        caps = {link.nodes[0]: link.capacity for link in node_links(job, params)}
        nxt = costs.next_limit(job, worst, caps, rule)
        if nxt is None:
            finding.loss_unknown = (
                "the capacity of what would carry these bytes without this link (the nodes' "
                "own links) is not known"
            )
            return
        saving = costs.transfer_saving(job, worst, nxt[0], nxt[1], rule)
        crossed = costs.crossed_bounds(job, worst)
        link = worst.link
        finding.evidence["next_limit"] = nxt[1]
        if link.bound:
            finding.evidence["share_crossed_bounds"] = f"{crossed.low:.0%}-{crossed.high:.0%}"
        eff = float(rule["next_link_efficiency_low"])
        basis = (
            f"{saving.periods_low} of {len(worst.message)} periods near the capacity "
            f"({saving.bytes_low / 1e6:.0f} MB) would move their bytes at {nxt[1]}"
            + (f"; {crossed.how}" if link.bound else "")
        )
        assumptions = [
            "the job waits for these transfers (they do not overlap its computation)",
            f"without this link the bytes move at {eff:.0%} (low end) to 100% (high end, "
            f"every {saving.periods_high} message periods) of the next limit's capacity",
        ]
        if link.bound:
            assumptions.append(
                "the time saved shrinks in proportion to the share of the rack's bytes that crossed"
            )
        finding.loss = Loss(
            crossed.low * saving.low_share, crossed.high * saving.high_share, basis, assumptions
        )

    def _plateau_below_capacity(
        self,
        job: JobData,
        params: Mapping[str, Any],
        stats: list[LinkStats],
        total: np.ndarray,
    ) -> list[Finding]:
        """The seed's ceiling, far below every known capacity, while the racks are not
        known: an uplink may be the limit. (With the racks known and every link far
        from its capacity, the network is not what limits the job: no finding.)"""
        if job.fabric is not None:
            return []
        try:
            ceiling, busy = self._ceiling(total, params)
        except AnalyzerSkip:
            return []
        if ceiling < params["min_ceiling_bytes_per_s"]:
            return []
        share = float(np.mean(busy >= params["at_ceiling_fraction"] * ceiling))
        if share < params["plateau_share_medium"]:
            return []
        worst = max(stats, key=lambda s: s.utilization or 0.0)
        evidence = {
            "ceiling_MB_per_s_tx_plus_rx_per_node": mb(ceiling),
            "share_of_busy_time_at_ceiling": round(share, 3),
            "busiest_link": worst.link.name,
            "busiest_link_share_of_capacity": round(worst.utilization or 0.0, 3),
            "link_capacity_MB_per_s": mb(worst.link.capacity or 0.0),
            "link_capacity_source": worst.link.source,
            "racks": job.fabric_info.describe() if job.fabric_info is not None else "not looked up",
        }
        racks = "" if job.fabric_info is None else f" (racks: {job.fabric_info.describe()})"
        hint = (
            f"Per node, transmit + receive stays at about {mb(ceiling):g} MB/s in {share:.0%} "
            f"of the busy periods, yet no known link is near its capacity (the busiest, "
            f"{worst.link.name}, at {worst.utilization or 0.0:.0%} of "
            f"{mb(worst.link.capacity or 0.0):g} MB/s). Something else sets that pace: "
            "an uplink between racks whose capacity is not known (give Slurm's "
            f"topology.conf with --topology to check it{racks}), the MPI library, or the "
            "program's own synchronization."
        )
        return [
            Finding(
                self.name,
                "Network traffic at a plateau below capacity",
                "low",
                evidence,
                hint,
                loss_unknown="no known link is near its capacity: what sets the plateau, and "
                "so what removing it would save, is not measured",
            )
        ]

    # -- without capacities (the seed's method) ----------------------------

    def _seed_ceiling(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        tx, rx, total = self._totals(job)
        ceiling, busy = self._ceiling(total, params)
        if ceiling < params["min_ceiling_bytes_per_s"]:
            return []
        threshold = params["at_ceiling_fraction"] * ceiling
        share = float(np.mean(busy >= threshold))
        if share < params["plateau_share_medium"]:
            return []
        corr, sum_cv = _seesaw(tx, rx)
        with np.errstate(all="ignore"):
            max_tx = np.nanmax(tx, axis=0)
            min_tx = np.nanmin(tx, axis=0)
        node_at = np.nanmax(total, axis=0) >= threshold
        run = longest_run(node_at)
        evidence: dict[str, Any] = {
            "ceiling_MB_per_s": mb(ceiling),
            "share_of_busy_time_at_ceiling": round(share, 3),
            "corr_avg_tx_vs_avg_rx": round(corr, 3),
            "cv_of_avg_tx_plus_rx": round(sum_cv, 4),
            "max_tx_upper_bound_MB_per_s": mb(np.nanquantile(max_tx, 0.99)),
            "min_tx_lower_bound_MB_per_s": mb(np.nanquantile(min_tx, 0.01)),
            "link_capacity_source": "unknown (no net.capacity/speed sensor, no topology, "
            "link_capacity_bytes_per_s = 0)",
        }
        severity = "high" if share >= params["plateau_share_high"] else "medium"
        seesaw = (
            " The across-node averages of transmit and receive move against each other "
            f"(correlation {corr:.2f}) while their sum stays constant (CV {sum_cv:.1%}), "
            "the seed's sign that the link, not the program, sets the pace."
            if np.isfinite(corr) and corr < -0.3
            else ""
        )
        hint = (
            f"Per node, transmit + receive stays at about {mb(ceiling):.0f} MB/s in "
            f"{share:.0%} of the busy periods.{seesaw} The link's capacity is not known, so "
            "this is the ceiling the data shows. Adding processes will not make "
            "communication faster: send less per node (more computation per byte, "
            "aggregation, compression) or place communicating ranks on the same node."
        )
        return [
            Finding(
                self.name,
                self.title,
                severity,
                evidence,
                hint,
                span_of(job, run),
                loss_unknown="the link's capacity is not known, so the rate its bytes would "
                "move at without the limit cannot be told",
            )
        ]


FACTOR = NetworkBandwidth()
