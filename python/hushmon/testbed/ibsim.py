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
  same port's quiet baseline or its data rate. Plus the node's part of
  its rack uplink's queueing: on an InfiniBand fabric a full uplink backs
  up (credit-based flow control) into the ports that feed it, and its
  waits show at the nodes' HCAs; on the bed the uplink's tbf holds the
  packets instead and TCP slows the sender, so the node's own qdisc never
  sees it. Every ``--qdisc-every`` update the uplink's tbf (its rack end,
  in the fabric namespace) is read, and its new overlimits are shared out
  over the rack's nodes in proportion to the bytes each sent into the
  rack switch in that time (its switch port's rx bytes). A node whose
  traffic stayed in the rack is charged too when it sent while the uplink
  queued, as a shared switch buffer backs up into every port it holds
  packets of.
- ``port_xmit_discards``: the qdisc's drops plus the link's tx drops;
  ``port_rcv_errors``: the link's rx errors; ``symbol_error``,
  ``link_downed``, ``link_error_recovery``: 0 (a veth has no physical
  layer).

The same process writes the node's simulated RAPL energy tree
(python/hushmon/testbed/raplsim.py) at each update.

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
import ctypes
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
from hushmon.testbed import raplsim

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
        found: list[tuple[str, int, int]] = []
        for mtype, body in _dump(nl, RTM_GETQDISC, tcmsg):
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
        return found


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


IFLA_IFNAME, IFLA_STATS64 = 3, 23
RTM_NEWLINK, RTM_GETLINK = 16, 18
CLONE_NEWNET = 0x40000000


def _dump(nl: socket.socket, request: int, body: bytes) -> Iterator[tuple[int, bytes]]:
    """(message type, payload) of every answer to one rtnetlink dump request."""
    header = struct.pack("IHHII", 16 + len(body), request, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
    nl.send(header + body)
    while True:
        data = nl.recv(65536)
        off = 0
        while off + 16 <= len(data):
            length, mtype = struct.unpack_from("IH", data, off)
            if mtype == NLMSG_DONE:
                return
            if mtype == NLMSG_ERROR:
                raise OSError("rtnetlink refused the dump")
            yield mtype, data[off + 16 : off + length]
            off += (length + 3) & ~3


def netlink_socket_in(netns: Path) -> socket.socket:
    """An rtnetlink socket of another network namespace (a socket keeps the
    namespace it was made in): this thread enters it, makes the socket, and
    goes back."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        target = os.open(netns, os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"entering {netns}")
            try:
                nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
                nl.bind((0, 0))
            finally:
                if libc.setns(own, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "back to the node's namespace")
        finally:
            os.close(target)
    finally:
        os.close(own)
    return nl


class Fabric:
    """The node's rack as its switch sees it: the uplink's tbf and the bytes
    each of the rack's nodes sends into the switch (read in the fabric's
    namespace), turned into the node's share of the uplink's waits."""

    def __init__(self, netns: Path, uplink: str, port: str, rack_ports: list[str]) -> None:
        self.nl = netlink_socket_in(netns)
        self.uplink, self.port, self.rack_ports = uplink, port, set(rack_ports) | {port}
        self.wait = 0.0  # the node's share, summed since start
        self.last = self._read()

    def _links(self) -> tuple[dict[str, int], dict[str, int]]:
        """Name -> ifindex and name -> rx bytes of the fabric's links."""
        index: dict[str, int] = {}
        rx: dict[str, int] = {}
        body = struct.pack("BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)
        for mtype, msg in _dump(self.nl, RTM_GETLINK, body):
            if mtype != RTM_NEWLINK:
                continue
            ifindex = struct.unpack_from("i", msg, 4)[0]
            name, stats = "", None
            for t, payload in _attrs(msg[16:]):
                if t == IFLA_IFNAME:
                    name = payload.rstrip(b"\0").decode()
                elif t == IFLA_STATS64 and len(payload) >= 32:
                    stats = struct.unpack_from("4Q", payload)
            index[name] = ifindex
            if stats is not None:
                rx[name] = stats[2]
        return index, rx

    def _read(self) -> tuple[int, dict[str, int]]:
        index, rx = self._links()
        if self.uplink not in index:
            raise LookupError(f"no uplink {self.uplink} in the fabric")
        tcmsg = struct.pack("BxxxiIII", socket.AF_UNSPEC, 0, 0, 0, 0)
        overlimits = 0
        found = []
        for mtype, msg in _dump(self.nl, RTM_GETQDISC, tcmsg):
            if mtype != RTM_NEWQDISC or struct.unpack_from("i", msg, 4)[0] != index[self.uplink]:
                continue
            kind, ol = "", 0
            for t, payload in _attrs(msg[20:]):
                if t == TCA_KIND:
                    kind = payload.rstrip(b"\0").decode()
                elif t == TCA_STATS2:
                    for t2, p2 in _attrs(payload):
                        if t2 == TCA_STATS_QUEUE:
                            ol = struct.unpack_from("5I", p2)[4]
            found.append((kind, ol))
        shaping = [q for q in found if q[0] == "tbf"] or found[:1]
        if shaping:
            overlimits = shaping[0][1]
        return overlimits, {p: rx.get(p, 0) for p in self.rack_ports}

    def update(self) -> int:
        """The node's uplink waits since start, after one more reading."""
        overlimits, rx = self._read()
        last_ol, last_rx = self.last
        self.last = (overlimits, rx)
        self.wait += uplink_share(overlimits - last_ol, rx, last_rx, self.port)
        return int(self.wait)


def uplink_share(new_waits: int, rx: dict[str, int], last_rx: dict[str, int], port: str) -> float:
    """The node's part of the uplink's new waits: in proportion to the bytes
    its switch port received against all the rack's ports."""
    if new_waits <= 0:
        return 0.0
    sent = {p: max(rx[p] - last_rx.get(p, rx[p]), 0) for p in rx}
    total = sum(sent.values())
    return new_waits * sent.get(port, 0) / total if total > 0 else 0.0


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
    base: LinkStats, link: LinkStats, qbase: QdiscStats, q: QdiscStats, uplink_wait: int = 0
) -> dict[str, int]:
    """Every counter from the link and qdisc readings, from 0 at start
    (``uplink_wait``: the node's share of its rack uplink's waits, Fabric)."""
    return {
        "port_xmit_data": (link.tx_bytes - base.tx_bytes) // 4,
        "port_rcv_data": (link.rx_bytes - base.rx_bytes) // 4,
        "port_xmit_packets": link.tx_packets - base.tx_packets,
        "port_rcv_packets": link.rx_packets - base.rx_packets,
        "port_xmit_wait": q.overlimits - qbase.overlimits + uplink_wait,
        "port_xmit_discards": (q.drops - qbase.drops) + (link.tx_drops - base.tx_drops),
        "port_rcv_errors": link.rx_errors - base.rx_errors,
        "symbol_error": 0,
        "link_downed": 0,
        "link_error_recovery": 0,
    }


def run(
    sysfs_root: Path,
    iface: str,
    interval_s: float,
    qdisc_every: int,
    fabric: Fabric | None = None,
    rapl_root: Path | None = None,
) -> None:
    stop = False

    def on_term(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    base, qbase = read_link(iface), read_qdisc(iface)
    # Energy first: the agents start once the IB tree is there, and open both.
    rapl = raplsim.start(rapl_root) if rapl_root is not None else None
    tree = Tree(sysfs_root, iface)
    q = qbase
    uplink_wait = 0
    tick = 0
    while not stop:
        if tick % qdisc_every == 0:
            q = read_qdisc(iface)
            if fabric is not None:
                uplink_wait = fabric.update()
        for name, value in counter_values(base, read_link(iface), qbase, q, uplink_wait).items():
            tree.write(name, max(value, 0))
        if rapl is not None:
            rapl.update()
        tick += 1
        time.sleep(interval_s)


def in_node_root() -> Path:
    """Where a node's agent finds the tree (the node's folder is bound at
    /run/hushmon inside it)."""
    from hushmon.testbed.node_ns import AGENT_RUN_DIR

    return AGENT_RUN_DIR / "ibsys"


def rapl_root() -> Path:
    """Where a node's agent finds its simulated energy tree (raplsim.py)."""
    from hushmon.testbed.node_ns import AGENT_RUN_DIR

    return AGENT_RUN_DIR / "raplsys"


def start(bed: Bed) -> None:
    """Starts one counter process per node; returns once each has made its
    tree (the agents find their ports when they start)."""
    from hushmon.testbed import system
    from hushmon.testbed.network import NODE_IFACE
    from hushmon.testbed.spec import FABRIC_NETNS, uplink_ports

    for node in bed.nodes():
        rack_ports = [n.switch_port for n in bed.spec.rack_nodes(node.rack)]
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
            "--rapl-dir",
            str(rapl_root()),
            "--fabric-netns",
            f"/run/netns/{FABRIC_NETNS}",
            "--uplink",
            uplink_ports(node.rack)[0],
            "--port",
            node.switch_port,
            "--rack-ports",
            ",".join(rack_ports),
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
    p.add_argument("--rapl-dir", type=Path, help="also write simulated RAPL zones under this root")
    p.add_argument("--fabric-netns", type=Path, help="the switches' network namespace (file)")
    p.add_argument("--uplink", help="the rack uplink's port (rack end) in the fabric")
    p.add_argument("--port", help="this node's switch port in the fabric")
    p.add_argument("--rack-ports", default="", help="the switch ports of the rack's nodes")
    args = p.parse_args(argv)
    if not 10 <= args.interval_ms <= 10000 or not 1 <= args.qdisc_every <= 1000:
        print("ibsim: --interval-ms must be 10..10000 and --qdisc-every 1..1000", file=sys.stderr)
        return 2
    fabric_args = (args.fabric_netns, args.uplink, args.port)
    if any(fabric_args) and not all(fabric_args):
        print("ibsim: --fabric-netns, --uplink and --port go together", file=sys.stderr)
        return 2
    try:
        read_link(args.iface)
        fabric = (
            Fabric(args.fabric_netns, args.uplink, args.port, args.rack_ports.split(","))
            if args.fabric_netns
            else None
        )
        run(
            args.dir, args.iface, args.interval_ms / 1000.0, args.qdisc_every, fabric, args.rapl_dir
        )
    except (LookupError, OSError) as exc:
        print(f"ibsim: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
