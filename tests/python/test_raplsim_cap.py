"""The test bed's simulated RAPL package has power limits like a real zone's
(raplsim.py): by default a PL1 it never reaches; a lower limit written into
its constraint file, as root writes one on hardware, holds the simulated
package's power at it, and the real agent reads the limit from the tree."""

from __future__ import annotations

import time
from pathlib import Path

from agentproc import run_agent
from hushmon.testbed import raplsim
from test_agent_once import parse_lines


def _sim(tmp: Path) -> tuple[raplsim.RaplSim, Path, Path]:
    usage = tmp / "cpuacct.usage"
    usage.write_text("0\n")
    sim = raplsim.RaplSim(tmp / "sys", (usage, "ns"), cpus=2)
    return sim, usage, tmp / "sys" / "class" / "powercap" / "intel-rapl:0"


def _energy_j(zone: Path) -> float:
    return int((zone / "energy_uj").read_text()) / 1e6


def _busy_period(sim: raplsim.RaplSim, usage: Path, zone: Path, cpu_s: float) -> float:
    """Mean package power over a period in which the node used 2 CPUs."""
    e0, t0 = _energy_j(zone), sim.last_mono_s
    used = int(usage.read_text()) / 1e9
    time.sleep(0.2)
    usage.write_text(f"{int((used + cpu_s) * 1e9)}\n")
    sim.update()
    return (_energy_j(zone) - e0) / (sim.last_mono_s - t0)


def test_default_limit_is_never_reached(tmp_path: Path) -> None:
    sim, usage, zone = _sim(tmp_path)
    assert (zone / "constraint_0_name").read_text() == "long_term\n"
    assert (zone / "constraint_1_name").read_text() == "short_term\n"
    assert (zone / "enabled").read_text() == "1\n"
    pl1_w = raplsim.read_limit_w(zone)
    assert pl1_w == raplsim.default_limit_w(2) == 2 * (20 + 2 * 12)
    pl2_uw = int((zone / "constraint_1_power_limit_uw").read_text())
    assert pl2_uw == int(pl1_w * 1.25 * 1e6)
    # at most 2 busy CPUs (a sleep of 0.2 s cannot hold more than 0.4 CPU-s of 2 CPUs)
    power_w = _busy_period(sim, usage, zone, 0.4)
    assert 20 < power_w <= raplsim.zone_power_w("package", 2) + 1e-6 < pl1_w


def test_a_written_limit_holds_the_package_at_it(tmp_path: Path) -> None:
    sim, usage, zone = _sim(tmp_path)
    (zone / "constraint_0_power_limit_uw").write_text("25000000\n")
    # 4 CPU-s in a period of 0.2 s (up to a few s on a loaded machine): the
    # model asks 20 + 12 x 4 / period W, over 30 W while the period is under 4.8 s
    power_w = _busy_period(sim, usage, zone, 4.0)
    assert 24.9 < power_w <= 25.0 + 1e-6
    (zone / "enabled").write_text("0\n")  # the limit off again: the model's power
    assert _busy_period(sim, usage, zone, 4.0) > 30


def test_the_agent_reads_the_simulated_limit(bin_dir: Path, tmp_path: Path) -> None:
    sim, _usage, zone = _sim(tmp_path)
    (zone / "constraint_0_power_limit_uw").write_text("25000000\n")
    sim.update()
    proc = run_agent(
        bin_dir,
        "--once",
        "--sink",
        "stdout",
        "--sources",
        "rapl",
        "--rapl-sysfs-root",
        str(tmp_path / "sys"),
    )
    assert proc.returncode == 0, proc.stderr
    package = [
        x for x in parse_lines(proc.stdout) if x.m == "rapl" and x.tags["domain"] == "package-0"
    ]
    assert len(package) == 1, proc.stdout
    line = package[0]
    assert line.tags["backend"] == "sim"
    assert line.fields["long_term_limit_w"] == 25.0
    assert line.fields["short_term_limit_w"] == raplsim.default_limit_w(2) * 1.25
    assert line.fields["limits_enabled"] == 1
    assert line.fields["long_term_window_s"] > 0.99
