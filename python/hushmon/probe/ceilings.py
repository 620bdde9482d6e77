"""The stored roofline ceilings: one record per node type (CPU model + online
CPUs), in ``<data>/probe/ceilings.json``.

Why a file in the data folder and not the store: the store's tables hold
time series under versioned schemas in two engines (the embedded DuckDB file
and the lake), while a cluster has a handful of node types probed once each;
one small JSON file next to the store is read by a digest of either, can be
copied from one site's data folder to another's, and is edited by nothing
but ``hushmon probe``. The digest finds it beside the store it reads
(``<store's folder>/probe/ceilings.json``), so ``--db`` pointing at another
folder's store finds that folder's ceilings.

A record names the hosts it holds for (host-list patterns, ``node[01-64]``).
The digest maps a job's host to a record through these lists first; a host
in none is matched by its CPU model and online CPU count, which the agent
publishes as node metadata (its ``cpu_info`` source), against the records'
node type keys (:func:`find_record`); a host matched by neither is named.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.hostlist import expand_hostlist

FILE_VERSION = 1


def ceilings_path(folder: Path) -> Path:
    """The ceilings file of a data folder (or of the folder holding a store)."""
    return folder / "probe" / "ceilings.json"


def node_type_key(cpu_model: str, online_cpus: int) -> str:
    return f"{cpu_model} / {online_cpus} CPUs"


# What the agent cannot keep in a tag value (its cpu_info model), made spaces.
_NOT_IN_TAGS = re.compile(r'[,=\[\]"\\\x00-\x1f]')


def normal_model(model: str) -> str:
    """A CPU model as the agent's cpu_info tag spells it: the characters a tag
    cannot keep in the store made spaces, runs of blanks one space, trimmed; so
    the probe's model and the agent's compare equal."""
    return " ".join(_NOT_IN_TAGS.sub(" ", model).split())


@dataclass
class Ceilings:
    """One node type's ceilings as ``hushmon-probe`` measured them."""

    cpu_model: str
    online_cpus: int
    gb_per_s: float  # triad bandwidth, all allowed CPUs
    gflop_per_s: float  # peak double precision, all allowed CPUs
    isa: str  # the FMA kernel's instruction set
    threads: int
    beyond_llc: bool  # the triad's arrays were 4 x the last-level cache or more
    array_bytes: int
    probed_host: str
    measured_at: str  # ISO 8601, UTC
    load_avg: str  # /proc/loadavg when measured: a shared node's figures move with it
    hosts: list[str] = field(default_factory=list)  # host-list patterns of this type

    @property
    def key(self) -> str:
        return node_type_key(self.cpu_model, self.online_cpus)

    @property
    def ridge_flop_per_byte(self) -> float:
        """The arithmetic intensity where the two roofs meet."""
        return self.gflop_per_s / self.gb_per_s

    def covers(self, host: str) -> bool:
        return any(host in expand_hostlist(pattern) for pattern in self.hosts)

    def is_type(self, cpu_model: str, online_cpus: int) -> bool:
        """Whether a node of this CPU model and online CPU count is of this type."""
        return (
            self.online_cpus == online_cpus
            and normal_model(self.cpu_model) == normal_model(cpu_model)
            and normal_model(cpu_model) != "unknown"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["key"] = self.key
        out["ridge_flop_per_byte"] = round(self.ridge_flop_per_byte, 4)
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> Ceilings:
        names = Ceilings.__dataclass_fields__
        c = Ceilings(**{k: v for k, v in d.items() if k in names})
        if not (c.gb_per_s > 0 and c.gflop_per_s > 0):
            raise ValueError(f"record {c.key}: ceilings must be positive")
        return c


BY_HOST_LIST = "host list"
BY_CPU_MODEL = "CPU model"


def find_record(
    records: list[Ceilings], host: str, cpu_model: str | None = None, online_cpus: int | None = None
) -> tuple[Ceilings | None, str]:
    """The record for ``host`` and how it was found: a record whose host list
    names it, else one of its CPU model and online CPU count (the agent's
    cpu_info); an "unknown" model matches nothing (Arm kernels without one)."""
    for r in records:
        if r.covers(host):
            return r, BY_HOST_LIST
    if cpu_model is not None and online_cpus is not None:
        for r in records:
            if r.is_type(cpu_model, online_cpus):
                return r, BY_CPU_MODEL
    return None, ""


def load_ceilings(path: Path) -> list[Ceilings]:
    """Every record of a ceilings file; none when there is no file."""
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text())
        if doc.get("version") != FILE_VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {FILE_VERSION}")
        return [Ceilings.from_json(r) for r in doc["records"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise HushmonError(f"{path}: not a ceilings file ({exc})", exit_code=1) from exc


def save_ceilings(path: Path, records: list[Ceilings]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": FILE_VERSION, "records": [r.to_json() for r in records]}
    jsonio.write_atomic(path, doc)


def store_record(path: Path, new: Ceilings) -> list[Ceilings]:
    """Adds or replaces the record of ``new``'s node type; its hosts are kept
    and ``new``'s added."""
    records = load_ceilings(path)
    for i, old in enumerate(records):
        if old.key == new.key:
            new.hosts = sorted(set(old.hosts) | set(new.hosts))
            records[i] = new
            break
    else:
        records.append(new)
    save_ceilings(path, records)
    return records
