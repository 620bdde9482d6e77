"""The wire contract of docs/transport.md on the Python side: subjects,
headers of a raw batch, message ids and sensor keys.

Every name here is the contract's; change docs/transport.md in the same
commit. Parsing never raises on bad input: it returns the reason, so the
collector can count and log the message and go on.
"""

from __future__ import annotations

import functools
import re
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

# Bounds of what the wire may carry. Every counter is stored as BIGINT, and a
# header above it (or in digits of another script, which int() takes) once
# raised in the middle of a group and stopped the collector for good.
INT64_MAX = 2**63 - 1
_DECIMAL = re.compile(r"[0-9]{1,19}")
# A host or rack is one NATS subject token and a host name label: what the
# agent's config accepts, less what no host name holds (slashes, quotes,
# control and non-ASCII characters), so it is safe in a path or a terminal.
NAME_MAX = 128
_NAME = re.compile(rf"[A-Za-z0-9_][A-Za-z0-9_+-]{{0,{NAME_MAX - 1}}}")


def bad_name(what: str, value: object) -> str:
    """Why ``value`` is not a host or rack name; empty when it is one."""
    if not isinstance(value, str):
        return f"{what} is not a string"
    if not _NAME.fullmatch(value):
        shown = value[:40].encode("unicode_escape").decode("ascii")
        return f"{what} {shown!r} is not a name ([A-Za-z0-9_+-], at most {NAME_MAX})"
    return ""


_JOB = re.compile(rf"[A-Za-z0-9_.:+-]{{1,{NAME_MAX}}}")


def bad_job(value: object) -> str:
    """Why ``value`` is not a job id (the agent's characters, Slurm's array
    and het-job ids, ``-`` for none); empty when it is one. Never a path of
    its own: not only dots."""
    if not isinstance(value, str):
        return "job is not a string"
    if not _JOB.fullmatch(value) or not value.strip("."):
        shown = value[:40].encode("unicode_escape").decode("ascii")
        return f"job {shown!r} is not a job id ([A-Za-z0-9_.:+-], at most {NAME_MAX})"
    return ""


def int64_reason(what: str, value: object, minimum: int = 0) -> str:
    """Why a JSON value is not an integer in [minimum, INT64_MAX]; empty when it is."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{what} is not an integer"
    if not minimum <= value <= INT64_MAX:
        return f"{what}={value} outside [{minimum}, 2^63-1]"
    return ""


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
    if not _DECIMAL.fullmatch(raw):
        shown = raw[:40].encode("unicode_escape").decode("ascii")
        return f"header {name}={shown!r} is not a decimal integer below 2^63"
    value = int(raw)
    why = int64_reason(f"header {name}", value, minimum)
    return why or value


def parse_batch_header(subject: str, headers: dict[str, str] | None) -> BatchHeader | str:
    """The batch's header, or the reason it breaks the contract."""
    parts = subject.split(".")
    if len(parts) != 4 or not subject.startswith(RAW_PREFIX):
        shown = subject[:80].encode("unicode_escape").decode("ascii")
        return f"subject {shown!r} is not hm.raw.<rack>.<host>"
    why = bad_name("the subject's rack", parts[2]) or bad_name("the subject's host", parts[3])
    if why:
        return why
    headers = headers or {}
    host = headers.get(H_HOST, "")
    if not host:
        return f"header {H_HOST} missing"
    if host != parts[3]:
        return f"header {H_HOST}={host[:40]!r} but subject names host {parts[3]}"
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
