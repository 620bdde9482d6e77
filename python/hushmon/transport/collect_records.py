"""What the collector's two write paths (raw batches, summaries) share: the
message as the store sees it, the counters, and the events it records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hushmon.transport.wire import H_HOST, bad_name

MAX_LOGGED = 200  # reasons kept for the final report; all are in transport_events


@dataclass
class Message:
    """One JetStream message as the store sees it (no nats-py types here)."""

    subject: str
    headers: dict[str, str] | None
    data: bytes
    stream_seq: int = 0
    delivered: int = 1


@dataclass
class CollectStats:
    raw_messages: int = 0
    batches_stored: int = 0
    lines_stored: int = 0
    values_stored: int = 0
    duplicate_batches: int = 0
    redelivered: int = 0
    rejected_batches: int = 0
    malformed_lines: int = 0
    summary_messages: int = 0
    summaries_stored: int = 0
    summary_duplicates: int = 0
    summary_overlaps: int = 0
    summaries_rebuilt: int = 0
    rejected_summaries: int = 0
    log: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        if len(self.log) < MAX_LOGGED:
            self.log.append(line)

    def add(self, other: CollectStats) -> None:
        """Adds another's counters and log (a group counted apart)."""
        for name, value in other.__dict__.items():
            if isinstance(value, int):
                setattr(self, name, getattr(self, name) + value)
        for line in other.log:
            self.note(line)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class Event:
    """A row of transport_events: a message not stored (or stored otherwise), and why."""

    kind: str
    host: str
    subject: str
    epoch: int | None
    seq: int | None
    count: int
    reason: str


def sender_of(msg: Message) -> str:
    """Who a message comes from, safe to store and print: a raw batch's
    subject host (hm.raw.<rack>.<host>: the one subject a node's login may
    publish, so the server vouches for it; its Hm-Host header is only a
    claim), else the Hm-Host header or the subject's last token (a rack
    reducer's rack, the top reducer's job), escaped when it is not a name."""
    parts = msg.subject.split(".")
    from_node = len(parts) == 4 and parts[:2] == ["hm", "raw"]
    host = parts[3] if from_node else ""
    host = host or (msg.headers or {}).get(H_HOST, "") or parts[-1]
    if bad_name("sender", host):
        return host[:40].encode("unicode_escape").decode("ascii") or "?"
    return host
