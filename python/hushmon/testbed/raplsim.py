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
it cannot show memory-bound code drawing DRAM power.
Counters are microjoules, wrap at ``RANGE_UJ`` like the hardware's, and
are written in place, right-aligned, as ibsim's are.

Power limits: the package zone has the driver's constraint files
(``constraint_0`` long_term = PL1, ``constraint_1`` short_term = PL2) and
``enabled``, as a real zone does. By default PL1 is twice what the model
can draw on this machine (never reached) and enabled. Writing a lower
``constraint_0_power_limit_uw`` (as root writes one on real hardware, e.g.
a site's power cap) makes the simulated package hold its power at that
limit while ``enabled`` is 1: the model's power is clipped to it, which is
what the agent and the digest's ``power_cap`` factor then see. The job is
not slowed (a simulation cannot lower the CPUs' clock): only the power
shows the cap.
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
LONG_TERM_WINDOW_US = 999_424  # a common PL1 time window (~1 s)
SHORT_TERM_WINDOW_US = 2_440
PL2_OVER_PL1 = 1.25
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


def default_limit_w(cpus: int) -> float:
    """The package's PL1 by default: twice the model's most on ``cpus`` CPUs."""
    return 2 * zone_power_w("package", cpus)


def read_limit_w(zone_dir: Path) -> float | None:
    """The enabled long-term limit in W written in the zone's files, None when
    not enabled or unreadable."""
    try:
        enabled = (zone_dir / "enabled").read_text().strip() == "1"
        limit_uw = int((zone_dir / "constraint_0_power_limit_uw").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return limit_uw / 1e6 if enabled and limit_uw > 0 else None


class RaplSim:
    """The zones' files, made once; ``update`` adds the energy since the last call."""

    def __init__(self, sysfs_root: Path, cpu: tuple[Path, str], cpus: int | None = None) -> None:
        base = sysfs_root / "class" / "powercap"
        self.cpu = cpu
        self.package_dir = base / ZONES[0][0]
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
        pl1_w = default_limit_w(cpus or os.cpu_count() or 1)
        for i, (name, watts, window_us) in enumerate(
            (
                ("long_term", pl1_w, LONG_TERM_WINDOW_US),
                ("short_term", pl1_w * PL2_OVER_PL1, SHORT_TERM_WINDOW_US),
            )
        ):
            (self.package_dir / f"constraint_{i}_name").write_text(name + "\n")
            (self.package_dir / f"constraint_{i}_power_limit_uw").write_text(
                f"{int(watts * 1e6)}\n"
            )
            (self.package_dir / f"constraint_{i}_time_window_us").write_text(f"{window_us}\n")
        (self.package_dir / "enabled").write_text("1\n")
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
        limit_w = read_limit_w(self.package_dir)  # written by root at any time, as on hardware
        for _, domain in ZONES:
            power_w = zone_power_w(domain, busy)
            if domain.startswith("package") and limit_w is not None:
                power_w = min(power_w, limit_w)
            self.energy_uj[domain] += power_w * dt * 1e6
            self._write(domain)
        self.last_mono_s, self.last_cpu_s = now, cpu_s


def start(sysfs_root: Path) -> RaplSim | None:
    """The node's simulated zones, or None where its cgroup's CPU time cannot be read."""
    cpu = own_cpu_file(Path("/proc/self/cgroup").read_text())
    return None if cpu is None else RaplSim(sysfs_root, cpu)
