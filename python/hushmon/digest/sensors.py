"""Derived sensors: one table, each entry a name, a unit-bearing description
and how to compute its node x time matrix from base sensors.

Analyzers ask for these names, so they work whatever the node's interfaces,
disks or CPUs are called. A derived sensor whose inputs are all missing is
missing too (never zeros). Adding one = one line in ``DERIVED``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hushmon.digest.jobdata import JobData

Matrix = np.ndarray


def _sum(job: JobData, sensors: list[str]) -> Matrix | None:
    mats = [m for m in (job.matrix(s) for s in sensors) if m is not None]
    if not mats:
        return None
    stacked = np.stack(mats)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    return out


def _max(job: JobData, sensors: list[str]) -> Matrix | None:
    mats = [m for m in (job.matrix(s) for s in sensors) if m is not None]
    if not mats:
        return None
    with np.errstate(all="ignore"):
        stacked = np.stack(mats)
        out = np.nanmax(np.where(np.isnan(stacked), -np.inf, stacked), axis=0)
    out[np.isinf(out)] = np.nan
    return out


def _network(direction: str) -> Callable[[JobData], Matrix | None]:
    def compute(job: JobData) -> Matrix | None:
        names = job.base_sensors(f"ib.{direction}_bytes_per_s") + [
            s for s in job.base_sensors(f"net.{direction}_bytes_per_s") if s.find("iface=lo") < 0
        ]
        return _sum(job, names)

    return compute


def _loopback(direction: str) -> Callable[[JobData], Matrix | None]:
    return lambda job: _sum(job, [f"net.{direction}_bytes_per_s[iface=lo]"])


def _alias(name: str) -> Callable[[JobData], Matrix | None]:
    return lambda job: job.matrix(name)


def _swap(job: JobData) -> Matrix | None:
    return _sum(job, ["vm.pswpin_per_s", "vm.pswpout_per_s"])


def _disk_bytes(job: JobData) -> Matrix | None:
    return _sum(
        job, job.base_sensors("disk.read_bytes_per_s") + job.base_sensors("disk.write_bytes_per_s")
    )


def _disk_busy(job: JobData) -> Matrix | None:
    return _max(job, job.base_sensors("disk.busy_pct"))


def _cpu_busy(job: JobData) -> Matrix | None:
    idle = job.matrix("cpu.idle_pct[cpu=total]")
    if idle is None:
        return None
    iowait = job.matrix("cpu.iowait_pct[cpu=total]")
    return 100.0 - idle - (0.0 if iowait is None else np.nan_to_num(iowait))


@dataclass(frozen=True)
class Derived:
    name: str
    description: str
    compute: Callable[[JobData], Matrix | None]


DERIVED_LIST: tuple[Derived, ...] = (
    Derived("cpu.user_pct", "user CPU time, % of all cores", _alias("cpu.user_pct[cpu=total]")),
    Derived("cpu.system_pct", "system CPU time, %", _alias("cpu.system_pct[cpu=total]")),
    Derived("cpu.idle_pct", "idle CPU time, %", _alias("cpu.idle_pct[cpu=total]")),
    Derived("cpu.iowait_pct", "CPU time waiting for I/O, %", _alias("cpu.iowait_pct[cpu=total]")),
    Derived("cpu.busy_pct", "CPU time not idle and not waiting, %", _cpu_busy),
    Derived(
        "pmu.flops_per_s", "floating-point operations per s", _alias("pmu.flops_per_s[cpu=total]")
    ),
    Derived(
        "network.tx_bytes_per_s",
        "bytes sent off the node (InfiniBand + Ethernet, not lo)",
        _network("tx"),
    ),
    Derived("network.rx_bytes_per_s", "bytes received from other nodes", _network("rx")),
    Derived("loopback.tx_bytes_per_s", "bytes sent over the loopback interface", _loopback("tx")),
    Derived("swap.pages_per_s", "pages swapped in + out per s", _swap),
    Derived("disk.bytes_per_s", "bytes read + written per s, all disks", _disk_bytes),
    Derived("disk.max_busy_pct", "busiest disk's utilization, %", _disk_busy),
)
DERIVED: dict[str, Derived] = {d.name: d for d in DERIVED_LIST}


def add_derived(job: JobData) -> None:
    """Compute every derived sensor whose inputs exist; add its stats to the job."""
    for d in DERIVED_LIST:
        m = job.matrix(d.name)
        if m is not None and not np.all(np.isnan(m)):
            job.add_stats(d.name, m)
