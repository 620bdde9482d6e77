"""Derived sensors: one table, each entry a name, a unit-bearing description
and how to compute its node x time matrix from base sensors.

Analyzers ask for these names, so they work whatever the node's interfaces,
disks or CPUs are called. A derived sensor whose inputs are all missing is
missing too (never zeros). Adding one = one line in ``DERIVED``.

Scope: an agent in node scope (a test bed node, a container) writes the
node's own CPU and memory (its cgroup) and network (its namespace) under the
usual names and tags the host-wide duplicates ``scope=host``
(:mod:`hushmon.digest.scope`, :mod:`hushmon.digest.hosttag`). Derived
sensors read the node's own series where both exist and fall back to the
host-wide one (swap, disks, page faults have no node-scoped version);
``JobData.derived_inputs`` records which series each was computed from, and
the digest lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hushmon.digest.hosttag import host_variant
from hushmon.digest.jobview import JobView

Matrix = np.ndarray


def _sum(job: JobView, sensors: list[str]) -> Matrix | None:
    mats = [m for m in (job.matrix(s) for s in sensors) if m is not None]
    if not mats:
        return None
    stacked = np.stack(mats)
    out = np.nansum(stacked, axis=0)
    out[np.all(np.isnan(stacked), axis=0)] = np.nan
    return out


def _max(job: JobView, sensors: list[str]) -> Matrix | None:
    return _max_of([m for m in (job.matrix(s) for s in sensors) if m is not None])


def _network(direction: str) -> Callable[[JobView], Matrix | None]:
    """Bytes to and from other nodes: InfiniBand plus Ethernet, not loopback,
    and not the test bed's InfiniBand counters (ibsim.py, ``backend=sim``),
    which copy the node's Ethernet link and would count its bytes twice."""

    def compute(job: JobView) -> Matrix | None:
        ib = [s for s in job.base_sensors(f"ib.{direction}_bytes_per_s") if "backend=sim" not in s]
        eth = [s for s in job.base_sensors(f"net.{direction}_bytes_per_s") if "iface=lo" not in s]
        return _sum(job, ib + eth)

    return compute


def _loopback(direction: str) -> Callable[[JobView], Matrix | None]:
    return lambda job: _sum(job, [f"net.{direction}_bytes_per_s[iface=lo]"])


def scoped(job: JobView, name: str) -> str:
    """``name`` when the node has it, else its host-wide (``scope=host``) twin."""
    if name in job.base_names:
        return name
    host = host_variant(name)
    return host if host in job.base_names else name


def _alias(name: str, host_fallback: bool = True) -> Callable[[JobView], Matrix | None]:
    """The node's series; its host-wide twin only where ``host_fallback`` (a node's
    cgroup has no I/O wait: the host's would be counted on top of the node's idle)."""
    return lambda job: job.matrix(scoped(job, name) if host_fallback else name)


def _swap(job: JobView) -> Matrix | None:
    return _sum(job, [scoped(job, "vm.pswpin_per_s"), scoped(job, "vm.pswpout_per_s")])


def _host_busy(job: JobView) -> Matrix | None:
    """Host-wide busy CPU: every node and process sharing the machine."""
    idle = job.matrix("cpu.idle_pct[cpu=total,scope=host]")
    if idle is None:
        return None
    iowait = job.matrix("cpu.iowait_pct[cpu=total,scope=host]")
    return 100.0 - idle - (0.0 if iowait is None else np.nan_to_num(iowait))


def _mem_usage(job: JobView) -> Matrix | None:
    """Memory charged (page cache included), % of the node's limit or of RAM."""
    total = job.matrix(scoped(job, "mem.total_bytes"))
    free = job.matrix(scoped(job, "mem.free_bytes"))
    if total is None or free is None:
        return None
    with np.errstate(all="ignore"):
        return np.where(total > 0, 100.0 * (1.0 - free / total), np.nan)


def _disk_bytes(job: JobView) -> Matrix | None:
    return _sum(
        job, job.base_sensors("disk.read_bytes_per_s") + job.base_sensors("disk.write_bytes_per_s")
    )


def _disk_busy(job: JobView) -> Matrix | None:
    return _max(job, job.base_sensors("disk.busy_pct"))


def _cpu_busy(job: JobView) -> Matrix | None:
    idle = job.matrix(scoped(job, "cpu.idle_pct[cpu=total]"))
    if idle is None:
        return None
    iowait = job.matrix("cpu.iowait_pct[cpu=total]")
    return 100.0 - idle - (0.0 if iowait is None else np.nan_to_num(iowait))


def _gpus(job: JobView, field: str) -> list[str]:
    """Every GPU's series of a gpu_nvidia field (any scope tag)."""
    return job.base_sensors(f"gpu.{field}")


def _mean(job: JobView, sensors: list[str]) -> Matrix | None:
    mats = [m for m in (job.matrix(s) for s in sensors) if m is not None]
    if not mats:
        return None
    stacked = np.stack(mats)
    n = np.sum(~np.isnan(stacked), axis=0)
    with np.errstate(all="ignore"):
        return np.where(n > 0, np.nansum(stacked, axis=0) / np.maximum(n, 1), np.nan)


def _gpu(
    field: str, how: Callable[[JobView, list[str]], Matrix | None]
) -> Callable[[JobView], Matrix | None]:
    return lambda job: how(job, _gpus(job, field))


def _min(job: JobView, sensors: list[str]) -> Matrix | None:
    neg = _max_of([-m for m in (job.matrix(s) for s in sensors) if m is not None])
    return None if neg is None else -neg


def _max_of(mats: list[Matrix]) -> Matrix | None:
    if not mats:
        return None
    with np.errstate(all="ignore"):
        stacked = np.stack(mats)
        out = np.nanmax(np.where(np.isnan(stacked), -np.inf, stacked), axis=0)
    out[np.isinf(out)] = np.nan
    return out


def _gpu_pcie_used(job: JobView) -> Matrix | None:
    """Per node, the fullest GPU link direction, % of its capacity."""
    mats = []
    for cap_name in _gpus(job, "pcie_capacity_bytes_per_s"):
        tags = cap_name[len("gpu.pcie_capacity_bytes_per_s") :]
        cap = job.matrix(cap_name)
        tx = job.matrix("gpu.pcie_tx_bytes_per_s" + tags)
        rx = job.matrix("gpu.pcie_rx_bytes_per_s" + tags)
        if cap is None or (tx is None and rx is None):
            continue
        both = _max_of([m for m in (tx, rx) if m is not None])
        assert both is not None
        with np.errstate(all="ignore"):
            mats.append(np.where(cap > 0, 100.0 * both / cap, np.nan))
    return _max_of(mats)


@dataclass(frozen=True)
class Derived:
    name: str
    description: str
    compute: Callable[[JobView], Matrix | None]


DERIVED_LIST: tuple[Derived, ...] = (
    Derived("cpu.user_pct", "user CPU time, % of all cores", _alias("cpu.user_pct[cpu=total]")),
    Derived("cpu.system_pct", "system CPU time, %", _alias("cpu.system_pct[cpu=total]")),
    Derived("cpu.idle_pct", "idle CPU time, %", _alias("cpu.idle_pct[cpu=total]")),
    Derived(
        "cpu.iowait_pct", "CPU time waiting for I/O, %", _alias("cpu.iowait_pct[cpu=total]", False)
    ),
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
    Derived(
        "vm.major_faults_per_s",
        "page faults that read from disk, per s",
        _alias("vm.pgmajfault_per_s"),
    ),
    Derived("mem.page_cache_bytes", "page cache, bytes", _alias("mem.cached_bytes")),
    Derived("mem.usage_pct", "memory charged incl. page cache, % of limit or RAM", _mem_usage),
    Derived("cpu.host_busy_pct", "host-wide CPU busy, % (all nodes on the machine)", _host_busy),
    Derived("gpu.sm_pct", "GPU SM utilization, % (mean of the node's GPUs)", _gpu("sm_pct", _mean)),
    Derived("gpu.min_sm_pct", "least busy GPU's SM utilization, %", _gpu("sm_pct", _min)),
    Derived("gpu.mem_used_pct", "fullest GPU's memory used, %", _gpu("mem_used_pct", _max)),
    Derived("gpu.power_w", "GPU power, W (sum of the node's GPUs)", _gpu("power_w", _sum)),
    Derived(
        "gpu.pcie_bytes_per_s",
        "host-device PCIe traffic, bytes/s (tx + rx, all GPUs)",
        lambda job: _sum(
            job, _gpus(job, "pcie_tx_bytes_per_s") + _gpus(job, "pcie_rx_bytes_per_s")
        ),
    ),
    Derived("gpu.pcie_used_pct", "fullest GPU PCIe direction, % of the link", _gpu_pcie_used),
    Derived("gpu.temp_c", "hottest GPU, degrees C", _gpu("temp_c", _max)),
)
DERIVED: dict[str, Derived] = {d.name: d for d in DERIVED_LIST}


def add_derived(job: JobView) -> None:
    """Compute every derived sensor whose inputs exist; add its stats to the job."""
    for d in DERIVED_LIST:
        m = job.matrix(d.name)
        if m is not None and not np.all(np.isnan(m)):
            job.add_stats(d.name, m)
