"""InfiniBand-like port counters for each bed node, simulated from its
shaped Ethernet link, so that the agent's `ib` source, and the network and
topology findings that use it, run end to end on the bed.

One small process per node runs inside the node (its network namespace,
where the node's ``eth0`` and the tc qdisc that shapes it live) and keeps a
tree like the kernel's under the node's agent folder::

    /run/hushmon/ibsys/class/infiniband/simib0/
        hushmon_sim                   what it is simulated from
        ports/1/counters/port_xmit_data ...

The agent reads it with ``--ib-sysfs-root /run/hushmon/ibsys``; the
``hushmon_sim`` file makes it tag the lines ``backend=sim``, so a report
can say the fabric counters are simulated from the bed's links.

What each counter is made of (all counting up from 0 at start):

- ``port_xmit_data`` / ``port_rcv_data``: the link's bytes sent / received
  (``/proc/net/dev``) in 4-byte words, as InfiniBand counts them;
  ``port_xmit_packets`` / ``port_rcv_packets``: its packets.
- ``port_xmit_wait``: the shaping qdisc's ``overlimits`` (tbf counts one
  each time it had a packet queued and no tokens to send it): the moments
  the link had data to send and was held back, as an InfiniBand port
  counts ticks with data and no credits. Its unit is therefore "throttle
  events", not the HCA's tick; like on real hardware, read it against the
  same port's quiet baseline or its data rate.
- ``port_xmit_discards``: the qdisc's drops plus the link's tx drops;
  ``port_rcv_errors``: the link's rx errors; ``symbol_error``,
  ``link_downed``, ``link_error_recovery``: 0 (a veth has no physical
  layer).

Values are written in place, right-aligned in a fixed width (the agent
keeps each file open and re-reads it from offset 0, as it does sysfs; a
truncate-and-write would show it an empty file now and then). Data and
packets every ``--interval-ms`` (default 100: a 1 s agent period is off by
at most a tenth); the qdisc's counters every ``--qdisc-every`` intervals
(default 1), by one rtnetlink dump (``tc -s -j qdisc show`` where
rtnetlink fails).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hushmon.errors import HushmonError

if TYPE_CHECKING:
    from hushmon.testbed.state import Bed

DEVICE = "simib0"
START_TIMEOUT_S = 15.0
PORT = "1"
WIDTH = 20  # digits: a 64-bit counter
COUNTERS = (
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "port_xmit_wait",
    "port_xmit_discards",
    "port_rcv_errors",
    "symbol_error",
    "link_downed",
    "link_error_recovery",
)


@dataclass
class LinkStats:
    rx_bytes: int = 0
    rx_packets: int = 0
    rx_errors: int = 0
    tx_bytes: int = 0
    tx_packets: int = 0
    tx_drops: int = 0


@dataclass
class QdiscStats:
    drops: int = 0
    overlimits: int = 0


def counters_dir(sysfs_root: Path) -> Path:
    return sysfs_root / "class" / "infiniband" / DEVICE / "ports" / PORT / "counters"


def read_link(iface: str, text: str | None = None) -> LinkStats:
    """The interface's line of /proc/net/dev (this process's namespace)."""
    if text is None:
        text = Path("/proc/net/dev").read_text()
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        if sep and name.strip() == iface:
            v = [int(x) for x in rest.split()]
            return LinkStats(
                rx_bytes=v[0],
                rx_packets=v[1],
                rx_errors=v[2],
                tx_bytes=v[8],
                tx_packets=v[9],
                tx_drops=v[11],
            )
    raise LookupError(f"no interface {iface} in /proc/net/dev")


def parse_qdiscs(doc: str) -> QdiscStats:
    """drops and overlimits of the shaping qdisc in ``tc -s -j qdisc show``:
    the tbf where there is one (under a netem that delays), else the root."""
    qdiscs = json.loads(doc or "[]")
    shaping = [q for q in qdiscs if q.get("kind") == "tbf"] or qdiscs[:1]
    if not shaping:
        return QdiscStats()
    q = shaping[0]
    return QdiscStats(drops=int(q.get("drops", 0)), overlimits=int(q.get("overlimits", 0)))


RTM_NEWQDISC, RTM_GETQDISC = 36, 38
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCA_KIND, TCA_STATS2 = 1, 7
TCA_STATS_QUEUE = 3


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each netlink attribute in data."""
    off = 0
    while off + 4 <= len(data):
        length, kind = struct.unpack_from("HH", data, off)
        if length < 4:
            return
        yield kind & 0x3FFF, data[off + 4 : off + length]
        off += (length + 3) & ~3


def netlink_qdiscs(ifindex: int) -> list[tuple[str, int, int]]:
    """(kind, drops, overlimits) of each qdisc on the interface, from one
    RTM_GETQDISC dump over rtnetlink (no tc process: the counters are read
    every update without a fork)."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as nl:  # NETLINK_ROUTE
        nl.bind((0, 0))
        tcmsg = struct.pack("BxxxiIII", socket.AF_UNSPEC, 0, 0, 0, 0)
        header = struct.pack(
            "IHHII", 16 + len(tcmsg), RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
        )
        nl.send(header + tcmsg)
        found: list[tuple[str, int, int]] = []
        while True:
            data = nl.recv(65536)
            off = 0
            while off + 16 <= len(data):
                length, mtype = struct.unpack_from("IH", data, off)
                if mtype == NLMSG_DONE:
                    return found
                if mtype == NLMSG_ERROR:
                    raise OSError("rtnetlink refused the qdisc dump")
                body = data[off + 16 : off + length]
                if mtype == RTM_NEWQDISC and struct.unpack_from("i", body, 4)[0] == ifindex:
                    kind, drops, overlimits = "", 0, 0
                    for t, payload in _attrs(body[20:]):
                        if t == TCA_KIND:
                            kind = payload.rstrip(b"\0").decode()
                        elif t == TCA_STATS2:
                            for t2, p2 in _attrs(payload):
                                if t2 == TCA_STATS_QUEUE:
                                    _, _, drops, _, overlimits = struct.unpack_from("5I", p2)
                    found.append((kind, drops, overlimits))
                off += (length + 3) & ~3


def read_qdisc(iface: str) -> QdiscStats:
    try:
        qdiscs = netlink_qdiscs(socket.if_nametoindex(iface))
    except OSError:
        qdiscs = None
    if qdiscs is not None:
        shaping = [q for q in qdiscs if q[0] == "tbf"] or qdiscs[:1]
        return (
            QdiscStats(drops=shaping[0][1], overlimits=shaping[0][2]) if shaping else QdiscStats()
        )
    out = subprocess.run(
        ["tc", "-s", "-j", "qdisc", "show", "dev", iface],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    )
    return parse_qdiscs(out.stdout) if out.returncode == 0 else QdiscStats()


class Tree:
    """The counter files, made once and then rewritten in place."""

    def __init__(self, sysfs_root: Path, iface: str) -> None:
        device = sysfs_root / "class" / "infiniband" / DEVICE
        cdir = counters_dir(sysfs_root)
        cdir.mkdir(parents=True, exist_ok=True)
        (device / "hushmon_sim").write_text(
            f"simulated by hushmon testbed from {iface} and its tc qdisc "
            "(python/hushmon/testbed/ibsim.py)\n"
        )
        self.fds = {}
        for name in COUNTERS:
            path = cdir / name
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self.fds[name] = fd
            self.write(name, 0)

    def write(self, name: str, value: int) -> None:
        os.pwrite(self.fds[name], f"{value:>{WIDTH}}\n".encode(), 0)


def counter_values(
    base: LinkStats, link: LinkStats, qbase: QdiscStats, q: QdiscStats
) -> dict[str, int]:
    """Every counter from the link and qdisc readings, from 0 at start."""
    return {
        "port_xmit_data": (link.tx_bytes - base.tx_bytes) // 4,
        "port_rcv_data": (link.rx_bytes - base.rx_bytes) // 4,
        "port_xmit_packets": link.tx_packets - base.tx_packets,
        "port_rcv_packets": link.rx_packets - base.rx_packets,
        "port_xmit_wait": q.overlimits - qbase.overlimits,
        "port_xmit_discards": (q.drops - qbase.drops) + (link.tx_drops - base.tx_drops),
        "port_rcv_errors": link.rx_errors - base.rx_errors,
        "symbol_error": 0,
        "link_downed": 0,
        "link_error_recovery": 0,
    }


def run(sysfs_root: Path, iface: str, interval_s: float, qdisc_every: int) -> None:
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    base, qbase = read_link(iface), read_qdisc(iface)
    tree = Tree(sysfs_root, iface)
    q = qbase
    tick = 0
    while not stop:
        if tick % qdisc_every == 0:
            q = read_qdisc(iface)
        for name, value in counter_values(base, read_link(iface), qbase, q).items():
            tree.write(name, max(value, 0))
        tick += 1
        time.sleep(interval_s)


def in_node_root() -> Path:
    """Where a node's agent finds the tree (the node's folder is bound at
    /run/hushmon inside it)."""
    from hushmon.testbed.node_ns import AGENT_RUN_DIR

    return AGENT_RUN_DIR / "ibsys"


def start(bed: Bed) -> None:
    """Starts one counter process per node; returns once each has made its
    tree (the agents find their ports when they start)."""
    from hushmon.testbed import system
    from hushmon.testbed.network import NODE_IFACE

    for node in bed.nodes():
        argv = [
            str(bed.node_exec()),
            node.name,
            sys.executable,
            "-m",
            "hushmon.testbed.ibsim",
            "--dir",
            str(in_node_root()),
            "--iface",
            NODE_IFACE,
            "--bed",
            str(bed.root),
        ]
        log = bed.logs / f"ibsim-{node.name}.log"
        proc = system.spawn(argv, log, f"starting the IB counters of {node.name}")
        bed.daemons[f"ibsim@{node.name}"] = proc.pid
    deadline = time.monotonic() + START_TIMEOUT_S
    for node in bed.nodes():
        made = counters_dir(bed.node_dir(node.name) / "ibsys") / COUNTERS[-1]
        while not made.exists():
            if time.monotonic() > deadline:
                log = bed.logs / f"ibsim-{node.name}.log"
                tail = (
                    log.read_text(errors="replace").strip().splitlines()[-1:]
                    if log.exists()
                    else []
                )
                raise HushmonError(
                    f"the IB counters of {node.name} did not start in {START_TIMEOUT_S:g} s"
                    + (f": {tail[0]}" if tail else "")
                )
            time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hushmon.testbed.ibsim",
        description="InfiniBand-like counters of this node's link (run inside a bed node)",
    )
    p.add_argument("--dir", required=True, type=Path, help="sysfs-like root to write under")
    p.add_argument("--iface", default="eth0", help="the node's shaped link (default eth0)")
    p.add_argument("--interval-ms", type=int, default=100, help="update period (default 100)")
    p.add_argument("--qdisc-every", type=int, default=1, help="read the qdisc every N updates")
    p.add_argument("--bed", default="", help="the bed's state folder (so `down` finds us)")
    args = p.parse_args(argv)
    if not 10 <= args.interval_ms <= 10000 or not 1 <= args.qdisc_every <= 1000:
        print("ibsim: --interval-ms must be 10..10000 and --qdisc-every 1..1000", file=sys.stderr)
        return 2
    try:
        read_link(args.iface)
        run(args.dir, args.iface, args.interval_ms / 1000.0, args.qdisc_every)
    except (LookupError, OSError) as exc:
        print(f"ibsim: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
