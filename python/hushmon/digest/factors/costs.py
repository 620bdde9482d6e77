"""The arithmetic of what a network limit costs (shared by ``network_bandwidth``
and ``topology``; not a factor).

A link at its capacity makes the periods in which it carries messages last
as long as its capacity lets the bytes through. Without that limit the same
bytes move at the next limit's rate: the nodes' own links behind a rack's
uplink, a faster link for a node's link (``faster_link_factor`` in
``[loss]``). The run time saved is the time of those periods minus the time
their bytes take at the next limit: at its whole capacity (the high end) or
at ``next_link_efficiency_low`` of it (the low end: MPI over TCP rarely
fills a link, and the CPUs that drive it may be the next limit). Only the
periods near capacity count at the low end, every message period at the high
end.

For a rack's uplink only the bytes that crossed count, and node counters
bound them (:func:`crossed_bounds`): at most what the rack's job nodes sent,
and at least what no job node of the same rack can have received.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.factors import rack_traffic
from hushmon.digest.factors.links import LinkStats, traffic
from hushmon.digest.jobdata import JobData


@dataclass
class Crossed:
    """Bounds of the share of a rack's sent bytes that left the rack."""

    low: float
    high: float
    how: str  # in words, for the basis and the hint
    measured: bool = False  # counted per sending rack (rack_traffic.py), not bounded


@dataclass
class TransferSaving:
    low_share: float  # of the job's run time
    high_share: float
    next_capacity: float  # bytes/s per direction of the next limit
    next_text: str  # what the next limit is, in words
    bytes_low: float  # bytes moved in the periods the low end counts
    periods_low: int
    periods_high: int


def crossed_bounds(job: JobData, stats: LinkStats) -> Crossed:
    """Share of rack ``stats.link.rack``'s sent bytes that crossed its uplink, in its
    message periods, bounded by the node counters.

    Upper: everything sent (less what the uplink cannot have carried, when the rack
    sent more than that). Lower: a node's bytes can stay in the rack only if another
    job node of the rack received them, so at most min(its tx, the others' rx) stayed;
    a rack with one job node kept nothing (its partners are job nodes elsewhere)."""
    link = stats.link
    tx, rx = traffic(job, "tx"), traffic(job, "rx")
    high = 1.0 - stats.stayed_share
    if tx is None or rx is None or not link.bound:
        return Crossed(1.0, 1.0, "a node's own link: everything it sent crossed it")
    counted = rack_traffic.measured_share(job, link.rack, list(link.nodes), stats.message)
    if counted is not None:
        share = counted[0]
        how = (
            f"measured: {share:.0%} of the {counted[1] * job.period_s / 1e6:.0f} MB the job's "
            f"nodes received from rack {link.rack} went to nodes outside it (per-rack byte "
            "counts of the receiving nodes)"
        )
        return Crossed(share, share, how, measured=True)
    idx = np.array([job.hosts.index(h) for h in link.nodes], dtype=np.int64)
    cols = np.flatnonzero(stats.message)
    t = np.nan_to_num(tx[np.ix_(idx, cols)])
    r = np.nan_to_num(rx[np.ix_(idx, cols)])
    sent = float(t.sum())
    if sent <= 0:
        return Crossed(0.0, high, "the rack sent nothing in its message periods")
    rack_rx = r.sum(axis=0)
    # per node and period: what the rack's other job nodes received
    others_rx = rack_rx[None, :] - r
    could_stay = float(np.minimum(t, others_rx).sum())
    low = max(0.0, 1.0 - could_stay / sent)
    if len(idx) == 1:
        how = (
            f"{link.nodes[0]} is the job's only node in rack {link.rack}: all it sent "
            "went to other racks"
        )
    elif low > 0.02:
        how = (
            f"rack {link.rack}'s other job nodes received too little for more than "
            f"{1 - low:.0%} of it to stay inside; at least {low:.0%} crossed, at most {high:.0%}"
        )
    else:
        how = (
            f"the node counters cannot tell how much of rack {link.rack}'s traffic crossed: "
            f"between 0 and {high:.0%} (its job nodes received as much as they sent; "
            "which node sent to which is not measured)"
        )
    return Crossed(min(low, high), high, how)


def transfer_saving(
    job: JobData,
    stats: LinkStats,
    next_capacity: float,
    next_text: str,
    rule: Mapping[str, Any],
) -> TransferSaving:
    """Run time saved if ``stats``' link stopped limiting and its bytes moved at
    ``next_capacity`` (bytes/s)."""
    n = max(1, len(stats.message))
    load = np.nan_to_num(stats.link.load)
    eff = float(rule["next_link_efficiency_low"])
    low_t = np.clip(1.0 - load[stats.near] / (eff * next_capacity), 0.0, 1.0)
    high_t = waiting_share(load[stats.message], stats.link.capacity, next_capacity, rule)
    return TransferSaving(
        float(low_t.sum()) / n,
        float(high_t.sum()) / n,
        next_capacity,
        next_text,
        float(load[stats.near].sum()) * job.period_s,
        int(stats.near.sum()),
        int(stats.message.sum()),
    )


def waiting_share(
    carried: np.ndarray,
    capacity: float | None,
    next_capacity: float,
    rule: Mapping[str, Any],
    sent: np.ndarray | None = None,
) -> np.ndarray:
    """Per message period, the share of it the high end counts as waiting for the link:
    the whole period less ``sent`` (default: what the link carried) at the next limit,
    as if the exchange waited for its slowest part; but a link that carried under
    ``idle_link_share`` of its capacity had no queue to wait in (an all-to-all of
    8-byte messages): such a period saves only its bytes' transfer time, at the link's
    rate against the next limit's."""
    moved = carried if sent is None else sent
    whole = np.clip(1.0 - moved / next_capacity, 0.0, 1.0)
    if not capacity:
        return whole
    busy = carried / capacity
    transfer = np.clip(busy - moved / next_capacity, 0.0, 1.0)
    return np.where(busy >= float(rule["idle_link_share"]), whole, transfer)


def next_limit(
    job: JobData, stats: LinkStats, node_caps: Mapping[str, float | None], rule: Mapping[str, Any]
) -> tuple[float, str] | None:
    """What would limit the link's bytes without it: (bytes/s, in words). For an
    uplink, the rack's job nodes' own links together; for a node's link, a link
    ``faster_link_factor`` times as fast. None when the capacities are not known."""
    link = stats.link
    if link.capacity is None:
        return None
    if link.kind == "uplink":
        caps = [node_caps.get(h) for h in link.nodes]
        if not caps or any(c is None for c in caps):
            return None
        total = float(sum(c for c in caps if c is not None))
        return total, (f"the node links of {', '.join(link.nodes)} ({total / 1e6:g} MB/s together)")
    factor = float(rule["faster_link_factor"])
    return (
        factor * link.capacity,
        f"a link {factor:g} times as fast ({factor * link.capacity / 1e6:g} MB/s)",
    )
