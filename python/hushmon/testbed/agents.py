"""One hushmon-agent per node, started inside the node (its namespaces and
cgroup), writing to the node's own folder under the shared spool, as a
cluster with a shared file system collects per-host spools."""

from __future__ import annotations

import subprocess
import time

from hushmon.agentclient import AgentClient, AgentError
from hushmon.errors import HushmonError
from hushmon.paths import REPO_ROOT, program
from hushmon.testbed import ibsim, system
from hushmon.testbed.spec import leaf_address, rack_name
from hushmon.testbed.state import Bed
from hushmon.transport.natsserver import CLIENT_PORT

START_TIMEOUT_S = 15.0


def agent_argv(bed: Bed, node: str) -> list[str]:
    spec = bed.spec
    argv = [
        str(bed.node_exec()),
        node,
        str(program("hushmon-agent")),
        "--host",
        node,
        "--spool-dir",
        str(bed.node_spool(node)),
        "--socket",
        str(bed.agent_socket(node)),
        "--period-ms",
        str(spec.period_ms),
        # CPU and memory of the node's cgroup, not of the whole machine.
        "--scope-cgroup",
        "self",
        # The links are shaped by tc: their capacity is the bed's, not the
        # veth's nominal speed.
        "--net-link-bits-per-s",
        str(spec.link_bits_per_s),
        # InfiniBand-like counters simulated from the node's link (ibsim.py).
        "--ib-sysfs-root",
        str(ibsim.in_node_root()),
        # A simulated PMU (the bed's machine may have none, and a real one
        # would count the whole machine, not the node): FLOPs and memory
        # traffic for the roofline factor, every line tagged backend=sim.
        # The profile is named so no test depends on this machine's CPU.
        "--pmu-backend",
        "sim",
        "--pmu-profile",
        "icelake",
        "--pmu-profile-dir",
        str(REPO_ROOT / "c" / "agent" / "pmu" / "profiles"),
        # RAPL-like energy simulated from the node's CPU time (raplsim.py).
        "--rapl-sysfs-root",
        str(ibsim.rapl_root()),
    ]
    if spec.transport == "nats":
        # Spool first (write-ahead), then JetStream through the rack's leaf,
        # which the node reaches on its rack switch, not across the uplink.
        n = bed.node(node)
        argv += [
            "--sink",
            "nats",
            "--nats-url",
            f"tls://{leaf_address(n.rack)}:{CLIENT_PORT}",
            "--nats-rack",
            rack_name(n.rack),
        ]
    return argv


def spawn(bed: Bed, node: str) -> subprocess.Popen[bytes]:
    bed.node_spool(node).mkdir(parents=True, exist_ok=True)
    env = None
    if bed.spec.transport == "nats":  # its certificate and the bed's CA (testbed/transport.py)
        from hushmon.testbed.transport import client_env

        env = client_env(bed.root, node)
    proc = system.spawn(
        agent_argv(bed, node), bed.logs / f"agent-{node}.log", f"starting the agent of {node}", env
    )
    bed.daemons[f"agent@{node}"] = proc.pid
    return proc


def start(bed: Bed, nodes: list[str] | None = None) -> None:
    """Starts the agents of ``nodes`` (default: every node); returns once
    each answers on its control socket."""
    names = nodes if nodes is not None else [n.name for n in bed.nodes()]
    procs = {name: spawn(bed, name) for name in names}
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = set(procs)
    while waiting:
        for name in sorted(waiting):
            proc = procs[name]
            if proc.poll() is not None:
                raise HushmonError(
                    f"the agent of {name} exited with code {proc.returncode} at start: "
                    f"see {bed.logs / f'agent-{name}.log'}"
                )
            if client(bed, name).answers():
                waiting.discard(name)
        if time.monotonic() > deadline:
            raise HushmonError(
                f"agents of {','.join(sorted(waiting))} do not answer: see {bed.logs}"
            )
        time.sleep(0.1)


def client(bed: Bed, node: str) -> AgentClient:
    return AgentClient(bed.agent_socket(node))


def request_all(bed: Bed, line: str) -> list[str]:
    """Sends one request to every node's agent; returns the failures."""
    failures = []
    for node in bed.nodes():
        try:
            client(bed, node.name).request(line)
        except AgentError as exc:
            failures.append(f"{node.name}: {exc}")
    return failures
