"""One hushmon-agent per node, started inside the node (its namespaces and
cgroup), writing to the node's own folder under the shared spool, as a
cluster with a shared file system collects per-host spools."""

from __future__ import annotations

import subprocess
import time

from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.run.agent import AgentClient, AgentError
from hushmon.testbed import system
from hushmon.testbed.state import Bed

START_TIMEOUT_S = 15.0


def agent_argv(bed: Bed, node: str) -> list[str]:
    spec = bed.spec
    return [
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
    ]


def start(bed: Bed) -> None:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for node in bed.nodes():
        bed.node_spool(node.name).mkdir(parents=True, exist_ok=True)
        procs[node.name] = system.spawn(
            agent_argv(bed, node.name),
            bed.logs / f"agent-{node.name}.log",
            f"starting the agent of {node.name}",
        )
        bed.daemons[f"agent@{node.name}"] = procs[node.name].pid
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
