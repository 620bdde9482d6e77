"""The share of a rack's traffic that crossed to other racks, measured where the
nodes counted the bytes they received from each rack (``net_rack`` lines:
the test bed's route realms, python/hushmon/testbed/rackcount.py; any site
that writes the same lines gets the same).

For rack R: of the bytes the job's nodes received from R in R's message
periods, those received by the job's nodes outside R crossed R's uplink.
Bytes R sent to nodes outside the job are not seen (neither is their share).
"""

from __future__ import annotations

import re

import numpy as np

from hushmon.digest.jobdata import JobData

SENSOR = "net_rack.rx_bytes_per_s"
_FROM = re.compile(r"from=([^,\]]+)")


def received_from(job: JobData, rack: str) -> np.ndarray | None:
    """hosts x periods bytes/s each job node received from ``rack`` (None: not counted)."""
    for sensor in job.base_sensors(SENSOR):
        m = _FROM.search(sensor)
        if m is not None and m.group(1) == rack:
            return job.matrix(sensor)
    return None


def measured_share(
    job: JobData, rack: str, rack_nodes: list[str], periods: np.ndarray
) -> tuple[float, float] | None:
    """(share of rack ``rack``'s bytes that went to job nodes outside it, bytes counted)
    over ``periods`` (a boolean mask), or None when the nodes did not count them."""
    rx = received_from(job, rack)
    if rx is None:
        return None
    cols = np.flatnonzero(periods)
    inside = np.array([h in rack_nodes for h in job.hosts])
    counted = np.isfinite(rx[:, cols]).any(axis=1)
    if not counted.all():
        return None  # a job node without the counts: its share is unknown
    got = np.nan_to_num(rx[:, cols]).sum(axis=1)
    total = float(got.sum())
    if total <= 0:
        return None
    return float(got[~inside].sum()) / total, total


def crossing_load(job: JobData, rack: str, rack_nodes: list[str]) -> np.ndarray | None:
    """Bytes/s per period that left ``rack`` for the job's nodes outside it: what its
    uplink carried of the job's traffic (None when not counted)."""
    rx = received_from(job, rack)
    if rx is None:
        return None
    outside = np.array([h not in rack_nodes for h in job.hosts])
    if not outside.any():
        return None
    return np.asarray(np.nansum(rx[outside], axis=0), dtype=np.float64)
