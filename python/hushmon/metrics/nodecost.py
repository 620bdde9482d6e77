"""hushmon's own cost per node, from what each agent publishes.

Every raw batch (``hm.raw.<rack>.<host>``, docs/transport.md) carries the
agent's ``hushmon_agent`` line (docs/formats.md: CPU time of its previous
cycle, which includes writing the spool and publishing; lateness; resident
size; samples dropped) and the ``Hm-Dropped`` header (batches dropped before
they were published). The batch's own size is the publish cost in bytes.
Only that one line of a batch is parsed; the rest is not read.

A node whose newest batch is older than the keep time drops out, so the
table holds the nodes that report, not every node ever seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from hushmon.store import lineproto
from hushmon.transport import wire

_LINE = b"hushmon_agent,"


@dataclass
class NodeCost:
    host: str
    rack: str
    received_ns: int
    time_ns: int = 0  # the hushmon_agent line's sampling instant
    cycle_cpu_s: float | None = None
    period_s: float | None = None
    jitter_s: float | None = None
    rss_bytes: float | None = None
    samples_dropped: float | None = None
    batches_dropped: int = 0
    batch_bytes: int = 0
    batch_lines: int = 0


def _agent_line(data: bytes) -> lineproto.ParsedLine | None:
    """The batch's hushmon_agent line, parsed; None when it has none."""
    if data.startswith(_LINE):
        start = 0
    else:
        at = data.find(b"\n" + _LINE)
        if at < 0:
            return None
        start = at + 1
    end = data.find(b"\n", start)
    text = data[start : end if end >= 0 else len(data)].decode("utf-8", "replace")
    try:
        return lineproto.parse_line(text)
    except lineproto.LineError:
        return None


def _num(fields: dict[str, float], name: str, scale: float = 1.0) -> float | None:
    v = fields.get(name)
    return v * scale if isinstance(v, (int, float)) else None


@dataclass
class NodeCosts:
    nodes: dict[str, NodeCost]
    batches: int = 0
    bad: int = 0
    last_error: str = ""

    @classmethod
    def empty(cls) -> NodeCosts:
        return cls({})

    def add(self, subject: str, headers: dict[str, str] | None, data: bytes, now_ns: int) -> str:
        """Takes one raw batch; '' or why it was refused (counted)."""
        self.batches += 1
        h = wire.parse_batch_header(subject, headers)
        if isinstance(h, str):
            self.bad += 1
            self.last_error = h
            return h
        node = self.nodes.get(h.host)
        if node is None or node.rack != h.rack:
            node = self.nodes[h.host] = NodeCost(h.host, h.rack, now_ns)
        node.received_ns = now_ns
        node.batches_dropped = h.dropped
        node.batch_bytes = len(data)
        node.batch_lines = h.lines
        line = _agent_line(data)
        if line is not None and line.tags.get("host") == h.host:
            f = line.fields
            node.time_ns = line.time_ns
            node.cycle_cpu_s = _num(f, "cpu_us", 1e-6)
            node.period_s = _num(f, "period_ms", 1e-3)
            node.jitter_s = _num(f, "jitter_us", 1e-6)
            node.rss_bytes = _num(f, "rss_bytes")
            node.samples_dropped = _num(f, "samples_dropped")
        return ""

    def prune(self, now_ns: int, keep_s: float) -> None:
        """Forgets the nodes not heard from for ``keep_s``."""
        gone = [h for h, n in self.nodes.items() if (now_ns - n.received_ns) / 1e9 > keep_s]
        for h in gone:
            del self.nodes[h]
