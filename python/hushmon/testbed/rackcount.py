"""Bytes each bed node received from each rack, so the digest measures the
share of a job's traffic that crossed between racks instead of bounding it
(issue 21).

The node counters the agent reads (a link's bytes sent and received) cannot
tell where bytes came from. On the bed each rack's nodes sit in one address
block (10.77.<rack>.0/24, spec.py), so the kernel's route realms can count
per rack: every node gets one route per rack's block, on its own link as
before (the /16 connected route stays; these are only more specific), each
with a realm of its own, and the kernel adds every packet the node receives
from that block to the realm's input bytes (``/proc/net/rt_acct``, the
realm the reverse route names; CONFIG_IP_ROUTE_CLASSID). The counters are
the machine's, not a namespace's, so realms are numbered across the bed
(node i, rack r: (i - 1) x racks + r, at most 255) and one process in the
machine's own namespace reads them all.

Every agent period, on the agent's period grid, it appends a line per node
and rack to a spool file of its own in the node's spool folder, which
``hushmon run`` ingests with the agent's files::

    net_rack,host=n1,from=r2 rx_bytes_per_s=1.2e+07,rx_bytes=12000000i <period's time>

(``from`` = the sending rack's switch, as in topology.conf). The file is
``<node>-netrack-<start ns>.lp.open`` while written, ``.lp`` once stopped.
Only the spool transport carries it: under ``--transport nats`` the agents
publish and nothing reads this file. The kernel's counters are 32-bit and
differences are taken modulo 2^32: right below 4 GiB a period.

Chosen over per-destination counting on the sender (tc filters with a
counting action, nftables or iptables counters) because this machine's
kernel has no tc counting action (act_gact) and neither nft nor iptables is
installed; route realms need only iproute2.

    python -m hushmon.testbed.rackcount --bed ROOT --racks 2 --period-ms 1000 \
        --node n1:1:SPOOL --node n3:2:SPOOL ...
"""

from __future__ import annotations

import argparse
import signal
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from hushmon.testbed.spec import rack_switch

if TYPE_CHECKING:
    from hushmon.testbed.state import Bed

RT_ACCT = Path("/proc/net/rt_acct")
MAX_REALM = 255  # rt_acct counts realms 0-255 (tclassid & 0xff)
_ENTRY = struct.Struct("4I")  # o_bytes o_packets i_bytes i_packets
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Counted:
    host: str
    index: int  # 1-based, the bed's node number
    spool: Path


def realm(index: int, rack: int, racks: int) -> int:
    return (index - 1) * racks + rack


def read_rx_bytes(path: Path = RT_ACCT) -> list[int]:
    """Input bytes per realm (0-255), summed over CPUs by the kernel."""
    data = path.read_bytes()
    return [_ENTRY.unpack_from(data, i * _ENTRY.size)[2] for i in range(len(data) // _ENTRY.size)]


def line(host: str, rack: int, delta_bytes: int, seconds: float, time_ns: int) -> str:
    rate = delta_bytes / seconds if seconds > 0 else 0.0
    return (
        f"net_rack,host={host},from={rack_switch(rack)} "
        f"rx_bytes_per_s={rate:.6g},rx_bytes={delta_bytes}i {time_ns}"
    )


def run(nodes: list[Counted], racks: int, period_ms: int) -> int:
    period_ns = period_ms * 1_000_000
    start_ns = time.time_ns()
    stop = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    paths = {n.host: n.spool / f"{n.host}-netrack-{start_ns}.lp.open" for n in nodes}
    files = {}
    for n in nodes:
        n.spool.mkdir(parents=True, exist_ok=True)
        files[n.host] = paths[n.host].open("a", encoding="utf-8")
    try:
        before, before_ns = read_rx_bytes(), time.time_ns()
        while not stop:
            # the agent's grid: its periods end on multiples of the period
            next_ns = (time.time_ns() // period_ns + 1) * period_ns
            time.sleep(max(0.0, (next_ns - time.time_ns()) / 1e9))
            if stop:
                break
            now, now_ns = read_rx_bytes(), time.time_ns()
            seconds = (now_ns - before_ns) / 1e9
            for n in nodes:
                out = files[n.host]
                for rack in range(1, racks + 1):
                    k = realm(n.index, rack, racks)
                    delta = (now[k] - before[k]) % 2**32
                    out.write(line(n.host, rack, delta, seconds, next_ns) + "\n")
                out.flush()
            before, before_ns = now, now_ns
    finally:
        for host, f in files.items():
            f.close()
            paths[host].rename(paths[host].with_name(paths[host].name.removesuffix(".open")))
    return 0


def start(bed: Bed) -> str:
    """The realm routes on every node and the counting process; returns what it did
    in words (or why not: a bed too large for 255 realms)."""
    from hushmon.errors import HushmonError
    from hushmon.testbed import system
    from hushmon.testbed.network import NODE_IFACE

    racks = bed.spec.racks
    nodes = bed.nodes()
    if realm(len(nodes), racks, racks) > MAX_REALM or not RT_ACCT.exists():
        return (
            "per-rack byte counts: off (more than 255 node x rack realms, or a kernel "
            "without route realms)"
        )
    for node in nodes:
        for rack in range(1, racks + 1):
            system.ip(
                "route", "replace", f"10.77.{rack}.0/24", "dev", NODE_IFACE,
                "realm", str(realm(node.index, rack, racks)),
                what=f"a realm route on {node.name}", netns=node.netns,
            )  # fmt: skip
    argv = [
        sys.executable, "-m", "hushmon.testbed.rackcount", "--bed", str(bed.root),
        "--racks", str(racks), "--period-ms", str(bed.spec.period_ms),
    ]  # fmt: skip
    for node in nodes:
        argv += ["--node", f"{node.name}:{node.index}:{bed.node_spool(node.name)}"]
    proc = system.spawn(argv, bed.logs / "rackcount.log", "starting the per-rack byte counts")
    bed.daemons["rackcount"] = proc.pid
    deadline = time.monotonic() + START_TIMEOUT_S
    first = nodes[-1].name
    while not list(bed.node_spool(first).glob(f"{first}-netrack-*.lp.open")):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise HushmonError(
                f"the per-rack byte counts did not start (see {bed.logs / 'rackcount.log'})"
            )
        time.sleep(0.05)
    return "per-rack byte counts: route realms per node, lines net_rack in the node spools"


def _node(text: str) -> Counted:
    host, _, rest = text.partition(":")
    index, _, spool = rest.partition(":")
    if not host or not index.isdigit() or not spool:
        raise ValueError(f"--node {text!r}: use HOST:INDEX:SPOOL_DIR")
    return Counted(host, int(index), Path(spool))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--racks", type=int, required=True)
    ap.add_argument("--node", action="append", default=[], help="HOST:INDEX:SPOOL_DIR")
    ap.add_argument("--period-ms", type=int, default=1000)
    ap.add_argument("--bed", help="the bed's state folder (so that testbed down finds us)")
    args = ap.parse_args(argv)
    try:
        nodes = [_node(t) for t in args.node]
    except ValueError as exc:
        print(f"rackcount: {exc}", file=sys.stderr)
        return 2
    if args.racks < 1 or args.period_ms < 10 or not nodes:
        print("rackcount: --racks 1+, --period-ms 10+ and one --node at least", file=sys.stderr)
        return 2
    if max(realm(n.index, args.racks, args.racks) for n in nodes) > MAX_REALM:
        print(f"rackcount: more than {MAX_REALM} node x rack realms", file=sys.stderr)
        return 2
    try:
        return run(nodes, args.racks, args.period_ms)
    except OSError as exc:
        print(f"rackcount: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
