"""Counter-based congestion for a link the network factor found near capacity
(not a factor).

A busy link has high byte rates; a *full* one also holds packets back: the
InfiniBand port counts ``port_xmit_wait`` ticks in which it had data to send
and no credit from the far end (``ib.xmit_wait_per_s``, docs/formats.md).
Per link, this compares the link's nodes' ports in the periods near capacity
with their other periods: waiting in most near-capacity periods and not
elsewhere says the link is full; no waiting says it is busy but keeps up.
The tick length is the HCA's, so only the same ports' periods are compared
with each other, and "waiting" is any tick at all. An uplink's congestion shows at the nodes'
ports only as far as the fabric backs it up into them (InfiniBand's
credit-based flow control does, from a full switch buffer), so for an
uplink the evidence says what the ports saw and no more. The test bed's
simulated counters (python/hushmon/testbed/ibsim.py) give each node its
own shaped link's throttling plus its share of its rack uplink's queueing
(the uplink's tbf overlimits, shared by the bytes each node sent into the
rack switch), and the evidence names them simulated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hushmon.digest.jobdata import JobData

SENSOR = "ib.xmit_wait_per_s"
FULL_SHARE = 0.5  # waiting in at least this share of the near-capacity periods = full


def _port_waits(job: JobData, nodes: list[str]) -> tuple[np.ndarray, bool] | None:
    """Per period, the link's nodes' summed xmit_wait rate; and whether any port is simulated."""
    rows = [job.hosts.index(n) for n in nodes if n in job.hosts]
    names = job.base_sensors(SENSOR)
    mats = [m for m in (job.matrix(s) for s in names) if m is not None]
    if not rows or not mats:
        return None
    per_node = np.nansum(np.stack(mats), axis=0)[rows]
    measured = np.isfinite(np.stack(mats)[:, rows]).any(axis=(0, 1))
    if not measured.any():
        return None
    simulated = any("backend=sim" in s for s in names)
    return np.nansum(per_node, axis=0), simulated


def congestion_evidence(
    job: JobData, nodes: list[str], near: np.ndarray, uplink: bool
) -> tuple[dict[str, Any], str] | None:
    """Evidence and one sentence for the hint, or None without xmit_wait counters."""
    got = _port_waits(job, nodes)
    if got is None or not near.any():
        return None
    waits, simulated = got
    near_waiting = float(np.mean(waits[near] > 0))
    rest = ~near
    evidence: dict[str, Any] = {
        "ib_xmit_wait_per_s_near_capacity": round(float(np.mean(waits[near])), 1),
        "ib_periods_waiting_near_capacity": round(near_waiting, 3),
    }
    if rest.any():
        evidence["ib_xmit_wait_per_s_elsewhere"] = round(float(np.mean(waits[rest])), 1)
    full = near_waiting >= FULL_SHARE
    if not uplink:
        where = "port"
    elif simulated:
        where = "the nodes' ports (simulated: the uplink's queueing shared out over them)"
    else:
        where = "the nodes' ports (an uplink's congestion need not show there)"
    evidence["ib_congestion"] = (
        f"full: {where} waited for credit in {near_waiting:.0%} of the periods near capacity"
        if full
        else f"busy, not full: {where} waited for credit in only {near_waiting:.0%} of them"
    )
    if simulated:
        evidence["ib_counters"] = (
            "simulated (backend=sim) from the node's Ethernet link and its rack uplink's "
            "queue (the test bed's tc qdiscs)"
        )
    sentence = (
        f" The InfiniBand counters agree: port_xmit_wait "
        f"{evidence['ib_xmit_wait_per_s_near_capacity']:g}/s in those periods"
        if full
        else f" The InfiniBand ports hardly waited for credit ({near_waiting:.0%} of those periods)"
    ) + (" (simulated counters, made from the test bed's tc queues)." if simulated else ".")
    if not full and not uplink:
        sentence += " The link is busy but keeps up; look at the next limit."
    return evidence, sentence
