"""A live state that parses a job's summaries only when they are asked for.

The top reducer publishes every job's summary every period (1 s by
default); Prometheus asks every 15-60 s and serves only the newest period.
Parsing each message as it comes (JSON of ~150 KiB for a 64-node job with
its ranks' application values) cost about a core at 1000 nodes, so a
message is only looked at for its period (``"time_ns"``, found without
parsing the JSON) and kept while it belongs to its job's newest period;
``flush`` parses what is kept when an answer is built. A message of an older
period than one already kept is dropped unparsed and counted as
``superseded``; one whose period cannot be found is parsed at once (the
state then counts it as bad or takes it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hushmon.live.state import LiveState

# The reducers write time_ns near the start of the object; a string inside
# cannot hold the pattern (its quotes are escaped), so the first match is
# the object's own key.
_TIME_NS = re.compile(rb'"time_ns"\s*:\s*(\d{1,19})\s*[,}]')
_HEAD_BYTES = 512


def period_of(payload: bytes) -> int | None:
    m = _TIME_NS.search(payload, 0, _HEAD_BYTES) or _TIME_NS.search(payload)
    return int(m.group(1)) if m else None


@dataclass
class _Kept:
    time_ns: int
    messages: list[tuple[bytes, int]] = field(default_factory=list)


@dataclass
class DeferredState(LiveState):
    kept: dict[str, _Kept] = field(default_factory=dict)
    superseded: int = 0

    def add(self, subject: str, payload: bytes, received_ns: int) -> str:
        time_ns = period_of(payload)
        if time_ns is None:
            return super().add(subject, payload, received_ns)
        kept = self.kept.get(subject)
        if kept is None or time_ns > kept.time_ns:
            if kept is not None:
                self.superseded += len(kept.messages)
            self.kept[subject] = _Kept(time_ns, [(payload, received_ns)])
        elif time_ns == kept.time_ns:
            kept.messages.append((payload, received_ns))
        else:
            self.superseded += 1
        return ""

    def flush(self) -> None:
        """Parses the kept messages into the state (at each answer)."""
        for subject, kept in self.kept.items():
            for payload, received_ns in kept.messages:
                super().add(subject, payload, received_ns)
            kept.messages.clear()

    def forget(self, subjects: set[str]) -> None:
        for s in subjects:
            self.kept.pop(s, None)
