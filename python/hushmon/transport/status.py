"""Loss accounting: ``hushmon transport status``.

Per node, from what the collector recorded in the store: last seen (time,
age), lag (now minus the newest batch's period), batches received and
replayed, batches the agent dropped (its ``Hm-Dropped``), gaps in sequence
numbers (missing ranges per epoch: never arrived, neither stored nor
rejected), duplicates discarded by the store, redeliveries by the stream,
rejected batches with their reason and malformed lines. With ``--url``, the
streams and the collector's consumers as the server sees them (what is
still waiting to be collected).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from hushmon.errors import HushmonError
from hushmon.store.schema import open_store_readonly
from hushmon.store.summary_view import job_period_counts
from hushmon.transport.connect import reachable
from hushmon.transport.natsusers import connect_logged_in

MAX_REASONS = 3


@dataclass
class NodeStatus:
    host: str
    last_seen: str
    age_s: float
    lag_s: float | None
    batches: int
    replayed: int
    dropped_by_agent: int
    gaps: list[tuple[int, int, int]]  # (epoch, first missing seq, last missing seq)
    duplicates_store: int = 0
    redelivered: int = 0
    rejected: int = 0
    malformed_lines: int = 0
    reasons: list[str] = field(default_factory=list)

    @property
    def missing(self) -> int:
        return sum(b - a + 1 for _e, a, b in self.gaps)

    def gaps_text(self) -> str:
        if not self.gaps:
            return "-"
        parts = [f"{a}" if a == b else f"{a}-{b}" for _e, a, b in self.gaps[:4]]
        more = f" +{len(self.gaps) - 4}" if len(self.gaps) > 4 else ""
        return ",".join(parts) + more


@dataclass
class TransportStatus:
    now: str
    nodes: list[NodeStatus]
    summaries: dict[str, Any]
    server: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        nodes = []
        for n in self.nodes:
            d = dict(n.__dict__)
            d["gaps"] = [{"epoch": e, "first": a, "last": b} for e, a, b in n.gaps]
            d["missing"] = n.missing
            nodes.append(d)
        return {"now": self.now, "nodes": nodes, "summaries": self.summaries, "server": self.server}

    def table_lines(self) -> list[str]:
        head = (
            "host",
            "last seen (UTC)",
            "age_s",
            "lag_s",
            "batches",
            "replayed",
            "dropped",
            "missing",
            "gaps (seq)",
            "dup_store",
            "redeliv",
            "rejected",
            "bad_lines",
        )
        rows = [head]
        for n in self.nodes:
            rows.append(
                (
                    n.host,
                    n.last_seen,
                    f"{n.age_s:.1f}",
                    "-" if n.lag_s is None else f"{n.lag_s:.1f}",
                    str(n.batches),
                    str(n.replayed),
                    str(n.dropped_by_agent),
                    str(n.missing),
                    n.gaps_text(),
                    str(n.duplicates_store),
                    str(n.redelivered),
                    str(n.rejected),
                    str(n.malformed_lines),
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        for n in self.nodes:
            out.extend(f"{n.host}: {r}" for r in n.reasons)
        s = self.summaries
        out.append(
            f"summaries: {s['messages']} partial(s), {s['overlapped']} overlapping, "
            f"{s['duplicates']} duplicate(s), {s['rejected']} rejected; "
            f"job summaries: {s['job_periods']} (job, period)s, {s['rebuilt_from_raw']} rebuilt "
            "from raw data"
        )
        out.extend(
            f"summaries rejected from {r['subject']}: x{r['rejected']}: {r['reason']}"
            for r in s.get("rejected_by_sender", [])
        )
        if self.server:
            for name, c in self.server.get("consumers", {}).items():
                out.append(
                    f"consumer {name}: {c['pending']} waiting, {c['ack_pending']} in flight, "
                    f"{c['redelivered']} redelivered; stream {c['stream']} holds "
                    f"{c['stream_messages']} message(s)"
                )
        return out


def _gaps(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[int, int, int]]]:
    # seqs that arrived: stored, or rejected with a known seq
    rows = con.execute(
        """WITH seen AS (
             SELECT host, epoch, seq FROM transport_batches
             UNION SELECT host, epoch, seq FROM transport_events
                   WHERE kind = 'rejected' AND seq IS NOT NULL),
           ordered AS (
             SELECT host, epoch, seq,
                    coalesce(lag(seq) OVER (PARTITION BY host, epoch ORDER BY seq), 0) AS prev
             FROM seen)
           SELECT host, epoch, prev + 1, seq - 1 FROM ordered WHERE seq > prev + 1
           ORDER BY host, epoch, prev"""
    ).fetchall()
    out: dict[str, list[tuple[int, int, int]]] = {}
    for host, epoch, a, b in rows:
        out.setdefault(host, []).append((int(epoch), int(a), int(b)))
    return out


def store_status(db: Path, now_s: float | None = None) -> TransportStatus:
    con = open_store_readonly(db)
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        if "transport_batches" not in tables:
            raise HushmonError(f"{db} has no transport tables: run 'hushmon collect' into it")
        # received_at is the store's current_timestamp (UTC)
        batches = con.execute(
            """SELECT host, count(*), count(*) FILTER (WHERE replay),
                      epoch_ms(max(received_at)), max(period_ns)
               FROM transport_batches GROUP BY host"""
        ).fetchall()
        dropped = dict(
            con.execute(
                """SELECT host, sum(d) FROM (SELECT host, epoch, max(dropped) AS d
                   FROM transport_batches GROUP BY host, epoch) GROUP BY host"""
            ).fetchall()
        )
        events = con.execute(
            """SELECT host, kind, sum(count), epoch_ms(max(seen_at)) FROM transport_events
               WHERE host <> '' AND kind IN ('duplicate', 'redelivered', 'rejected',
                                            'malformed_lines')
               GROUP BY host, kind"""
        ).fetchall()
        reasons = con.execute(
            """SELECT host, kind, reason, sum(count) FROM transport_events
               WHERE kind IN ('rejected', 'malformed_lines') AND host <> ''
               GROUP BY host, kind, reason ORDER BY host, sum(count) DESC"""
        ).fetchall()
        gaps = _gaps(con)
        summaries = _summary_counts(con)
    except duckdb.Error as exc:
        raise HushmonError(f"reading {db}: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    # after the reads: collectors go on writing a lake while it is read, so
    # a clock read before could be older than the newest batch read (age < 0)
    now_s = time.time() if now_s is None else now_s
    nodes: dict[str, NodeStatus] = {}
    for host, n, replayed, seen_ms, period_ns in batches:
        nodes[host] = NodeStatus(
            host=host,
            last_seen=_utc(seen_ms / 1000.0),
            age_s=now_s - seen_ms / 1000.0,
            lag_s=None if period_ns is None else now_s - period_ns / 1e9,
            batches=int(n),
            replayed=int(replayed),
            dropped_by_agent=int(dropped.get(host, 0) or 0),
            gaps=gaps.get(host, []),
        )
    for host, kind, count, at_ms in events:
        node = nodes.get(host)
        if node is None:  # a node seen only through bad messages
            node = nodes[host] = NodeStatus(
                host,
                _utc(at_ms / 1000.0),
                now_s - at_ms / 1000.0,
                None,
                0,
                0,
                0,
                gaps.get(host, []),
            )
        if kind == "duplicate":
            node.duplicates_store += int(count)
        elif kind == "redelivered":
            node.redelivered += int(count)
        elif kind == "rejected":
            node.rejected += int(count)
        elif kind == "malformed_lines":
            node.malformed_lines += int(count)
    for host, kind, reason, count in reasons:
        node = nodes[host]
        if len(node.reasons) < MAX_REASONS:
            what = "rejected" if kind == "rejected" else "malformed lines"
            node.reasons.append(f"{what} x{int(count)}: {reason}")
    return TransportStatus(_utc(now_s), sorted(nodes.values(), key=lambda n: n.host), summaries)


def _summary_counts(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    row = con.execute(
        """SELECT count(*), count(*) FILTER (WHERE overlapped) FROM summary_messages"""
    ).fetchall()[0]
    ev = dict(
        con.execute(
            """SELECT kind, sum(count) FROM transport_events
               WHERE kind IN ('summary_duplicate', 'summary_rejected') GROUP BY kind"""
        ).fetchall()
    )
    # the reducers (a rack's, the top's) whose summaries were rejected, by subject
    senders = con.execute(
        """SELECT subject, sum(count), any_value(reason) FROM transport_events
           WHERE kind = 'summary_rejected' GROUP BY subject ORDER BY 2 DESC, 1 LIMIT ?""",
        [MAX_REASONS],
    ).fetchall()
    jp = job_period_counts(con)
    return {
        "messages": int(row[0]),
        "overlapped": int(row[1]),
        "duplicates": int(ev.get("summary_duplicate", 0) or 0),
        "rejected": int(ev.get("summary_rejected", 0) or 0),
        "job_periods": jp[0],
        "rebuilt_from_raw": jp[1],
        "rejected_by_sender": [
            {"subject": subj, "rejected": int(n), "reason": why} for subj, n, why in senders
        ],
    }


def _utc(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, UTC).strftime("%Y-%m-%d %H:%M:%S")


async def _server_status_async(url: str) -> dict[str, Any]:
    from nats.js.errors import NotFoundError

    from hushmon.transport.collector import RAW_CONSUMER, SUM_CONSUMER
    from hushmon.transport.natsserver import RAW_STREAM, SUM_STREAM

    why = reachable(url, 2.0)
    if why:
        raise HushmonError(f"cannot reach NATS at {url} ({why})", exit_code=1)
    nc = await asyncio.wait_for(
        connect_logged_in(
            url, connect_timeout=2.0, max_reconnect_attempts=1, allow_reconnect=False
        ),
        timeout=10.0,
    )
    try:
        js = nc.jetstream(timeout=5.0)
        consumers: dict[str, Any] = {}
        for stream, name in ((RAW_STREAM, RAW_CONSUMER), (SUM_STREAM, SUM_CONSUMER)):
            try:
                info = await js.consumer_info(stream, name)
                sinfo = await js.stream_info(stream)
            except NotFoundError:
                consumers[name] = {
                    "stream": stream,
                    "pending": None,
                    "ack_pending": None,
                    "redelivered": None,
                    "stream_messages": None,
                }
                continue
            consumers[name] = {
                "stream": stream,
                "pending": int(info.num_pending or 0),
                "ack_pending": int(info.num_ack_pending or 0),
                "redelivered": int(info.num_redelivered or 0),
                "stream_messages": int(sinfo.state.messages),
            }
        return {"url": url, "consumers": consumers}
    finally:
        await nc.close()


def server_status(url: str) -> dict[str, Any]:
    from nats.errors import Error as NatsError

    try:
        return asyncio.run(_server_status_async(url))
    except (OSError, TimeoutError, NatsError) as exc:
        raise HushmonError(
            f"cannot read the streams at {url} ({type(exc).__name__}: {exc})", exit_code=1
        ) from exc
