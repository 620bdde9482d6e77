"""The bed's network: a namespace per node, switches (bridges) in a fabric
namespace, cables (veth pairs) shaped with tc so links and uplinks are real
bottlenecks.

Shaping is egress-only in Linux, so each cable is shaped at both ends: the
node's ``eth0`` limits what the node sends, the switch port limits what it
receives; the uplink likewise at its rack and core ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from hushmon.errors import HushmonError
from hushmon.testbed import system
from hushmon.testbed.spec import (
    CORE_SWITCH,
    FABRIC_NETNS,
    HEAD_ADDR,
    HEAD_IFACE,
    HUB_NETNS,
    HUB_SWITCH_PORT,
    NETNS_PREFIX,
    PREFIX_LEN,
    BedSpec,
    Node,
    format_rate,
    hub_addresses,
    leaf_address,
    leaf_netns,
    leaf_switch_port,
    rack_switch,
    uplink_ports,
)

NODE_IFACE = "eth0"
HEAD_PORT = "head"


@dataclass(frozen=True)
class Shape:
    """One direction of a cable: a token bucket at ``bits_per_s``, and a
    fixed delay where the kernel has netem."""

    bits_per_s: int
    latency_us: int = 0

    def tc_args(self) -> list[list[str]]:
        """The tc qdisc commands (after 'qdisc add dev IFACE') that make it."""
        # The bucket holds 10 ms of traffic (at least 64 KiB): large enough for
        # TCP to reach the rate with coarse kernel timers, small enough that the
        # rate holds over a 1 s sample.
        burst = max(64 * 1024, self.bits_per_s // 8 // 100)
        tbf = ["tbf", "rate", format_rate(self.bits_per_s), "burst", str(burst), "latency", "20ms"]
        if self.latency_us <= 0:
            return [["root", "handle", "1:", *tbf]]
        return [
            ["root", "handle", "1:", "netem", "delay", f"{self.latency_us}us"],
            ["parent", "1:1", "handle", "10:", *tbf],
        ]


def _shape(netns: str, iface: str, shape: Shape) -> None:
    for args in shape.tc_args():
        try:
            system.tc("qdisc", "add", "dev", iface, *args, netns=netns, what=f"shaping {iface}")
        except HushmonError as exc:
            if "netem" in args and "unknown" in str(exc).lower():
                raise HushmonError(
                    "--link-latency needs the kernel's sch_netem module, which this kernel "
                    "lacks: leave --link-latency at 0"
                ) from exc
            raise


def netem_available() -> bool:
    """Whether the kernel can delay packets (sch_netem), checked on a scratch cable."""
    probe_a, probe_b = "hmprobe0", "hmprobe1"
    system.ip("link", "add", probe_a, "type", "veth", "peer", "name", probe_b, what="probing tc")
    try:
        system.tc("qdisc", "add", "dev", probe_a, "root", "netem", "delay", "1us", what="netem")
        return True
    except HushmonError:
        return False
    finally:
        system.ip("link", "del", probe_a, what="removing the probe cable", check=False)


def build(spec: BedSpec) -> None:
    """Creates the fabric, the head's cable and every node's namespace and cable."""
    link = Shape(spec.link_bits_per_s, spec.link_latency_us)
    uplink = Shape(spec.uplink_bits_per_s, spec.link_latency_us)
    fab = FABRIC_NETNS
    system.ip("netns", "add", fab, what="creating the fabric namespace")
    system.ip("link", "set", "lo", "up", netns=fab, what="fabric loopback")
    switches = [CORE_SWITCH] + [rack_switch(r) for r in range(1, spec.racks + 1)]
    for name in switches:
        system.ip("link", "add", name, "type", "bridge", netns=fab, what=f"switch {name}")
        # No spanning tree (the fabric is a tree already), no forwarding delay.
        system.ip(
            "link",
            "set",
            name,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
            netns=fab,
            what=f"switch {name}",
        )
        system.ip("link", "set", name, "up", netns=fab, what=f"switch {name}")
    for rack in range(1, spec.racks + 1):
        rack_end, core_end = uplink_ports(rack)
        system.ip(
            "link",
            "add",
            rack_end,
            "type",
            "veth",
            "peer",
            "name",
            core_end,
            netns=fab,
            what=f"uplink of rack {rack}",
        )
        for end, switch in ((rack_end, rack_switch(rack)), (core_end, CORE_SWITCH)):
            system.ip("link", "set", end, "master", switch, "up", netns=fab, what=f"uplink {end}")
            _shape(fab, end, uplink)
    # The head (this machine's own namespace) hangs off the core switch,
    # unshaped: it runs the Slurm controller and mpirun, like a login node.
    system.ip(
        "link",
        "add",
        HEAD_IFACE,
        "type",
        "veth",
        "peer",
        "name",
        HEAD_PORT,
        "netns",
        fab,
        what="the head's cable",
    )
    system.ip("link", "set", HEAD_PORT, "master", CORE_SWITCH, "up", netns=fab, what="head port")
    system.ip("addr", "add", f"{HEAD_ADDR}/{PREFIX_LEN}", "dev", HEAD_IFACE, what="head address")
    system.ip("link", "set", HEAD_IFACE, "up", what="the head's cable")
    for node in spec.node_list():
        _build_node(spec, node, link)


def _build_node(spec: BedSpec, node: Node, link: Shape) -> None:
    ns, fab = node.netns, FABRIC_NETNS
    system.ip("netns", "add", ns, what=f"creating node {node.name}")
    system.ip("link", "set", "lo", "up", netns=ns, what=f"{node.name} loopback")
    system.ip(
        "link",
        "add",
        node.switch_port,
        "netns",
        fab,
        "type",
        "veth",
        "peer",
        "name",
        NODE_IFACE,
        "netns",
        ns,
        what=f"cable of {node.name}",
    )
    system.ip(
        "link",
        "set",
        node.switch_port,
        "master",
        rack_switch(node.rack),
        "up",
        netns=fab,
        what=f"switch port of {node.name}",
    )
    system.ip(
        "addr",
        "add",
        f"{node.address}/{PREFIX_LEN}",
        "dev",
        NODE_IFACE,
        netns=ns,
        what=f"address of {node.name}",
    )
    system.ip("link", "set", NODE_IFACE, "up", netns=ns, what=f"cable of {node.name}")
    _shape(ns, NODE_IFACE, link)
    _shape(fab, node.switch_port, link)


def _host(netns: str, port: str, switch: str, addresses: list[str], shape: Shape | None) -> None:
    """A server of the bed's infrastructure: a namespace of its own with one
    cable to ``switch``, its addresses on that cable, shaped like a node's
    link when ``shape`` is given."""
    fab = FABRIC_NETNS
    system.ip("netns", "add", netns, what=f"creating {netns}")
    system.ip("link", "set", "lo", "up", netns=netns, what=f"{netns} loopback")
    system.ip(
        "link",
        "add",
        port,
        "netns",
        fab,
        "type",
        "veth",
        "peer",
        "name",
        NODE_IFACE,
        "netns",
        netns,
        what=f"cable of {netns}",
    )
    system.ip("link", "set", port, "master", switch, "up", netns=fab, what=f"port {port}")
    for address in addresses:
        system.ip(
            "addr",
            "add",
            f"{address}/{PREFIX_LEN}",
            "dev",
            NODE_IFACE,
            netns=netns,
            what=f"address {address} of {netns}",
        )
    system.ip("link", "set", NODE_IFACE, "up", netns=netns, what=f"cable of {netns}")
    if shape is not None:
        _shape(netns, NODE_IFACE, shape)
        _shape(fab, port, shape)


def build_transport(spec: BedSpec) -> None:
    """The transport's servers: the hub on the core (unshaped, like the
    head: the data centre's spine), a leaf per rack on the rack's switch
    (a server of the rack, cabled like a node). Leaves reach the hub
    through their rack's shaped uplink."""
    _host(HUB_NETNS, HUB_SWITCH_PORT, CORE_SWITCH, hub_addresses(), None)
    link = Shape(spec.link_bits_per_s, spec.link_latency_us)
    for rack in range(1, spec.racks + 1):
        _host(
            leaf_netns(rack),
            leaf_switch_port(rack),
            rack_switch(rack),
            [leaf_address(rack)],
            link,
        )


def set_uplink(rack: int, up: bool) -> None:
    """Takes a rack's uplink down (or back up) at its rack end: the fault
    of a cut cable or a dead switch port, for the transport's fault tests."""
    rack_end, _core_end = uplink_ports(rack)
    state = "up" if up else "down"
    system.ip(
        "link", "set", rack_end, state, netns=FABRIC_NETNS, what=f"uplink of rack {rack} {state}"
    )


def bed_namespaces() -> list[str]:
    """Every namespace of a bed on this machine, found by name (also after a crash)."""
    return [n for n in system.netns_list() if n.startswith(NETNS_PREFIX)]


def destroy() -> list[str]:
    """Removes every namespace and the head's cable; returns what it removed.
    Deleting a namespace deletes the cables and switches inside it."""
    removed = []
    for ns in bed_namespaces():
        system.ip("netns", "del", ns, what=f"removing namespace {ns}", check=False)
        removed.append(f"netns {ns}")
    out = system.ip("link", "show", HEAD_IFACE, what="head cable", check=False)
    if out.strip():
        system.ip("link", "del", HEAD_IFACE, what="removing the head's cable", check=False)
        removed.append(f"link {HEAD_IFACE}")
    return removed


def leftovers() -> list[str]:
    """What of a bed's network is still on this machine."""
    found = [f"netns {ns}" for ns in bed_namespaces()]
    if system.ip("link", "show", HEAD_IFACE, what="head cable", check=False).strip():
        found.append(f"link {HEAD_IFACE}")
    return found
