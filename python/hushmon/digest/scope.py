"""Which sensors describe the node, and which the whole machine it runs on.

An agent in node scope (a test bed node, a container: docs/agent.md "Node
scope") writes the node's own CPU and memory (from the node's cgroup) and
network (from the node's network namespace) under the usual names, adds a
``node_cgroup`` line, and tags every host-wide line ``scope=host``
(:mod:`hushmon.digest.hosttag`): those count every process on the machine,
so on a machine shared by several nodes they are the same on all of them.
Without node scope each node is a machine and every sensor is that node's.

The digest lists both groups (digest.json ``scopes``, the report's "Where
the numbers come from"), and the analyzers read node-scoped series where
both exist (:mod:`hushmon.digest.sensors`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hushmon.digest.hosttag import is_host_wide
from hushmon.digest.jobview import JobView
from hushmon.digest.sensors import DERIVED

# Where a node-scoped measurement comes from, in node scope.
NODE_SOURCES = {
    "cpu": "the node's cgroup (CPU time, share of the node's CPUs)",
    "mem": "the node's cgroup (memory charged, limit)",
    "node_cgroup": "the node's cgroup (CPUs, quota, OOM kills)",
    "net": "the node's network namespace (its own interfaces)",
    "cgroup": "the job's cgroups on the node",
}


def in_node_scope(job: JobView) -> bool:
    """Whether the agents ran in node scope (several nodes may share a machine)."""
    return any(is_host_wide(s) or s.startswith("node_cgroup.") for s in job.base_names)


@dataclass
class Scopes:
    mode: str  # "node": node-scoped agents; "machine": every sensor is the node's machine
    node_scoped: dict[str, list[str]] = field(default_factory=dict)  # source -> sensors
    host_wide: list[str] = field(default_factory=list)
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    shared_host: bool | None = None  # nodes on one machine (host-wide series agree)
    shared_host_evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "node_scoped": self.node_scoped,
            "host_wide": self.host_wide,
            "derived": self.derived,
            "nodes_share_a_host": self.shared_host,
            "nodes_share_a_host_evidence": self.shared_host_evidence,
        }

    def summary(self) -> str:
        if self.mode == "machine":
            return (
                "every sensor is the node's own machine (the agents ran without node scope: "
                "one node per machine)"
            )
        n_node = sum(len(v) for v in self.node_scoped.values())
        text = (
            f"{n_node} sensors are node-scoped (the node's cgroup and network namespace), "
            f"{len(self.host_wide)} host-wide (tagged scope=host: the whole machine)"
        )
        if self.shared_host:
            text += "; the nodes share one machine (" + self.shared_host_evidence + ")"
        return text


def _scope_of(job: JobView, inputs: list[str], mode: str) -> str:
    if not inputs:
        return "none"
    if mode == "machine":
        return "machine"
    kinds = {"host" if is_host_wide(s) else "node" for s in inputs}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def shared_host(job: JobView) -> tuple[bool | None, str]:
    """Nodes whose host-wide CPU series agree period by period run on one machine."""
    m = job.matrix("cpu.idle_pct[cpu=total,scope=host]")
    if m is None or m.shape[0] < 2:
        return None, ""
    ok = np.isfinite(m).all(axis=0)
    if ok.sum() < 3:
        return None, ""
    v = m[:, ok]
    spread = float(np.mean(v.max(axis=0) - v.min(axis=0)))
    varies = float(np.std(v.mean(axis=0)))
    same = spread < max(1.0, 0.1 * varies)
    evidence = (
        f"host-wide idle CPU differs by {spread:.2f} points on average between nodes, "
        f"while it varies by {varies:.1f} over the job"
    )
    return same, evidence


def describe(job: JobView) -> Scopes:
    mode = "node" if in_node_scope(job) else "machine"
    sc = Scopes(mode)
    for s in job.base_names:
        if mode == "node" and is_host_wide(s):
            sc.host_wide.append(s)
            continue
        measurement = s.split(".", 1)[0]
        source = (
            NODE_SOURCES.get(measurement, "the node")
            if mode == "node"
            else "the node's machine (whole host)"
        )
        sc.node_scoped.setdefault(source, []).append(s)
    for name in DERIVED:
        if not job.has(name):
            continue
        inputs = job.derived_inputs.get(name, [])
        sc.derived[name] = {"from": inputs, "scope": _scope_of(job, inputs, mode)}
    if mode == "node":
        sc.shared_host, sc.shared_host_evidence = shared_host(job)
    return sc
