"""What a test bed is made of: nodes, racks, links and their addresses.

Pure data and arithmetic, no system calls, so every name and address the
bed uses is decided (and unit-tested) in one place. The layout:

    head (this machine's own namespace, 10.77.0.254) -- core switch
    core switch -- uplink (shaped) -- rack switch r1 -- links (shaped) -- n1, n2
                 -- uplink (shaped) -- rack switch r2 -- links (shaped) -- n3, n4

All switches live in one namespace of their own (``hm-fabric``), so removing
that namespace removes every bridge and cable at once, even after a crash.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from hushmon.errors import HushmonError

# Fixed names: there is one test bed per machine, and `down` must find every
# piece of it from these names alone when the state file is gone.
NETNS_PREFIX = "hm-"
FABRIC_NETNS = "hm-fabric"
HEAD_IFACE = "hmbed0"  # the head's cable, in this machine's own namespace
SUBNET = "10.77.0.0/16"
PREFIX_LEN = 16
HEAD_ADDR = "10.77.0.254"
CGROUP_NAME = "hushmon-testbed"
MAX_NODES = 64
MAX_NODES_PER_RACK = 200
# A node costs about this much memory at rest (agent, slurmd, orted).
NODE_MEMORY_BYTES = 96 * 1024 * 1024

# The online transport (docs/transport.md) on the bed: "none" (agents spool,
# `hushmon run` ingests the spools) or "nats" (a hub of 3 nats-servers on
# the core, a leaf per rack, reducers and the collector).
TRANSPORTS = ("none", "nats")
HUB_NETNS = "hm-hub"
HUB_SWITCH_PORT = "hub"  # the hub's cable end on the core switch
HUB_SERVERS = 3
# A leaf's host number in its rack's 10.77.<rack>.0 block (nodes use 1..200).
LEAF_HOST = 250

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(bit|bps)?\s*$", re.IGNORECASE)
_RATE_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}


def parse_rate_bits(text: str) -> int:
    """'1gbit', '200mbit', '1G', '500m' -> bits per second (decimal units, as tc)."""
    m = _RATE.match(text)
    if not m:
        raise HushmonError(f"rate '{text}' is not valid: use e.g. 1gbit, 200mbit, 10mbit")
    bits = float(m.group(1)) * _RATE_SCALE[m.group(2).lower()]
    if m.group(3) and m.group(3).lower() == "bps":
        bits *= 8  # tc's 'bps' means bytes per second
    if not 100_000 <= bits <= 100_000_000_000:
        raise HushmonError(f"rate '{text}' is outside 100kbit .. 100gbit")
    return int(bits)


def format_rate(bits_per_s: int) -> str:
    """Bits per second as tc writes them: 1gbit, 200mbit, 1500kbit."""
    for unit, scale in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bits_per_s >= scale and bits_per_s % scale == 0:
            return f"{bits_per_s // scale}{unit}"
    return f"{bits_per_s}bit"


def parse_latency_us(text: str) -> int:
    """'0', '50us', '1ms' -> microseconds."""
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)?\s*$", text)
    if not m:
        raise HushmonError(f"latency '{text}' is not valid: use e.g. 50us or 1ms")
    scale = {"us": 1, "ms": 1000, "s": 1_000_000, None: 1}[m.group(2)]
    value = int(float(m.group(1)) * scale)
    if value > 1_000_000:
        raise HushmonError(f"latency '{text}' is above 1 s")
    return value


@dataclass(frozen=True)
class Node:
    name: str  # host name, also its Slurm NodeName: n1, n2, ...
    index: int  # 1-based
    rack: int  # 1-based
    address: str

    @property
    def netns(self) -> str:
        return NETNS_PREFIX + self.name

    @property
    def switch_port(self) -> str:
        """Its cable's end on the rack switch (in the fabric namespace)."""
        return self.name


@dataclass(frozen=True)
class BedSpec:
    nodes: int = 4
    racks: int = 2
    link_bits_per_s: int = 1_000_000_000
    uplink_bits_per_s: int = 200_000_000
    link_latency_us: int = 0
    cpus_per_node: int = 0  # 0: every node may use every CPU of the machine
    node_memory_bytes: int = 0  # 0: no limit
    period_ms: int = 1000
    slurm: bool = True
    accounting: bool = True  # slurmdbd + MariaDB beside Slurm (sacct)
    agents: bool = True
    transport: str = "none"

    def check(self, cpus: int, mem_available_bytes: int) -> None:
        """Refuses a bed this machine cannot hold, naming the fix."""
        if self.nodes < 1:
            raise HushmonError(f"--nodes {self.nodes}: a bed needs at least 1 node")
        if self.racks < 1 or self.racks > self.nodes:
            raise HushmonError(
                f"--racks {self.racks}: use 1 .. {self.nodes} (one per node at most)"
            )
        if self.nodes > MAX_NODES:
            raise HushmonError(f"--nodes {self.nodes}: the bed holds at most {MAX_NODES} nodes")
        if -(-self.nodes // self.racks) > MAX_NODES_PER_RACK:
            raise HushmonError(f"more than {MAX_NODES_PER_RACK} nodes in a rack: add racks")
        need = self.nodes * max(NODE_MEMORY_BYTES, self.node_memory_bytes)
        if need > mem_available_bytes:
            fit = max(1, mem_available_bytes // max(NODE_MEMORY_BYTES, self.node_memory_bytes))
            raise HushmonError(
                f"--nodes {self.nodes}: this machine has {mem_available_bytes >> 20} MiB "
                f"available, enough for about {fit} node(s); use fewer nodes"
                + (" or a smaller --node-memory" if self.node_memory_bytes else "")
            )
        if self.cpus_per_node > cpus:
            raise HushmonError(
                f"--cpus-per-node {self.cpus_per_node}: this machine has {cpus} CPU(s)"
            )
        if self.uplink_bits_per_s <= 0 or self.link_bits_per_s <= 0:
            raise HushmonError("link rates must be positive")
        if self.transport not in TRANSPORTS:
            raise HushmonError(f"--transport {self.transport}: use one of {', '.join(TRANSPORTS)}")

    def node_list(self) -> list[Node]:
        """Nodes filled rack by rack: with 4 nodes in 2 racks, n1 n2 | n3 n4."""
        per_rack = -(-self.nodes // self.racks)
        out = []
        for i in range(1, self.nodes + 1):
            rack = (i - 1) // per_rack + 1
            out.append(Node(f"n{i}", i, rack, f"10.77.{rack}.{(i - 1) % per_rack + 1}"))
        return out

    def rack_nodes(self, rack: int) -> list[Node]:
        return [n for n in self.node_list() if n.rack == rack]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BedSpec:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def rack_switch(rack: int) -> str:
    return f"r{rack}"


CORE_SWITCH = "core"


def uplink_ports(rack: int) -> tuple[str, str]:
    """The uplink cable's two ends: on the rack switch, on the core switch."""
    return f"up-r{rack}", f"r{rack}-up"


def hub_addresses() -> list[str]:
    """The hub's servers, on the core next to the head (10.77.0.1 .. 3)."""
    return [f"10.77.0.{k}" for k in range(1, HUB_SERVERS + 1)]


def leaf_netns(rack: int) -> str:
    return f"{NETNS_PREFIX}leaf-r{rack}"


def leaf_address(rack: int) -> str:
    """A rack's leaf server, on the rack's switch: agents reach it without
    crossing the uplink."""
    return f"10.77.{rack}.{LEAF_HOST}"


def leaf_switch_port(rack: int) -> str:
    return f"leaf-r{rack}"


def rack_name(rack: int) -> str:
    """The rack's name on the wire (subject hm.raw.<rack>.<host>), as its switch."""
    return rack_switch(rack)


def node_cpus(spec: BedSpec, node: Node, cpus: int) -> list[int]:
    """The CPUs a node may use: all of them, or its own slice (wrapping
    around when the nodes ask for more CPUs than the machine has)."""
    if spec.cpus_per_node <= 0:
        return list(range(cpus))
    start = (node.index - 1) * spec.cpus_per_node
    return sorted({(start + k) % cpus for k in range(spec.cpus_per_node)})


def parse_bytes(text: str) -> int:
    """'512M', '2G', '1048576' -> bytes (binary units, as cgroups and Slurm)."""
    m = re.match(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", text, re.IGNORECASE)
    if not m:
        raise HushmonError(f"size '{text}' is not valid: use e.g. 512M or 2G")
    return int(m.group(1)) << (10 * "_kmgt".index(m.group(2).lower() or "_"))
