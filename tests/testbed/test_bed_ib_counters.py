"""The bed's InfiniBand-like counters end to end: each node's counter tree,
simulated from its shaped link (python/hushmon/testbed/ibsim.py), read by
the node's agent through --ib-sysfs-root; a transfer that fills n1's link
shows as ib traffic at the link's rate with port_xmit_wait ticking (the
tbf holding packets back), tagged backend=sim; an idle link does not tick.

A bed of its own (2 nodes, 1 rack, a 40 Mbit/s link, no Slurm): run under
the bed lock (flock /tmp/hushmon-bed.lock)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bedlib import LiveBed, bed_unavailable, bed_up
from waiting import wait_until

THROUGHPUT = Path(__file__).with_name("tcp_throughput.py")
LINK_BITS = 40e6


@pytest.fixture(scope="module")
def ib_bed() -> Iterator[LiveBed]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    options = ("--nodes", "2", "--racks", "1", "--link-rate", "40mbit", "--no-slurm")
    with bed_up(*options, "--period-ms", "500") as (info, data):
        yield LiveBed(info, data)


def _ib_lines(data: Path, node: str) -> list[tuple[int, dict[str, float], str]]:
    """(timestamp, fields, tags) of the node's ib lines in its spool."""
    found = []
    for path in sorted((data / "spool" / node).glob("*.lp*")):
        try:
            text = path.read_text(errors="replace")
        except FileNotFoundError:  # an open file closed (renamed) meanwhile
            continue
        # whole lines only: the agent may be writing the last one
        for line in text[: text.rfind("\n") + 1].splitlines():
            if not line.startswith("ib,"):
                continue
            tags, fields, ts = line.split(" ")
            values = {}
            for item in fields.split(","):
                key, value = item.split("=")
                values[key] = float(value.rstrip("i"))
            found.append((int(ts), values, tags))
    return found


def _send(bed: LiveBed, sender: str, receiver: str, address: str, seconds: float) -> float:
    server = subprocess.Popen(
        [
            bed.info["node_exec"],
            receiver,
            sys.executable,
            str(THROUGHPUT),
            "serve",
            address,
            "5202",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        out = bed.node_exec(
            sender, sys.executable, str(THROUGHPUT), "send", address, "5202", str(seconds)
        )
        assert out.returncode == 0, out.stderr
        return float(out.stdout)
    finally:
        server.wait(timeout=30)


def test_a_full_link_shows_as_simulated_ib_traffic_with_xmit_wait(ib_bed: LiveBed) -> None:
    # quiet periods first: the agents' first rates, then a period more so
    # that one lies well before the transfer (a loaded machine's agents may
    # take longer than the 2 s they take alone)
    wait_until(
        lambda: any("tx_bytes_per_s" in f for _, f, _ in _ib_lines(ib_bed.data, "n1")),
        "n1's first ib rates",
    )
    time.sleep(1.0)
    start_ns = time.time_ns()
    rate_bits = _send(ib_bed, "n1", "n2", "10.77.1.2", 3.0)
    end_ns = time.time_ns()

    # the periods after the transfer reach the spool (2.5 s alone)
    def after_the_transfer(node: str) -> bool:
        return any(ts > end_ns for ts, _, _ in _ib_lines(ib_bed.data, node))

    wait_until(lambda: after_the_transfer("n1") and after_the_transfer("n2"), "later periods")
    assert 0.5 * LINK_BITS < rate_bits < 1.15 * LINK_BITS
    lines = _ib_lines(ib_bed.data, "n1")
    assert lines, "no ib lines from n1's agent"
    assert all(",device=simib0,port=1,backend=sim" in tags for _, _, tags in lines)
    during = [f for ts, f, _ in lines if start_ns + 1e9 <= ts <= end_ns]
    quiet = [f for ts, f, _ in lines if ts < start_ns - 0.5e9 and "tx_bytes_per_s" in f]
    assert during, "no ib line during the transfer"
    busiest = max(during, key=lambda f: f.get("tx_bytes_per_s", 0.0))
    # The link's rate in bytes (TCP payload plus headers, measured as IB words).
    assert 0.5 * LINK_BITS / 8 < busiest["tx_bytes_per_s"] < 1.2 * LINK_BITS / 8
    assert max(f.get("xmit_wait_per_s", 0.0) for f in during) > 0
    assert quiet and all(f["xmit_wait_per_s"] == 0 for f in quiet)
    # The receiver's port counts what n1 sent.
    received = [f for ts, f, _ in _ib_lines(ib_bed.data, "n2") if start_ns + 1e9 <= ts <= end_ns]
    assert max(f.get("rx_bytes_per_s", 0.0) for f in received) > 0.5 * LINK_BITS / 8
