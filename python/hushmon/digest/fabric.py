"""What the digest knows of the network between nodes: Slurm's topology.conf.

A site describes its fabric to Slurm as a tree of switches
(``topology/tree``)::

    SwitchName=r1 Nodes=n[1-2] LinkSpeed=1000
    SwitchName=r2 Nodes=n[3-4] LinkSpeed=1000
    SwitchName=core Switches=r[1-2] LinkSpeed=200

A node's *rack* is the leaf switch that lists it; a rack's *uplink* is its
link to the switch that lists it among its ``Switches``. ``LinkSpeed`` is
read as the speed of the links a switch has to what it lists: on a leaf the
node links, on the core the uplinks (Slurm leaves the unit to the site;
``[fabric] linkspeed_unit_bits_per_s`` says which, Mbit/s by default, as
``hushmon testbed`` writes it).

Where the file is found (first that exists): the path given (``hushmon
digest --topology FILE``), ``[fabric] topology_conf`` in the factors'
parameters, the folder of ``$SLURM_CONF``, the folder ``/etc/slurm/slurm.conf``
really lives in (a link to a test bed's), ``/etc/slurm/topology.conf``. When
none is found and an earlier digest of the same job recorded the topology,
that one is used (and said so): a report rebuilt after the bed is gone
still knows its racks. So is it when the file found was written after the
job started (another bed's, up since) and the earlier digest read the racks
from one that was not: ``hushmon compare`` of two beds' runs reads each
job's own racks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError
from hushmon.hostlist import expand_hostlist

DEFAULT_SLURM_DIR = Path("/etc/slurm")


@dataclass
class Switch:
    name: str
    nodes: list[str] = field(default_factory=list)
    switches: list[str] = field(default_factory=list)
    link_speed: float | None = None  # in the file's unit


def parse_topology(text: str, where: str = "topology.conf") -> dict[str, Switch]:
    """Switches of a topology.conf (tree); other lines are ignored."""
    switches: dict[str, Switch] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        for token in line.split():
            key, eq, value = token.partition("=")
            if not eq:
                raise HushmonError(f"{where}:{lineno}: {token!r} is not KEY=VALUE")
            fields[key.lower()] = value
        name = fields.get("switchname")
        if name is None:
            continue  # block topology, comments we do not read
        speed: float | None = None
        if "linkspeed" in fields:
            try:
                speed = float(fields["linkspeed"])
            except ValueError:
                raise HushmonError(
                    f"{where}:{lineno}: LinkSpeed={fields['linkspeed']!r} is not a number"
                ) from None
        switches[name] = Switch(
            name,
            expand_hostlist(fields.get("nodes", "")),
            expand_hostlist(fields.get("switches", "")),
            speed,
        )
    if not switches:
        raise HushmonError(f"{where}: no SwitchName lines")
    return switches


def _short(host: str) -> str:
    return host.split(".", 1)[0]


@dataclass
class Fabric:
    """The racks and link speeds the digest used, and where it learned them."""

    source: str  # the file, or what else it came from
    switches: dict[str, Switch]
    unit_bits_per_s: float
    file_mtime_ns: int | None = None
    origin: str = ""  # the topology.conf it was read from first (source may be a digest)

    def leaf_of(self, host: str) -> str | None:
        for sw in self.switches.values():
            if host in sw.nodes or _short(host) in sw.nodes:
                return sw.name
        return None

    def parent_of(self, switch: str) -> str | None:
        for sw in self.switches.values():
            if switch in sw.switches:
                return sw.name
        return None

    def node_link_bits(self, host: str) -> float | None:
        leaf = self.leaf_of(host)
        speed = self.switches[leaf].link_speed if leaf else None
        return speed * self.unit_bits_per_s if speed else None

    def uplink_bits(self, leaf: str) -> float | None:
        parent = self.parent_of(leaf)
        speed = self.switches[parent].link_speed if parent else None
        return speed * self.unit_bits_per_s if speed else None

    def uplink_text(self, leaf: str) -> str:
        parent = self.parent_of(leaf)
        if parent is None:
            return f"{leaf}: no parent switch"
        speed = self.switches[parent].link_speed
        return (
            f"topology.conf ({self.source}): SwitchName={parent} LinkSpeed={speed:g}, "
            f"read as {self.unit_text()}"
        )

    def unit_text(self) -> str:
        u = self.unit_bits_per_s
        return {1e6: "Mbit/s", 1e9: "Gbit/s", 1e3: "kbit/s", 1.0: "bit/s"}.get(u, f"{u:g} bit/s")

    def racks(self, hosts: list[str]) -> dict[str, list[str]]:
        """Leaf switch -> the given hosts under it (hosts it does not list are left out)."""
        out: dict[str, list[str]] = {}
        for h in hosts:
            leaf = self.leaf_of(h)
            if leaf is not None:
                out.setdefault(leaf, []).append(h)
        return out

    def to_json(self, hosts: list[str]) -> dict[str, Any]:
        return {
            "status": "known",
            "source": self.source,
            "origin": self.origin or self.source,
            "file_mtime": (
                datetime.fromtimestamp(self.file_mtime_ns / 1e9, UTC).isoformat(timespec="seconds")
                if self.file_mtime_ns
                else None
            ),
            "linkspeed_unit_bits_per_s": self.unit_bits_per_s,
            "switches": [
                {
                    "name": s.name,
                    "nodes": s.nodes,
                    "switches": s.switches,
                    "link_speed": s.link_speed,
                }
                for s in self.switches.values()
            ],
            "job_racks": self.racks(hosts),
            "uplink_bits_per_s": {
                leaf: self.uplink_bits(leaf) for leaf in self.racks(hosts) if self.parent_of(leaf)
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str) -> Fabric:
        switches = {
            s["name"]: Switch(s["name"], list(s["nodes"]), list(s["switches"]), s.get("link_speed"))
            for s in data["switches"]
        }
        return cls(
            source,
            switches,
            float(data["linkspeed_unit_bits_per_s"]),
            origin=str(data.get("origin") or data.get("source") or ""),
        )


@dataclass
class FabricInfo:
    """The outcome of looking for the topology: the fabric, or why there is none."""

    fabric: Fabric | None
    tried: list[str]
    note: str = ""  # e.g. "the file is newer than the job"

    def to_json(self, hosts: list[str]) -> dict[str, Any]:
        if self.fabric is None:
            return {"status": "unknown", "tried": self.tried, "note": self.note}
        out = self.fabric.to_json(hosts)
        out["tried"] = self.tried
        out["note"] = self.note
        return out

    def describe(self) -> str:
        if self.fabric is None:
            return "unknown (no topology.conf: tried " + ", ".join(self.tried) + ")"
        text = f"from {self.fabric.source}"
        return text + (f" ({self.note})" if self.note else "")


def candidate_paths(explicit: Path | None, configured: str) -> list[Path]:
    paths: list[Path] = []
    if explicit is not None:
        return [Path(explicit)]
    if configured:
        paths.append(Path(configured))
    slurm_conf = os.environ.get("SLURM_CONF")
    if slurm_conf:
        paths.append(Path(slurm_conf).parent / "topology.conf")
    default_conf = DEFAULT_SLURM_DIR / "slurm.conf"
    try:
        real = default_conf.resolve(strict=True)
        if real.parent != DEFAULT_SLURM_DIR:
            paths.append(real.parent / "topology.conf")
    except OSError:
        pass
    paths.append(DEFAULT_SLURM_DIR / "topology.conf")
    unique: list[Path] = []
    for p in paths:
        if p not in unique:
            unique.append(p)
    return unique


NEWER_THAN_THE_JOB = (
    "the file was written after the job started: it describes the racks as they are now, "
    "which may not be where the job ran"
)


def load_fabric(
    explicit: Path | None,
    params: dict[str, Any],
    job_start_ns: int,
    previous_digest: Path | None = None,
) -> FabricInfo:
    """Finds and reads the topology (see the module's docstring).

    An explicit path that cannot be read is an error; the searched places are not.
    """
    unit = float(params.get("linkspeed_unit_bits_per_s", 1e6))
    tried: list[str] = []
    for path in candidate_paths(explicit, str(params.get("topology_conf", ""))):
        tried.append(str(path))
        try:
            text = path.read_text(encoding="utf-8")
            mtime = path.stat().st_mtime_ns
        except FileNotFoundError:
            if explicit is not None:
                raise HushmonError(f"--topology {path}: no such file") from None
            continue
        except OSError as exc:
            if explicit is not None:
                raise HushmonError(f"--topology {path}: {exc.strerror}") from None
            continue
        fabric = Fabric(str(path), parse_topology(text, str(path)), unit, mtime, str(path))
        if mtime <= job_start_ns:
            return FabricInfo(fabric, tried)
        # written after the job started (another bed brought up since, as when
        # bench_findings compares two beds' runs): an earlier digest that read
        # the racks while the job's own file was there knows better
        recorded = None if explicit is not None else _recorded(previous_digest, tried, True)
        if recorded is not None:
            return FabricInfo(
                recorded,
                tried,
                f"{path} was written after the job started; the racks are the ones the "
                "earlier digest recorded from the file the job ran with",
            )
        return FabricInfo(fabric, tried, NEWER_THAN_THE_JOB)
    recorded = _recorded(previous_digest, tried, while_the_job_ran=False)
    if recorded is not None:
        return FabricInfo(
            recorded, tried, "the file is gone; the racks are the ones the earlier digest recorded"
        )
    return FabricInfo(None, tried)


def _recorded(
    previous_digest: Path | None, tried: list[str], while_the_job_ran: bool
) -> Fabric | None:
    """The racks an earlier digest of the job recorded (with ``while_the_job_ran``: not
    when that digest, too, read a file newer than the job)."""
    if previous_digest is None:
        return None
    tried.append(f"{previous_digest} (an earlier digest of this job)")
    try:
        import json

        old = json.loads(previous_digest.read_text(encoding="utf-8")).get("fabric") or {}
    except (OSError, ValueError):
        old = {}
    if old.get("status") != "known" or (
        while_the_job_ran and old.get("note") == NEWER_THAN_THE_JOB
    ):
        return None
    origin = old.get("origin") or old.get("source")
    return Fabric.from_json(old, f"{origin} as recorded by the earlier digest in {previous_digest}")
