"""The links a job's traffic used, with their capacities and where those
came from (shared by ``network_bandwidth`` and ``topology``; not a factor).

- **Node links**: each node's own traffic (``network.tx/rx_bytes_per_s``)
  against its link's capacity, learned in this order: the configured rate
  the agent reports (``net.capacity_bits_per_s``, set with
  ``net.link_bits_per_s`` for shaped, shared or virtual links), the rack
  switch's ``LinkSpeed`` in Slurm's topology.conf, the rate the driver
  reports (``net.speed_bits_per_s``; a veth claims 10 Gbit/s whatever it is
  shaped to), ``link_capacity_bytes_per_s`` in parameters.toml.
- **Uplinks** (topology known, job in two racks or more): a rack's traffic
  that must leave it is at most what the rack's job nodes sent (some of it
  may go to nodes of the same rack), so the rack's summed transmit is an
  *upper bound* of what crossed its uplink. When that bound is above what
  the uplink can carry, at least the excess stayed inside the rack.

Full duplex: each direction has the whole capacity, so a link's load in a
period is the larger of its transmit and receive rates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hushmon.digest.factors.params import load_parameters
from hushmon.digest.jobdata import JobData


@dataclass
class Link:
    name: str
    kind: str  # "node" or "uplink"
    nodes: list[str]
    capacity: float | None  # bytes/s per direction
    source: str  # where the capacity came from, in words
    source_kind: str  # "configured", "topology", "driver", "parameters", "unknown"
    tx: np.ndarray  # bytes/s per period
    rx: np.ndarray
    bound: bool = False  # traffic is an upper bound of what crossed
    rack: str = ""  # uplinks: the rack (leaf switch)

    @property
    def load(self) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.fmax(self.tx, self.rx)


@dataclass
class LinkStats:
    """A link's message periods and how close they came to its capacity."""

    link: Link
    message: np.ndarray  # bool per period: the link carried a message phase
    ceiling: float  # bytes/s, high quantile of its load in message periods
    utilization: float | None  # ceiling / capacity
    near: np.ndarray  # bool per period: message period at >= near_capacity
    near_share: float  # of the message periods
    stayed_share: (
        float  # bound links: share of the busiest periods' traffic that cannot have crossed
    )


def _mbit(bits: float) -> str:
    return f"{bits / 1e9:g} Gbit/s" if bits >= 1e9 else f"{bits / 1e6:g} Mbit/s"


def _row_value(job: JobData, names: list[str], i: int) -> float | None:
    """Sum over interfaces of the job median of one node's row (None if none)."""
    total, found = 0.0, False
    for name in names:
        m = job.matrix(name)
        if m is None:
            continue
        row = m[i][np.isfinite(m[i])]
        if row.size:
            total += float(np.median(row))
            found = True
    return total if found and total > 0 else None


def simulated_ib(job: JobData) -> bool:
    """InfiniBand counters that are a copy of the node's Ethernet link (the test bed's
    ibsim.py, lines tagged backend=sim): not a fabric of their own."""
    ib = job.base_sensors("ib.tx_bytes_per_s")
    return bool(ib) and all("backend=sim" in s for s in ib)


def traffic(job: JobData, direction: str) -> np.ndarray | None:
    """Each node's network bytes/s per period (``direction`` tx or rx): the derived
    ``network.*`` sensor (digest/sensors.py leaves out the bed's simulated
    InfiniBand counters, a copy of the Ethernet link)."""
    cache: dict[str, np.ndarray | None] = job.__dict__.setdefault("_traffic_cache", {})
    if direction not in cache:
        cache[direction] = job.matrix(f"network.{direction}_bytes_per_s")
    return cache[direction]


def node_capacity(job: JobData, i: int, params: Mapping[str, Any]) -> tuple[float | None, str, str]:
    """(bytes/s, where it came from, kind) of node i's link."""
    host = job.hosts[i]
    uses_ib = bool(job.base_sensors("ib.tx_bytes_per_s")) and not simulated_ib(job)
    if not uses_ib:
        configured = [s for s in job.base_sensors("net.capacity_bits_per_s") if "iface=lo" not in s]
        bits = _row_value(job, configured, i)
        if bits:
            return (
                bits / 8,
                f"net.capacity_bits_per_s = {_mbit(bits)} (the link rate configured for the "
                "agent, net.link_bits_per_s)",
                "configured",
            )
        fabric = job.fabric
        if fabric is not None:
            fbits = fabric.node_link_bits(host)
            if fbits:
                leaf = fabric.leaf_of(host)
                return (
                    fbits / 8,
                    f"{_mbit(fbits)}: topology.conf ({fabric.source}): SwitchName={leaf} "
                    f"LinkSpeed, read as {fabric.unit_text()}",
                    "topology",
                )
        reported = [s for s in job.base_sensors("net.speed_bits_per_s") if "iface=lo" not in s]
        bits = _row_value(job, reported, i)
        if bits:
            return (
                bits / 8,
                f"net.speed_bits_per_s = {_mbit(bits)} (what the driver reports; a virtual or "
                "shaped link may be slower)",
                "driver",
            )
    nominal = float(params.get("link_capacity_bytes_per_s", 0) or 0)
    if nominal > 0:
        return (
            nominal,
            f"{_mbit(nominal * 8)} from parameters.toml (link_capacity_bytes_per_s)",
            "parameters",
        )
    return None, "unknown (no net.capacity/speed sensor, no topology, no parameter)", "unknown"


def node_links(job: JobData, params: Mapping[str, Any]) -> list[Link]:
    """Every node's link. Worked out once per job and capacity parameter: the
    network factors and the report each ask, and a node's capacity and stats
    cost a few medians and quantiles (4096 nodes: seconds)."""
    cache: dict[tuple[float, int], list[Link]] = job.__dict__.setdefault("_node_links_cache", {})
    # capacities come from the racks too: a fabric attached later is another key
    key = (float(params.get("link_capacity_bytes_per_s", 0) or 0), id(job.fabric_info))
    if key not in cache:
        cache[key] = _node_links(job, params)
    return cache[key]


def _node_links(job: JobData, params: Mapping[str, Any]) -> list[Link]:
    tx, rx = traffic(job, "tx"), traffic(job, "rx")
    if tx is None or rx is None:
        return []
    out = []
    for i, host in enumerate(job.hosts):
        cap, source, kind = node_capacity(job, i, params)
        out.append(Link(f"{host}'s link", "node", [host], cap, source, kind, tx[i], rx[i]))
    return out


def uplinks(job: JobData) -> list[Link]:
    """One per rack of the job, when the topology is known and the job spans racks."""
    fabric = job.fabric
    tx, rx = traffic(job, "tx"), traffic(job, "rx")
    if fabric is None or tx is None or rx is None:
        return []
    racks = fabric.racks(job.hosts)
    if len(racks) < 2:
        return []
    out = []
    for leaf, hosts in sorted(racks.items()):
        idx = [job.hosts.index(h) for h in hosts]
        bits = fabric.uplink_bits(leaf)
        parent = fabric.parent_of(leaf) or "?"
        with np.errstate(all="ignore"):
            rack_tx = np.nansum(tx[idx], axis=0)
            rack_rx = np.nansum(rx[idx], axis=0)
        rack_tx[np.all(np.isnan(tx[idx]), axis=0)] = np.nan
        rack_rx[np.all(np.isnan(rx[idx]), axis=0)] = np.nan
        out.append(
            Link(
                f"uplink of rack {leaf} ({', '.join(hosts)}) to {parent}",
                "uplink",
                hosts,
                bits / 8 if bits else None,
                f"{_mbit(bits)}: {fabric.uplink_text(leaf)}" if bits else "unknown",
                "topology" if bits else "unknown",
                rack_tx,
                rack_rx,
                bound=True,
                rack=leaf,
            )
        )
    return out


def link_params() -> Mapping[str, Any]:
    return load_parameters()["links"]


def link_stats(link: Link, params: Mapping[str, Any] | None = None) -> LinkStats | None:
    """None when the link carried no message phase (``params``: the [links] section;
    with the default one, computed once per link)."""
    if params is None:
        if "_stats" not in link.__dict__:
            link.__dict__["_stats"] = _link_stats(link, link_params())
        stats: LinkStats | None = link.__dict__["_stats"]
        return stats
    return _link_stats(link, params)


def _link_stats(link: Link, params: Mapping[str, Any]) -> LinkStats | None:
    load = link.load
    finite = np.isfinite(load)
    if not finite.any():
        return None
    peak = float(np.nanquantile(load, 0.95))
    floor = float(params["min_message_bytes_per_s"])
    if peak < floor:
        return None
    message = finite & (load >= max(floor, params["message_period_fraction"] * peak))
    if not message.any():
        return None
    ceiling = float(np.quantile(load[message], params["ceiling_quantile"]))
    if link.capacity is None or link.capacity <= 0:
        return LinkStats(link, message, ceiling, None, np.zeros_like(message), 0.0, 0.0)
    near = message & (load >= params["near_capacity"] * link.capacity)
    stayed = 0.0
    if link.bound:
        # In its busiest message periods the rack sent `sent`; its uplink carries at most
        # capacity x over_capacity (rates over sampling periods are not exact), so at least
        # the rest stayed inside the rack. Read at the ceiling, not summed over all message
        # periods: periods that straddle a phase edge would dilute it.
        sent = float(np.quantile(np.nan_to_num(link.tx[message]), params["ceiling_quantile"]))
        limit = params["over_capacity"] * link.capacity
        stayed = max(0.0, 1.0 - limit / sent) if sent > 0 else 0.0
    return LinkStats(
        link,
        message,
        ceiling,
        ceiling / link.capacity,
        near,
        float(near.sum() / message.sum()),
        stayed,
    )
