"""``hushmon testbed up|status|down|exec|env``: a cluster on one machine."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from hushmon import jsonio
from hushmon.datadir import data_dir
from hushmon.errors import HushmonError
from hushmon.period import PERIOD_MS_MAX, PERIOD_MS_MIN


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "testbed",
        help="a cluster on this machine: nodes in network namespaces, shaped links, Slurm",
        description="Builds a cluster on one machine (root): every node is a network and "
        "host-name namespace with its own address, cgroup and hushmon-agent; racks are "
        "switches joined by an uplink; links are shaped with tc; a real Slurm runs "
        "slurmctld on this machine (the head) and slurmd on every node. docs/testbed.md.",
    )
    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION")
    up = sub.add_parser("up", help="build the bed (a stale one is removed first)")
    up.add_argument("--nodes", type=int, default=4, help="nodes (default 4)")
    up.add_argument("--racks", type=int, default=2, help="racks (default 2)")
    up.add_argument("--link-rate", default="1gbit", help="node link rate (default 1gbit)")
    up.add_argument("--uplink-rate", default="200mbit", help="rack uplink rate (default 200mbit)")
    up.add_argument(
        "--link-latency", default="0", help="one-way delay per cable, e.g. 50us (needs sch_netem)"
    )
    up.add_argument(
        "--cpus-per-node", type=int, default=0, help="CPUs each node may use (default: all)"
    )
    up.add_argument("--node-memory", help="memory limit per node, e.g. 1G (default: none)")
    up.add_argument("--period-ms", type=int, default=1000, help="agents' sampling period")
    up.add_argument("--no-slurm", action="store_true", help="no Slurm daemons")
    up.add_argument(
        "--no-accounting",
        action="store_true",
        help="Slurm without slurmdbd and its MariaDB (sacct then has no jobs)",
    )
    up.add_argument("--no-agents", action="store_true", help="no hushmon agents")
    up.add_argument(
        "--transport",
        choices=("none", "nats"),
        default="none",
        help="none: agents spool (default); nats: a hub of 3 nats-servers, a leaf per rack, "
        "agents publish to it, 2 reducers per rack, the top reducer, hushmon collect "
        "(docs/transport.md)",
    )
    up.add_argument(
        "--data-dir", metavar="DIR", help="hushmon data folder (spools go to DIR/spool/<node>/)"
    )
    up.add_argument("--json", metavar="FILE|-", help="the bed's description as JSON")
    up.set_defaults(func=run_up)
    st = sub.add_parser("status", help="what is up, and what is left of a broken bed")
    st.add_argument("--json", metavar="FILE|-", help="status as JSON")
    st.set_defaults(func=run_status)
    dn = sub.add_parser("down", help="remove everything (also after a crash)")
    dn.set_defaults(func=run_down)
    ex = sub.add_parser("exec", help="run a command on a node: exec NODE -- COMMAND")
    ex.add_argument("node")
    ex.add_argument("command", nargs=argparse.REMAINDER)
    ex.set_defaults(func=run_exec)
    rs = sub.add_parser(
        "restart",
        help="start a daemon of the bed again that stopped or was killed: "
        "agent@NODE, nats@SERVER, reduce@RACK.a, reduce@top, collect",
    )
    rs.add_argument("daemon")
    rs.set_defaults(func=run_restart)
    env = sub.add_parser("env", help="shell exports for mpirun and Slurm on the bed (eval them)")
    env.set_defaults(func=run_env)
    p.set_defaults(func=lambda _args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _say(message: str) -> None:
    print(f"hushmon testbed: {message}", file=sys.stderr, flush=True)


def _spec(args: argparse.Namespace) -> Any:
    from hushmon.testbed.spec import BedSpec, parse_bytes, parse_latency_us, parse_rate_bits

    if not PERIOD_MS_MIN <= args.period_ms <= PERIOD_MS_MAX:
        raise HushmonError(f"--period-ms {args.period_ms}: use {PERIOD_MS_MIN} .. {PERIOD_MS_MAX}")
    return BedSpec(
        nodes=args.nodes,
        racks=args.racks,
        link_bits_per_s=parse_rate_bits(args.link_rate),
        uplink_bits_per_s=parse_rate_bits(args.uplink_rate),
        link_latency_us=parse_latency_us(args.link_latency),
        cpus_per_node=args.cpus_per_node,
        node_memory_bytes=parse_bytes(args.node_memory) if args.node_memory else 0,
        period_ms=args.period_ms,
        slurm=not args.no_slurm,
        accounting=not args.no_slurm and not args.no_accounting,
        agents=not args.no_agents,
        transport=args.transport,
    )


def describe(bed: Any) -> dict[str, Any]:
    from hushmon.testbed import launcher, slurm

    env = launcher.mpi_env(bed)
    if bed.spec.slurm:
        env.update(slurm.env(bed))
    extra: dict[str, Any] = {}
    if bed.spec.transport == "nats":
        from hushmon.testbed import transport

        env.update(transport.client_env(bed.root))  # the servers take TLS clients only
        extra["transport"] = {
            "hub_url": transport.hub_url(),
            "leaf_urls": {str(r): transport.leaf_url(r) for r in range(1, bed.spec.racks + 1)},
            "store": str(bed.store),
            "daemons": sorted(transport.daemons(bed)),
        }
    return {
        **extra,
        "spec": bed.spec.to_json(),
        "nodes": [
            {
                "name": n.name,
                "rack": n.rack,
                "address": n.address,
                "netns": n.netns,
                "agent_socket": str(bed.agent_socket(n.name)),
                "spool": str(bed.node_spool(n.name)),
            }
            for n in bed.nodes()
        ],
        "spool_root": str(bed.spool_root),
        "logs": str(bed.logs),
        "cgroups": bed.cgroups.to_json(),
        "node_exec": str(bed.node_exec()),
        "env": env,
    }


def run_up(args: argparse.Namespace) -> int:
    from hushmon.testbed import bed as bedmod

    spec = _spec(args)
    bed = bedmod.up(spec, data_dir(args.data_dir).root, say=_say)
    info = describe(bed)
    human = jsonio.human_stream(args.json)
    names = ", ".join(f"{n['name']} ({n['address']}, rack {n['rack']})" for n in info["nodes"])
    print(f"test bed up: {names}", file=human)
    print(f"run on a node:  {info['node_exec']} n1 hostname", file=human)
    print(
        'mpirun across nodes:  eval "$(hushmon testbed env)"; mpirun --host '
        + ",".join(n["name"] for n in info["nodes"])
        + " ...",
        file=human,
    )
    if spec.slurm:
        print(
            f"slurm: srun -N {spec.nodes} hostname   (SLURM_CONF={info['env']['SLURM_CONF']})",
            file=human,
        )
    if args.json:
        jsonio.emit(args.json, info)
    return 0


def run_status(args: argparse.Namespace) -> int:
    from hushmon.testbed import bed as bedmod

    st = bedmod.status()
    human = jsonio.human_stream(args.json)
    if st.bed is None:
        print(
            "no test bed is up"
            + (
                f"; left over: {', '.join(st.leftovers)} ('hushmon testbed down' removes them)"
                if st.leftovers
                else ""
            ),
            file=human,
        )
    else:
        spec = st.bed.spec
        print(
            f"test bed {'up' if st.up else 'DAMAGED'}: {spec.nodes} nodes in {spec.racks} racks",
            file=human,
        )
        for n in st.bed.nodes():
            print(
                f"  {n.name:5s} {n.address:12s} rack {n.rack}  agent: "
                f"{st.agents.get(n.name, '-')}  slurm: {st.slurm_nodes.get(n.name, '-')}",
                file=human,
            )
        if spec.transport == "nats":
            for line in _transport_lines(st):
                print(f"  {line}", file=human)
        dead = [name for name, alive in st.daemons.items() if not alive]
        if dead:
            print(f"  not running: {', '.join(dead)} ('hushmon testbed up' rebuilds)", file=human)
    if args.json:
        payload: dict[str, Any] = {"up": st.up, "leftovers": st.leftovers}
        if st.bed is not None:
            payload.update(describe(st.bed))
            payload.update(
                {"daemons": st.daemons, "agents": st.agents, "slurm_nodes": st.slurm_nodes}
            )
        jsonio.emit(args.json, payload)
    return 0 if st.up or (st.bed is None and not st.leftovers) else 1


def _transport_lines(st: Any) -> list[str]:
    """The transport's daemons by kind: running or not."""
    kinds: dict[str, list[str]] = {}
    for name, alive in sorted(st.daemons.items()):
        kind, _, what = name.partition("@")
        if kind in ("nats", "reduce", "collect"):
            kinds.setdefault(kind, []).append((what or kind) + ("" if alive else " (DOWN)"))
    return [f"{kind}: {', '.join(items)}" for kind, items in kinds.items()]


def run_restart(args: argparse.Namespace) -> int:
    from hushmon.testbed import agents, system, transport

    bed = _bed()
    name = args.daemon
    if name.startswith("agent@"):
        node = name.partition("@")[2]
        bed.node(node)
        pid = bed.daemons.get(name)
        if pid and system.running(pid):
            raise HushmonError(f"{name} is running (pid {pid}): stop it first")
        agents.start(bed, [node])
        bed.save()
        pid = bed.daemons[name]
    else:
        pid = transport.restart(bed, name)
    _say(f"{name} started again (pid {pid})")
    return 0


def run_down(args: argparse.Namespace) -> int:
    from hushmon.testbed import bed as bedmod

    removed = bedmod.down(say=_say)
    if not removed:
        _say("no test bed was up")
    return 0


def _bed() -> Any:
    from hushmon.testbed.state import load

    bed = load()
    if bed is None:
        raise HushmonError("no test bed is up: 'hushmon testbed up' first")
    return bed


def run_exec(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise HushmonError("no command: hushmon testbed exec NODE -- COMMAND [ARGS...]")
    bed = _bed()
    bed.node(args.node)
    os.execv(str(bed.node_exec()), [str(bed.node_exec()), args.node, *command])
    return 127  # not reached


def run_env(args: argparse.Namespace) -> int:
    info = describe(_bed())
    for key, value in info["env"].items():
        print(f"export {key}={shlex.quote(value)}")
    return 0
