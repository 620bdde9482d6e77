"""Network bandwidth limit (seed 001, Figs. 1-7).

The seed's signature of a saturated link: per node, transmit + receive sits
at a constant ceiling for much of the busy time; the maximum across nodes is
bounded above and the minimum below by constants; and the across-node
averages of transmit and receive move against each other (their sum stays
constant). An unsaturated job instead shows transmit and receive rising
together, well below any ceiling.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.factors.base import (
    AnalyzerSkip,
    Finding,
    SkipReason,
    longest_run,
    mb,
    span_of,
)
from hushmon.digest.jobdata import JobData


class NetworkBandwidth:
    name = "network_bandwidth"
    title = "Network bandwidth limit"
    requires = ("network.tx_bytes_per_s", "network.rx_bytes_per_s")
    optional = ()

    def _totals(self, job: JobData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tx = job.matrix("network.tx_bytes_per_s")
        rx = job.matrix("network.rx_bytes_per_s")
        assert tx is not None and rx is not None
        return tx, rx, tx + rx

    def _ceiling(self, total: np.ndarray, p: Mapping[str, Any]) -> tuple[float, np.ndarray]:
        busy = total[np.isfinite(total) & (total > 0)]
        if busy.size < 10:
            raise AnalyzerSkip(SkipReason.NOT_ENOUGH_DATA, "fewer than 10 busy node-periods")
        ceiling = float(np.quantile(busy, p["ceiling_quantile"]))
        return ceiling, busy

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """Share of busy node-periods at the ceiling (0 when the ceiling is trivial)."""
        _, _, total = self._totals(job)
        ceiling, busy = self._ceiling(total, params)
        if ceiling < params["min_ceiling_bytes_per_s"]:
            return 0.0
        return float(np.mean(busy >= params["at_ceiling_fraction"] * ceiling))

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        tx, rx, total = self._totals(job)
        ceiling, busy = self._ceiling(total, params)
        if ceiling < params["min_ceiling_bytes_per_s"]:
            return []
        threshold = params["at_ceiling_fraction"] * ceiling
        share = float(np.mean(busy >= threshold))
        if share < params["plateau_share_medium"]:
            return []
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
            sum_cv = float(np.std(avg_sum) / np.mean(avg_sum)) if avg_sum.size else float("nan")
            max_tx = np.nanmax(tx, axis=0)
            min_tx = np.nanmin(tx, axis=0)
        node_at = np.nanmax(total, axis=0) >= threshold
        run = longest_run(node_at)
        capacity = float(params["link_capacity_bytes_per_s"])
        evidence: dict[str, Any] = {
            "ceiling_MB_per_s": mb(ceiling),
            "share_of_busy_time_at_ceiling": round(share, 3),
            "corr_avg_tx_vs_avg_rx": round(corr, 3),
            "cv_of_avg_tx_plus_rx": round(sum_cv, 4),
            "max_tx_upper_bound_MB_per_s": mb(np.nanquantile(max_tx, 0.99)),
            "min_tx_lower_bound_MB_per_s": mb(np.nanquantile(min_tx, 0.01)),
        }
        if capacity > 0:
            evidence["ceiling_share_of_link_capacity"] = round(ceiling / capacity, 3)
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
            f"{share:.0%} of the busy periods.{seesaw} Adding processes will not make "
            "communication faster: send less per node (more computation per byte, "
            "aggregation, compression) or place communicating ranks on the same node."
        )
        return [Finding(self.name, self.title, severity, evidence, hint, span_of(job, run))]


FACTOR = NetworkBandwidth()
