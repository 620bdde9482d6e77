"""What a bed that is up consists of, kept in one JSON file so `status`,
`down`, `hushmon run` and the tests can find it.

The state directory is on tmpfs (/run) on purpose: a reboot removes the
namespaces and daemons, and with them the state that described them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.testbed.cgroups import Layout
from hushmon.testbed.spec import BedSpec, Node

STATE_DIR = Path(os.environ.get("HUSHMON_TESTBED_DIR", "/run/hushmon-testbed"))


@dataclass
class Bed:
    spec: BedSpec
    data_root: Path  # the hushmon data folder: spool/<node>/ per node
    cgroups: Layout
    daemons: dict[str, int] = field(default_factory=dict)  # name -> pid
    slurm_conf: Path | None = None
    root: Path = STATE_DIR

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def logs(self) -> Path:
        """Daemon logs live with the data, so they outlive the bed for a post-mortem."""
        return self.data_root / "testbed" / "logs"

    @property
    def spool_root(self) -> Path:
        return self.data_root / "spool"

    @property
    def store(self) -> Path:
        """The bed's store: a lake `hushmon collect` writes with transport
        nats; `hushmon run` builds its digests there while it collects."""
        return self.data_root / "hushmon.lake"

    @property
    def nats_conf_dir(self) -> Path:
        """nats-server configurations (their paths name the state folder, so
        `down` finds the servers by command line too)."""
        return self.root / "nats"

    @property
    def nats_store(self) -> Path:
        """JetStream's files, with the data (not on /run's tmpfs)."""
        return self.data_root / "testbed" / "nats"

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / node

    def uts_file(self, node: str) -> Path:
        return self.node_dir(node) / "uts"

    def mnt_file(self, node: str) -> Path:
        return self.node_dir(node) / "mnt"

    def agent_socket(self, node: str) -> Path:
        return self.node_dir(node) / "agent.sock"

    def node_spool(self, node: str) -> Path:
        return self.spool_root / node

    def node_exec(self) -> Path:
        """``node-exec NODE COMMAND...``: run a command inside a node."""
        return self.bin / "node-exec"

    def rsh(self) -> Path:
        """An ssh stand-in for MPI launchers: ``rsh NODE COMMAND-STRING``."""
        return self.bin / "rsh"

    def nodes(self) -> list[Node]:
        return self.spec.node_list()

    def node(self, name: str) -> Node:
        for n in self.nodes():
            if n.name == name:
                return n
        names = ", ".join(n.name for n in self.nodes())
        raise HushmonError(f"no node '{name}' in the bed (nodes: {names})")

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_json(),
            "data_root": str(self.data_root),
            "cgroups": self.cgroups.to_json(),
            "daemons": self.daemons,
            "slurm_conf": str(self.slurm_conf) if self.slurm_conf else None,
        }

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        jsonio.write_atomic(self.state_file, self.to_json())


def load(root: Path = STATE_DIR) -> Bed | None:
    """The bed that is up, or None."""
    path = root / "state.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise HushmonError(
            f"the bed's state file {path} is unreadable ({exc}): 'hushmon testbed down' clears it"
        ) from exc
    try:
        return Bed(
            spec=BedSpec.from_json(data["spec"]),
            data_root=Path(data["data_root"]),
            cgroups=Layout.from_json(data["cgroups"]),
            daemons={str(k): int(v) for k, v in data.get("daemons", {}).items()},
            slurm_conf=Path(data["slurm_conf"]) if data.get("slurm_conf") else None,
            root=root,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise HushmonError(
            f"the bed's state file {path} is damaged ({exc}): 'hushmon testbed down' clears it"
        ) from exc
