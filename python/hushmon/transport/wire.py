"""The wire contract of docs/transport.md on the Python side: subjects,
headers of a raw batch, message ids and sensor keys.

Every name here is the contract's; change docs/transport.md in the same
commit. Parsing never raises on bad input: it returns the reason, so the
collector can count and log the message and go on.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from hushmon.store import lineproto

RAW_PREFIX = "hm.raw."
SUM_RACK_PREFIX = "hm.sum.rack."
SUM_JOB_PREFIX = "hm.sum.job."
NO_JOB = "-"  # the summary job of a node that runs none

H_MSG_ID = "Nats-Msg-Id"
H_HOST = "Hm-Host"
H_EPOCH = "Hm-Epoch"
H_SEQ = "Hm-Seq"
H_LINES = "Hm-Lines"
H_DROPPED = "Hm-Dropped"
H_REPLAY = "Hm-Replay"


@dataclass(frozen=True)
class BatchHeader:
    """What a raw batch says about itself (its headers and subject)."""

    subject: str
    rack: str
    host: str
    epoch: int
    seq: int
    lines: int
    dropped: int
    replay: bool

    @property
    def msg_id(self) -> str:
        return batch_msg_id(self.host, self.epoch, self.seq)


def batch_msg_id(host: str, epoch: int, seq: int) -> str:
    return f"{host}:{epoch}:{seq}"


def raw_subject(rack: str, host: str) -> str:
    return f"{RAW_PREFIX}{rack}.{host}"


def batch_headers(
    host: str, epoch: int, seq: int, lines: int, dropped: int = 0, replay: bool = False
) -> dict[str, str]:
    """The headers an agent sends with a batch (tests and load generators)."""
    headers = {
        H_MSG_ID: batch_msg_id(host, epoch, seq),
        H_HOST: host,
        H_EPOCH: str(epoch),
        H_SEQ: str(seq),
        H_LINES: str(lines),
        H_DROPPED: str(dropped),
    }
    if replay:
        headers[H_REPLAY] = "1"
    return headers


def _count(headers: dict[str, str], name: str, minimum: int) -> int | str:
    raw = headers.get(name)
    if raw is None:
        return f"header {name} missing"
    try:
        value = int(raw)
    except ValueError:
        return f"header {name}={raw!r} is not a decimal integer"
    if value < minimum:
        return f"header {name}={value} below {minimum}"
    return value


def parse_batch_header(subject: str, headers: dict[str, str] | None) -> BatchHeader | str:
    """The batch's header, or the reason it breaks the contract."""
    parts = subject.split(".")
    if len(parts) != 4 or not subject.startswith(RAW_PREFIX) or not all(parts):
        return f"subject {subject!r} is not hm.raw.<rack>.<host>"
    headers = headers or {}
    host = headers.get(H_HOST, "")
    if not host:
        return f"header {H_HOST} missing"
    if host != parts[3]:
        return f"header {H_HOST}={host} but subject names host {parts[3]}"
    values: list[int] = []
    for name, minimum in ((H_EPOCH, 0), (H_SEQ, 1), (H_LINES, 0)):
        v = _count(headers, name, minimum)
        if isinstance(v, str):
            return v
        values.append(v)
    dropped = _count({H_DROPPED: headers.get(H_DROPPED, "0")}, H_DROPPED, 0)
    if isinstance(dropped, str):
        return dropped
    return BatchHeader(
        subject=subject,
        rack=parts[2],
        host=host,
        epoch=values[0],
        seq=values[1],
        lines=values[2],
        dropped=dropped,
        replay=headers.get(H_REPLAY, "") == "1",
    )


@dataclass(frozen=True, order=True)
class SensorKey:
    """A summary's sensor, split like the store's series: tags sorted, no host."""

    measurement: str
    tags: str  # 'k=v,...' sorted by key, as series.tags
    field: str

    def wire(self) -> str:
        """The contract's key ``<measurement>[,<tags>] <field>`` (tags sorted)."""
        key = self.measurement + ("," + self.tags if self.tags else "")
        return f"{key} {self.field}"

    @property
    def name(self) -> str:
        """The digest's sensor name: ``measurement.field[tags]``."""
        return f"{self.measurement}.{self.field}" + (f"[{self.tags}]" if self.tags else "")


# Every period's summaries repeat the same few hundred keys: parsing each
# again was a third of the collector's time per summary.
@functools.lru_cache(maxsize=1 << 16)
def parse_sensor_key(text: str) -> SensorKey | str:
    """A wire key (tags in line order) as a :class:`SensorKey`, or why it is bad."""
    key, sep, field_name = text.rpartition(" ")
    if not sep or not key or not field_name:
        return f"sensor key {text!r} is not '<measurement>[,<tags>] <field>'"
    try:
        measurement, tags = lineproto.parse_key(key)
    except lineproto.LineError as exc:
        return f"sensor key {text!r}: {exc}"
    tags.pop("host", None)
    return SensorKey(measurement, ",".join(f"{k}={v}" for k, v in sorted(tags.items())), field_name)
