"""Which summary sensors the live views show, in one table.

A summary's sensor is ``<measurement>[,<tags>] <field>`` (docs/transport.md);
a key sensor names the sensors that may stand for it, in order of
preference (the host-wide cpu line before the job-cgroup one). A sensor
with a ``vary`` tag (the network interface, the disk) is read on every
value of that tag but those in ``skip``, and the busiest (largest max)
is shown. To show another sensor: add a line to :data:`KEY_SENSORS`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field

from hushmon.store import lineproto
from hushmon.transport.summary import Summary


@dataclass(frozen=True)
class Candidate:
    measurement: str
    field: str
    tags: Mapping[str, str] = dc_field(default_factory=dict)
    vary: str = ""  # a tag that may take any value but those in skip
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class KeySensor:
    label: str  # short: a column heading in top
    unit: str  # '%', 'B/s', '' ...
    candidates: tuple[Candidate, ...]


def _cpu(name: str) -> tuple[Candidate, ...]:
    return (
        Candidate("cpu", name, {"cpu": "total", "scope": "host"}),
        Candidate("cpu", name, {"cpu": "total"}),
    )


KEY_SENSORS: tuple[KeySensor, ...] = (
    KeySensor("cpu usr", "%", _cpu("user_pct")),
    KeySensor("cpu sys", "%", _cpu("system_pct")),
    KeySensor(
        "mem used",
        "%",
        (Candidate("mem", "used_pct", {"scope": "host"}), Candidate("mem", "used_pct")),
    ),
    KeySensor(
        "load1", "", (Candidate("load", "load1", {"scope": "host"}), Candidate("load", "load1"))
    ),
    KeySensor("net rx", "B/s", (Candidate("net", "rx_bytes_per_s", vary="iface", skip=("lo",)),)),
    KeySensor("net tx", "B/s", (Candidate("net", "tx_bytes_per_s", vary="iface", skip=("lo",)),)),
    KeySensor(
        "disk busy",
        "%",
        (Candidate("disk", "busy_pct", {"scope": "host"}, vary="device"),),
    ),
)

# Application channel (docs/formats.md): one sensor per (job, rank, name);
# the live view merges the ranks of a name.
APP_MEASUREMENTS: tuple[tuple[str, str, str, str], ...] = (
    # measurement, name tag, field shown, unit
    ("app", "metric", "mean", ""),
    ("app_phase", "phase", "mean_s", "s"),
)


@dataclass(frozen=True)
class ParsedSensor:
    measurement: str
    tags: tuple[tuple[str, str], ...]  # sorted, host left out
    field: str

    def tag(self, name: str) -> str:
        return dict(self.tags).get(name, "")


@functools.lru_cache(maxsize=65536)  # a cluster has a few thousand keys, sent every period
def parse_sensor(wire_key: str) -> ParsedSensor | None:
    """A summary's sensor key split (host dropped), None when it is not a key."""
    key, sep, field_name = wire_key.rpartition(" ")
    if not sep or not key or not field_name:
        return None
    try:
        measurement, tags = lineproto.parse_key(key)
    except lineproto.LineError:
        return None
    tags.pop("host", None)
    return ParsedSensor(measurement, tuple(sorted(tags.items())), field_name)


def _matches(c: Candidate, s: ParsedSensor) -> bool:
    if s.measurement != c.measurement or s.field != c.field:
        return False
    tags = dict(s.tags)
    if c.vary:
        value = tags.pop(c.vary, None)
        if value is None or value in c.skip:
            return False
    return tags == dict(c.tags)


def pick(ks: KeySensor, sensors: Mapping[ParsedSensor, Summary]) -> tuple[str, Summary] | None:
    """The summary standing for ``ks`` and what it is (its tag value when it
    varies), or None when the summaries have none of its candidates."""
    for c in ks.candidates:
        found = [(s, v) for s, v in sensors.items() if _matches(c, s)]
        if found:
            s, v = max(found, key=lambda sv: sv[1].max)
            return (s.tag(c.vary) if c.vary else "", v)
    return None
