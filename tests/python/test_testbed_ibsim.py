"""The bed's InfiniBand-like counters (python/hushmon/testbed/ibsim.py) off
the bed: the qdisc and link readings they are made of, and the real process
on this machine's loopback read by the real agent through --ib-sysfs-root
(lines tagged backend=sim). The bed itself: tests/testbed/test_bed_ib_counters.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hushmon.testbed import ibsim

IBSIM = [sys.executable, "-m", "hushmon.testbed.ibsim"]
TBF_1MBIT = ["rate", "1mbit", "burst", "1600", "latency", "1ms"]

# tc -s -j qdisc show on a bed link with a delay: netem at the root, tbf below.
TC_NETEM_TBF = (
    '[{"kind":"netem","handle":"1:","root":true,"drops":0,"overlimits":0,"backlog":0},'
    '{"kind":"tbf","handle":"10:","parent":"1:1","drops":7,"overlimits":1234,"backlog":3000}]'
)
NET_DEV = (
    "Inter-|   Receive                            |  Transmit\n"
    " face |bytes packets errs drop fifo frame compressed multicast"
    "|bytes packets errs drop fifo colls carrier compressed\n"
    "    lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n"
    "  eth0: 4000000 3000 5 0 0 0 0 0 8000000 6000 0 2 0 0 0 0\n"
)


def test_the_shaping_qdisc_is_the_tbf_under_a_netem() -> None:
    q = ibsim.parse_qdiscs(TC_NETEM_TBF)
    assert (q.drops, q.overlimits) == (7, 1234)
    root_only = '[{"kind":"tbf","root":true,"drops":1,"overlimits":2}]'
    assert ibsim.parse_qdiscs(root_only).overlimits == 2
    assert ibsim.parse_qdiscs("[]").overlimits == 0


def test_counters_count_words_from_zero_at_start() -> None:
    link = ibsim.read_link("eth0", NET_DEV)
    assert (link.rx_bytes, link.tx_bytes, link.tx_drops, link.rx_errors) == (
        4000000,
        8000000,
        2,
        5,
    )
    base = ibsim.LinkStats(rx_bytes=1000000, tx_bytes=2000000, tx_packets=1000)
    qbase = ibsim.QdiscStats(drops=1, overlimits=34)
    v = ibsim.counter_values(base, link, qbase, ibsim.parse_qdiscs(TC_NETEM_TBF))
    assert v["port_xmit_data"] == 6000000 // 4 and v["port_rcv_data"] == 3000000 // 4
    assert v["port_xmit_packets"] == 5000
    assert v["port_xmit_wait"] == 1200  # overlimits since start
    assert v["port_xmit_discards"] == 6 + 2  # qdisc drops + link tx drops
    assert v["port_rcv_errors"] == 5 and v["link_downed"] == 0


def test_no_such_interface_is_one_line() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "hushmon.testbed.ibsim",
            "--dir",
            "/nonexistent",
            "--iface",
            "nope0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == ["ibsim: no interface nope0 in /proc/net/dev"]
    bad = subprocess.run(
        [*IBSIM, "--dir", "/x", "--interval-ms", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def _value(path: Path) -> int:
    text = path.read_text()
    assert len(text) == ibsim.WIDTH + 1  # rewritten in place, never shorter
    return int(text)


def test_loopback_tree_is_read_by_the_agent_as_simulated(tmp_path: Path, bin_dir: Path) -> None:
    root = tmp_path / "ibsys"
    proc = subprocess.Popen(
        [*IBSIM, "--dir", str(root), "--iface", "lo", "--interval-ms", "20"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        counters = ibsim.counters_dir(root)
        deadline = time.monotonic() + 15
        while not (counters / ibsim.COUNTERS[-1]).exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = _value(counters / "port_xmit_data")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _ in range(50):
                s.sendto(b"\0" * 1000, ("127.0.0.1", 9))  # discard port: nobody listens
        deadline = time.monotonic() + 10
        while _value(counters / "port_xmit_data") < before + 50 * 1000 // 4:
            assert time.monotonic() < deadline, "port_xmit_data did not follow lo's bytes"
            time.sleep(0.05)
        agent = subprocess.run(
            [
                str(bin_dir / "hushmon-agent"),
                "--once",
                "--sink",
                "stdout",
                "--sources",
                "ib",
                "--ib-sysfs-root",
                str(root),
                "--host",
                "n1",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert agent.returncode == 0, agent.stderr
        lines = [line for line in agent.stdout.splitlines() if line.startswith("ib,")]
        assert lines and lines[0].startswith("ib,host=n1,device=simib0,port=1,backend=sim ")
        assert "xmit_wait_per_s=" in lines[0] and "tx_bytes_per_s=" in lines[0]
        assert "simulated" in (root / "class/infiniband/simib0/hushmon_sim").read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace with a tbf needs root")
def test_netlink_reads_the_tbf_counters_tc_shows() -> None:
    """A tbf on the loopback of a scratch namespace, flooded past its rate:
    the rtnetlink dump gives the drops and overlimits that tc prints."""
    # Not the bed's "hm-" prefix: a bed going down on another worker removes
    # every namespace named so (testbed.network.destroy), this one with them.
    ns = f"hushmon-ibsim-test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        run = ["ip", "netns", "exec", ns]
        subprocess.run([*run, "ip", "link", "set", "lo", "up"], check=True)
        subprocess.run(
            [*run, "tc", "qdisc", "add", "dev", "lo", "root", "tbf", *TBF_1MBIT],
            check=True,
        )
        flood = (
            "import socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for _ in range(300): s.sendto(b'x' * 1000, ('127.0.0.1', 9))\n"
            "from hushmon.testbed import ibsim\n"
            "print(ibsim.read_qdisc('lo'))\n"
        )
        ours = subprocess.run([*run, sys.executable, "-c", flood], capture_output=True, text=True)
        assert ours.returncode == 0, ours.stderr
        tc = subprocess.run(
            [*run, "tc", "-s", "-j", "qdisc", "show", "dev", "lo"], capture_output=True, text=True
        )
        assert tc.returncode == 0, tc.stderr
        expected = ibsim.parse_qdiscs(tc.stdout)
        assert expected.drops > 0 and expected.overlimits > 0
        assert ours.stdout.strip() == repr(expected)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
