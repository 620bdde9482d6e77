"""Energy to solution: an info finding, not a limit.

Parts: the CPU packages and DRAM (``rapl`` lines, one per powercap zone) and
the GPUs (``gpu_nvidia``: the ``energy_mj`` counter's growth over the job,
else ``power_w`` x period). Every energy is power x period summed over the
periods, so a job read as bins (each bin a mean) sums the same way.

Shared nodes: a package's energy is the whole machine's, so the job's part is
apportioned by CPU time (the rule, per node and period): the job's cgroup CPU
time (``cgroup.cpu_usage_pct`` of the node's CPUs) over all CPU time used on
the machine the package measures (host-wide busy CPU x its CPUs), at most 1.
A package whose lines carry no ``scope=host`` tag while the agent describes
a node (the test bed's simulated tree, python/hushmon/testbed/raplsim.py,
made from the node's own CPU time) measures the node: the denominator is
then the node's busy CPU x its CPUs.
DRAM follows the package's rule; the GPUs the job holds are its own. Without
a job cgroup or CPU counts the node's whole energy is the job's, and the
finding says so.

hushmon's own share: the agents' CPU time on the job's nodes (read apart,
digest/agent_cpu.py: the job's sensors leave the agent's lines out), each
node-period's priced at that period's package energy per busy CPU-second:
the package's joules over the CPU-seconds used on what it measures (the
machine, or the node for a node-own tree), so the package's idle power is
charged to the CPU time that ran, the agent's included.

Node power from the BMC (``bmc`` lines: Redfish or IPMI DCMI, the whole
machine at the supplies' input), where a site has it: energy to solution is
the BMC's, apportioned by the package's rule, next to the sum of the parts
measured (RAPL + GPU), and what they leave -- fans, disks, NICs, the
supplies' loss -- is the part ``other`` (node - (CPU + DRAM + GPU)). A
period without a fresh BMC reading (the agent leaves stale ones out) adds
nothing; the share of periods with one is in the evidence.

A source tagged ``backend=sim`` or ``backend=fixture`` (a simulated or
recorded tree, not this machine's hardware) is named in the finding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hushmon.digest.agent_cpu import agent_cpu_s_by_period
from hushmon.digest.factors.base import AnalyzerSkip, Finding, SkipReason
from hushmon.digest.jobdata import JobData
from hushmon.digest.resolution import ACROSS_NODES

SLICES = 10  # power over time: the job's mean power in this many slices of the run


def _tags(sensor: str) -> dict[str, str]:
    inner = sensor.partition("[")[2].rstrip("]")
    return dict(p.split("=", 1) for p in inner.split(",") if "=" in p)


def _sum(job: JobData, sensors: list[str]) -> np.ndarray | None:
    mats = [m for m in (job.matrix(s) for s in sensors) if m is not None]
    if not mats:
        return None
    return np.nansum(np.stack(mats), axis=0)


def rapl_power_w(job: JobData, domain: str) -> np.ndarray | None:
    """Nodes x periods power of every RAPL zone whose domain starts with ``domain``."""
    names = [
        s for s in job.base_sensors("rapl.power_w") if _tags(s).get("domain", "").startswith(domain)
    ]
    return _sum(job, names)


def counter_energy_mj(counter_mj: np.ndarray, power_w: np.ndarray | None, period_s: float) -> float:
    """Energy of nodes x periods from an energy counter read on some periods only.

    The agent reads NVML's energy counter every ``gpu.energy_every_ms`` (one
    read costs milliseconds of CPU), so a row's readings start after the
    job's first period and end before its last: the counter's growth
    between its first and last reading, plus ``power_w`` x period for the
    periods up to the first and after the last (all of them where a row
    has no reading)."""
    valid = ~np.isnan(counter_mj)
    has = valid.any(axis=1)
    rows = np.arange(counter_mj.shape[0])
    first = np.argmax(valid, axis=1)
    last = counter_mj.shape[1] - 1 - np.argmax(valid[:, ::-1], axis=1)
    growth = np.where(has, counter_mj[rows, last] - counter_mj[rows, first], 0.0)
    total_mj = float(growth.sum())
    if power_w is not None:
        cum_w = np.cumsum(np.nan_to_num(power_w), axis=1)
        before = np.where(has, cum_w[rows, first], cum_w[:, -1])
        after = np.where(has, cum_w[:, -1] - cum_w[rows, last], 0.0)
        total_mj += float((before + after).sum()) * period_s * 1e3
    return total_mj


def gpu_energy_j(job: JobData) -> tuple[float, str] | None:
    """The GPUs' energy over the job and how it was measured."""
    counters = [
        (s, m) for s in job.base_sensors("gpu.energy_mj") if (m := job.matrix(s)) is not None
    ]
    if counters:
        total_mj = 0.0
        for sensor, m in counters:
            power = job.matrix("gpu.power_w" + sensor[len("gpu.energy_mj") :])
            total_mj += counter_energy_mj(m, power, job.period_s)
        return total_mj / 1e3, (
            "NVML's energy counter (energy_mj) growth over the job, "
            "power_w x period before its first and after its last reading"
        )
    power = _sum(job, job.base_sensors("gpu.power_w"))
    if power is None:
        return None
    return float(np.nansum(power)) * job.period_s, "NVML power readings x period"


def _cpu_count(job: JobData, host: bool) -> int:
    suffix = ",scope=host]" if host else "]"
    return sum(
        1
        for s in job.base_sensors("cpu.user_pct")
        if _tags(s).get("cpu", "").startswith("cpu")
        and _tags(s).get("cpu") != "total"
        and s.endswith(suffix)
        and (host or "scope=" not in s)
    )


def job_share(job: JobData) -> tuple[np.ndarray | float, str]:
    """The job's share of each node-period's package energy, and the rule used."""
    usage = _sum(
        job,
        [
            s
            for s in job.base_sensors("cgroup.cpu_usage_pct")
            if _tags(s).get("job") in (None, job.job)
        ],
    )
    node_cpus_m = job.matrix("node_cgroup.cpus")
    node_cpus: np.ndarray | float | None = (
        node_cpus_m if node_cpus_m is not None else (_cpu_count(job, False) or None)
    )
    host_busy = job.matrix("cpu.host_busy_pct") if _package_measures_host(job) else None
    host_cpus = _cpu_count(job, True)
    if host_busy is None:
        host_busy, host_cpus = job.matrix("cpu.busy_pct"), 0
    machine_cpus: np.ndarray | float | None = host_cpus or node_cpus
    if usage is None or node_cpus is None or host_busy is None or machine_cpus is None:
        return 1.0, (
            "the node's whole energy (no job cgroup CPU time or CPU count to apportion by)"
        )
    with np.errstate(all="ignore"):
        share = np.clip(
            np.nan_to_num(usage * node_cpus / np.maximum(host_busy * machine_cpus, 1e-9)), 0, 1
        )
    return share, (
        "the job's cgroup CPU time over all CPU time used on the machine the package "
        "measures, per node and period (at most 1)"
        if host_cpus
        else "the job's cgroup CPU time over all CPU time used on the node the package "
        "measures, per node and period (at most 1)"
    )


def _package_measures_host(job: JobData) -> bool:
    """Whether the packages are the machine's (tagged scope=host by a node-scoped
    agent) rather than the node's own (the bed's simulated tree, or an agent
    that is not node-scoped, where node and machine are one)."""
    return any(_tags(s).get("scope") == "host" for s in job.base_sensors("rapl.power_w"))


def marks(job: JobData) -> list[str]:
    """Sources that are simulated or recorded, not this machine's hardware."""
    out = set()
    for prefix in ("rapl.power_w", "gpu.power_w", "gpu.energy_mj"):
        for s in job.base_sensors(prefix):
            backend = _tags(s).get("backend")
            if backend in ("sim", "fixture"):
                out.add(
                    f"{prefix.split('.')[0]} ({'simulated' if backend == 'sim' else 'fixture'})"
                )
    return sorted(out)


class Energy:
    name = "energy"
    title = "Energy to solution"
    requires: tuple[str, ...] = ()  # any of RAPL or GPU power: checked in analyze
    optional = (
        "rapl.power_w",
        "gpu.power_w",
        "gpu.energy_mj",
        "cgroup.cpu_usage_pct",
        "gpu.throttle_power",
        "bmc.power_w",
    )
    # what it needs (digest/resolution.py): power summed over nodes and periods
    resolution = ACROSS_NODES

    def metric(self, job: JobData, params: Mapping[str, Any]) -> float | None:
        """None: energy is not a limit, so compare has no influence to follow."""
        return None

    def _parts(
        self, job: JobData
    ) -> tuple[dict[str, float], dict[str, Any], np.ndarray | None] | None:
        package = rapl_power_w(job, "package")
        dram = rapl_power_w(job, "dram")
        gpu = gpu_energy_j(job)
        node = _sum(job, job.base_sensors("bmc.power_w"))  # a period without a reading: 0
        if package is None and dram is None and gpu is None and node is None:
            return None
        share, rule = job_share(job)
        parts: dict[str, float] = {}
        power = None
        if package is not None:
            parts["cpu_package"] = float(np.nansum(package * share)) * job.period_s
            power = package * share
        if dram is not None:
            parts["dram"] = float(np.nansum(dram * share)) * job.period_s
            power = dram * share if power is None else power + dram * share
        gpu_power = _sum(job, job.base_sensors("gpu.power_w"))
        if gpu is not None:
            parts["gpu"] = gpu[0]
            if gpu_power is not None:
                power = gpu_power if power is None else power + np.nan_to_num(gpu_power)
        info: dict[str, Any] = {"apportioned_by": rule}
        if gpu is not None:
            info["gpu_measured_by"] = gpu[1]
        if not isinstance(share, float):
            info["job_share_of_package_mean"] = round(float(np.mean(share)), 3)
        if node is not None:
            power = _node_part(job, node * share, parts, info, power)
        return parts, info, power

    def analyze(self, job: JobData, params: Mapping[str, Any]) -> list[Finding]:
        got = self._parts(job)
        if got is None:
            raise AnalyzerSkip(
                SkipReason.MISSING_SENSOR,
                "needs rapl.power_w (powercap), gpu.power_w / gpu.energy_mj (NVML) or "
                "bmc.power_w (the BMC)",
            )
        parts, evidence, power = got
        total_j = sum(parts.values())
        evidence["energy_kj"] = round(total_j / 1e3, 3)
        evidence["run_s"] = round(job.span_s, 1)
        for part, j in parts.items():
            evidence[f"{part}_kj"] = round(j / 1e3, 3)
            evidence[f"{part}_share"] = round(j / total_j, 3) if total_j > 0 else None
        over_time = ""
        if power is not None:
            per_period = np.nansum(power, axis=0)  # the job's power, all nodes
            evidence["power_w_mean"] = round(float(np.mean(per_period)), 1)
            evidence["power_w_max"] = round(float(np.max(per_period)), 1)
            slices = np.array_split(per_period, min(SLICES, per_period.size))
            evidence["power_w_by_tenth_of_run"] = [round(float(np.mean(s)), 1) for s in slices]
            over_time = (
                f"; its power averaged {evidence['power_w_mean']} W "
                f"(peak {evidence['power_w_max']} W)"
            )
        cap = self._power_cap(job, params, evidence)
        own = self._own_share(job, evidence)
        marked = marks(job)
        if marked:
            evidence["sources_not_this_hardware"] = ", ".join(marked)
        shares = ", ".join(
            f"{OTHER_LABEL if p == 'other' else p.replace('_', ' ')} {j / total_j:.0%}"
            for p, j in parts.items()
            if total_j > 0
        )
        by_bmc = (
            f" by its nodes' BMC ({evidence['parts_measured_kj']:.3g} kJ of it measured by "
            "the CPU, memory and GPU sensors)"
            if "other" in parts
            else " by its nodes' BMC (no CPU, memory or GPU energy sensors)"
            if "node" in parts
            else ""
        )
        hint = (
            f"The job used {total_j / 1e3:.3g} kJ{by_bmc} in {job.span_s:.0f} s ({shares})"
            f"{over_time}, "
            f"apportioned by {evidence['apportioned_by']}.{cap}{own}"
            + (f" Marked: {', '.join(marked)} -- not this machine's hardware." if marked else "")
        )
        return [
            Finding(
                self.name,
                self.title,
                "info",
                evidence,
                hint,
                loss_unknown="energy is reported, not a limit on the run time",
            )
        ]

    def _power_cap(self, job: JobData, params: Mapping[str, Any], evidence: dict[str, Any]) -> str:
        throttled = job.matrix("gpu.throttle_power")
        if throttled is None:
            names = job.base_sensors("gpu.throttle_power")
            mats = [m for m in (job.matrix(s) for s in names) if m is not None]
            throttled = np.nanmax(np.stack(mats), axis=0) if mats else None
        if throttled is None or not np.isfinite(throttled).any():
            evidence["power_cap"] = (
                "GPUs: not visible (no GPU throttle reasons); CPUs: the power_cap finding"
            )
            return ""
        share = float(np.nanmean(throttled > 0))
        evidence["gpu_power_capped_share"] = round(share, 3)
        if share >= params["power_cap_share"]:
            return f" A GPU's power cap throttled its clocks in {share:.0%} of the periods."
        return ""

    def _own_share(self, job: JobData, evidence: dict[str, Any]) -> str:
        """hushmon's agents' CPU time priced at the package's energy per busy
        CPU-second, per node and period (the rule: see ``own_energy_j``)."""
        got = own_energy_j(job)
        if isinstance(got, str):
            evidence["hushmon_energy"] = got
            return ""
        agent_j, agent_s, package_j, j_per_cpu_s = got
        evidence["hushmon_cpu_s"] = round(agent_s, 4)
        evidence["package_j_per_busy_cpu_s"] = round(j_per_cpu_s, 2)
        evidence["hushmon_energy_j"] = round(agent_j, 3)
        evidence["hushmon_share_of_package"] = round(agent_j / package_j, 6)
        evidence["hushmon_energy_rule"] = OWN_ENERGY_RULE
        return (
            f" hushmon's agents used {agent_j:.3g} J of the packages' {package_j / 1e3:.3g} kJ "
            f"({agent_j / package_j:.3%}): their {agent_s:.3g} CPU-s, each node-period's "
            f"priced at that period's package energy per busy CPU-second (mean "
            f"{j_per_cpu_s:.3g} J per CPU-second)."
        )


OTHER_LABEL = "other (fans, disks, NICs, supply loss)"


def _node_part(
    job: JobData,
    node: np.ndarray,
    parts: dict[str, float],
    info: dict[str, Any],
    power: np.ndarray | None,
) -> np.ndarray | None:
    """The BMC's node energy (``node``: the job's share of its power, nodes x
    periods): the part ``other`` = node - the parts measured, and the job's
    power over time from the BMC. A node reading below its parts (a BMC
    meter that lags the load, or one on part of the machine) leaves the
    parts as they are, said in the evidence. Returns the job's power."""
    node_j = float(np.nansum(node)) * job.period_s
    measured_j = sum(parts.values())
    info["node_bmc_kj"] = round(node_j / 1e3, 3)
    info["parts_measured_kj"] = round(measured_j / 1e3, 3)
    read = [m for m in (job.matrix(s) for s in job.base_sensors("bmc.power_w")) if m is not None]
    covered = np.any(np.isfinite(np.stack(read)), axis=0)
    info["node_periods_with_bmc_reading"] = round(float(np.mean(covered)), 3)
    if node_j < measured_j:
        info["node_below_parts"] = (
            "the BMC's node energy is below CPU + DRAM + GPU: other not computed, energy "
            "to solution from the parts"
        )
        return power
    # Without CPU, memory or GPU sensors the node's energy is one part, not "other".
    parts["other" if parts else "node"] = node_j - measured_j
    return node


OWN_ENERGY_RULE = (
    "per node and period: the agent's CPU-seconds x the package's energy / the CPU-seconds "
    "used (busy) on what the package measures (the machine, or the node for a node-own "
    "tree), so idle power is charged to the CPU time that ran; periods where that is not "
    "known take the node's ratio over the job"
)


def _package_busy_cpus(job: JobData) -> np.ndarray | None:
    """Nodes x periods: the CPUs' worth used (busy) on what the package measures."""
    if _package_measures_host(job):
        busy, cpus = job.matrix("cpu.host_busy_pct"), _cpu_count(job, True)
        if busy is not None and cpus:
            return busy / 100 * cpus
    busy = job.matrix("cpu.busy_pct")
    node_cpus = job.matrix("node_cgroup.cpus")
    cpus_n: np.ndarray | float = node_cpus if node_cpus is not None else _cpu_count(job, False)
    if busy is None or (isinstance(cpus_n, int | float) and cpus_n == 0):
        return None
    return busy / 100 * cpus_n


def own_energy_j(job: JobData) -> tuple[float, float, float, float] | str:
    """hushmon's own energy, J (:data:`OWN_ENERGY_RULE`): (agents' J, their CPU-s, the
    packages' J, the mean J per busy CPU-second weighted by the agents' CPU time), or
    why it is not known."""
    agent = agent_cpu_s_by_period(job)
    package = rapl_power_w(job, "package")
    busy_cpus = _package_busy_cpus(job)
    if agent is None or package is None or busy_cpus is None:
        return (
            "not known: needs the agents' CPU time (hushmon_agent.cpu_us), RAPL package "
            "energy and the CPU time used on what the package measures, with its CPU count"
        )
    if agent.shape != package.shape:
        # a view of the job (a phase's slice) that did not slice the attachment with it
        return "not known: the agents' CPU time is not on this view's nodes and periods"
    package_j = float(np.nansum(package)) * job.period_s
    with np.errstate(all="ignore"):
        # W / busy CPUs = J per busy CPU-second (the period's length cancels)
        ratio = np.where(busy_cpus > 1e-6, package / busy_cpus, np.nan)
        node_ratio = np.nansum(package, axis=1) / np.nansum(
            np.where(np.isfinite(package), busy_cpus, np.nan), axis=1
        )
    ratio = np.where(np.isfinite(ratio), ratio, node_ratio[:, None])
    priced = np.isfinite(ratio) & (agent > 0)
    agent_s = float(agent[priced].sum())
    if package_j <= 0 or agent_s <= 0:
        return "not known: no package energy, or no agent CPU time in periods that can be priced"
    agent_j = float((agent[priced] * ratio[priced]).sum())
    return agent_j, agent_s, package_j, agent_j / agent_s


FACTOR = Energy()


def job_energy_j(job: JobData) -> float | None:
    """The job's energy to solution, J (the energy finding's total; None: no source):
    compare's energy per unit of work."""
    parts = FACTOR._parts(job)
    return None if parts is None else sum(parts[0].values())
