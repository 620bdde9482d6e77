"""The bed's simulated counters off the bed: the rack uplink's waits shared
out over the nodes that fed it (python/hushmon/testbed/ibsim.py) and the
RAPL-like energy made from a cgroup's CPU time (raplsim.py), written as the
agent reads them. On the bed: tests/testbed/test_testbed_live.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hushmon.testbed import ibsim, raplsim


def test_uplink_waits_go_to_the_ports_that_sent_in_proportion() -> None:
    last = {"p1": 1000, "p2": 5000, "p3": 0}
    now = {"p1": 4000, "p2": 6000, "p3": 0}  # p1 sent 3000, p2 1000, p3 nothing
    assert ibsim.uplink_share(400, now, last, "p1") == pytest.approx(300)
    assert ibsim.uplink_share(400, now, last, "p2") == pytest.approx(100)
    assert ibsim.uplink_share(400, now, last, "p3") == 0
    assert ibsim.uplink_share(0, now, last, "p1") == 0  # no queueing: no waits
    assert ibsim.uplink_share(400, last, last, "p1") == 0  # nobody sent
    base = ibsim.LinkStats()
    q = ibsim.QdiscStats(overlimits=5)
    v = ibsim.counter_values(base, base, ibsim.QdiscStats(), q, uplink_wait=300)
    assert v["port_xmit_wait"] == 305  # own link's throttling + the uplink's share


def test_the_cpu_counter_is_found_for_v2_beside_v1_and_v1(tmp_path: Path) -> None:
    mount = tmp_path / "cgroup"
    unified = mount / "unified"
    (unified / "hushmon-testbed" / "n1").mkdir(parents=True)
    (unified / "cgroup.controllers").write_text("")
    stat = unified / "hushmon-testbed" / "n1" / "cpu.stat"
    stat.write_text("usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n")
    own = "4:memory:/x/hushmon-testbed/n1\n2:cpuacct:/hushmon-testbed/n1\n0::/hushmon-testbed/n1\n"
    found = raplsim.own_cpu_file(own, mount)
    assert found == (stat, "usage_usec") and raplsim.read_cpu_s(*found) == 2.5
    stat.unlink()  # no v2 counter: v1's cpuacct.usage
    usage = mount / "cpuacct" / "hushmon-testbed" / "n1" / "cpuacct.usage"
    usage.parent.mkdir(parents=True)
    usage.write_text("7000000000\n")
    found = raplsim.own_cpu_file(own, mount)
    assert found == (usage, "ns") and raplsim.read_cpu_s(*found) == 7.0
    assert raplsim.own_cpu_file("0::/elsewhere\n", mount) is None


def test_energy_grows_with_the_cpu_time_and_is_marked_simulated(tmp_path: Path) -> None:
    usage = tmp_path / "cpuacct.usage"
    usage.write_text("0\n")
    before = time.monotonic()
    sim = raplsim.RaplSim(tmp_path / "sys", (usage, "ns"))
    zone = tmp_path / "sys" / "class" / "powercap" / "intel-rapl:0"
    assert (zone / "name").read_text() == "package-0\n"
    assert "simulated" in (zone / "hushmon_sim").read_text()
    assert (tmp_path / "sys/class/powercap/intel-rapl:0:0/hushmon_sim").is_file()
    time.sleep(0.2)
    usage.write_text("400000000\n")  # 0.4 CPU-s used meanwhile
    sim.update()
    most_s = time.monotonic() - before
    energy_j = int((zone / "energy_uj").read_text()) / 1e6
    # known answer: idle W x the time + 12 W x 0.4 CPU-s, the time between 0.2 s and most_s
    busy_j = (raplsim.zone_power_w("package", 1) - raplsim.PACKAGE_IDLE_W) * 0.4
    assert raplsim.PACKAGE_IDLE_W * 0.2 + busy_j - 1e-6 <= energy_j
    assert energy_j <= raplsim.PACKAGE_IDLE_W * most_s + busy_j + 1e-6
