"""RAPL-like energy counters for each bed node, simulated from the CPU time
of the node's cgroup, so the agent's ``rapl`` source and the digest's
energy finding run end to end on the bed (this VM has no powercap driver,
as most VMs do not).

The tree is written by the node's ibsim process (python/hushmon/testbed/
ibsim.py drives :class:`RaplSim` every update) under the node's agent
folder::

    /run/hushmon/raplsys/class/powercap/intel-rapl:0/     package-0
    /run/hushmon/raplsys/class/powercap/intel-rapl:0:0/   dram
        name  energy_uj  max_energy_range_uj  hushmon_sim

The agent reads it with ``--rapl-sysfs-root /run/hushmon/raplsys``; the
``hushmon_sim`` file in each zone makes it tag the lines ``backend=sim``,
and the report says the energy is simulated.

The model is linear in the node's busy CPUs (its cgroup's CPU seconds per
second, ``busy``): package ``PACKAGE_IDLE_W + PACKAGE_PER_CPU_W x busy``,
DRAM ``DRAM_IDLE_W + DRAM_PER_CPU_W x busy``: the shape of a server
socket's power (a floor, then about linear in active cores), not any
machine's figures. It says which jobs use more CPU, and so more energy;
it cannot show memory-bound code drawing DRAM power, or a power cap.
Counters are microjoules, wrap at ``RANGE_UJ`` like the hardware's, and
are written in place, right-aligned, as ibsim's are.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PACKAGE_IDLE_W = 20.0
PACKAGE_PER_CPU_W = 12.0
DRAM_IDLE_W = 4.0
DRAM_PER_CPU_W = 1.5
RANGE_UJ = 262_143_328_850  # a common max_energy_range_uj
WIDTH = 20
ZONES = (("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "dram"))
CGROUP_MOUNT = Path("/sys/fs/cgroup")


def zone_power_w(domain: str, busy_cpus: float) -> float:
    if domain == "dram":
        return DRAM_IDLE_W + DRAM_PER_CPU_W * busy_cpus
    return PACKAGE_IDLE_W + PACKAGE_PER_CPU_W * busy_cpus


def own_cpu_file(proc_self_cgroup: str, mount: Path = CGROUP_MOUNT) -> tuple[Path, str] | None:
    """This process's cgroup CPU counter: (file, kind) with kind "usage_usec"
    (v2 cpu.stat, also the v2 hierarchy mounted beside v1 at ``unified``)
    or "ns" (v1 cpuacct.usage)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in proc_self_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2].lstrip("/")
        for ctrl in parts[1].split(","):
            v1[ctrl] = parts[2].lstrip("/")
    if v2 is not None:
        for base in (mount, mount / "unified"):
            stat = base / v2 / "cpu.stat"
            if (base / "cgroup.controllers").is_file() and stat.is_file():
                return stat, "usage_usec"
    if "cpuacct" in v1:
        for d in ("cpuacct", "cpu,cpuacct", "cpuacct,cpu"):
            usage = mount / d / v1["cpuacct"] / "cpuacct.usage"
            if usage.is_file():
                return usage, "ns"
    return None


def read_cpu_s(path: Path, kind: str) -> float:
    text = path.read_text()
    if kind == "ns":
        return int(text.split()[0]) / 1e9
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise LookupError(f"no usage_usec in {path}")


class RaplSim:
    """The zones' files, made once; ``update`` adds the energy since the last call."""

    def __init__(self, sysfs_root: Path, cpu: tuple[Path, str]) -> None:
        base = sysfs_root / "class" / "powercap"
        self.cpu = cpu
        self.fds: dict[str, int] = {}
        self.energy_uj = {domain: 0.0 for _, domain in ZONES}
        for zone, domain in ZONES:
            d = base / zone
            d.mkdir(parents=True, exist_ok=True)
            (d / "name").write_text(domain + "\n")
            (d / "max_energy_range_uj").write_text(f"{RANGE_UJ}\n")
            idle_w = zone_power_w(domain, 0)
            per_cpu_w = zone_power_w(domain, 1) - idle_w
            (d / "hushmon_sim").write_text(
                f"simulated by hushmon testbed from the node's cgroup CPU time ({cpu[0]}): "
                f"{idle_w:g} W + {per_cpu_w:g} W per busy CPU (python/hushmon/testbed/raplsim.py)\n"
            )
            self.fds[domain] = os.open(d / "energy_uj", os.O_RDWR | os.O_CREAT, 0o644)
            self._write(domain)
        self.last_mono_s = time.monotonic()
        self.last_cpu_s = read_cpu_s(*cpu)

    def _write(self, domain: str) -> None:
        value = int(self.energy_uj[domain]) % RANGE_UJ
        os.pwrite(self.fds[domain], f"{value:>{WIDTH}}\n".encode(), 0)

    def update(self) -> None:
        now = time.monotonic()
        cpu_s = read_cpu_s(*self.cpu)
        dt = now - self.last_mono_s
        if dt <= 0:
            return
        busy = max(cpu_s - self.last_cpu_s, 0.0) / dt
        for _, domain in ZONES:
            self.energy_uj[domain] += zone_power_w(domain, busy) * dt * 1e6
            self._write(domain)
        self.last_mono_s, self.last_cpu_s = now, cpu_s


def start(sysfs_root: Path) -> RaplSim | None:
    """The node's simulated zones, or None where its cgroup's CPU time cannot be read."""
    cpu = own_cpu_file(Path("/proc/self/cgroup").read_text())
    return None if cpu is None else RaplSim(sysfs_root, cpu)
