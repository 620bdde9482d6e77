"""What ``hushmon collect`` does to the store: raw batches and summaries in
transactions, idempotently, with every message it does not store counted.

Raw batches go through the same parsing and storing as ``hushmon ingest``
(:mod:`hushmon.store.ingest`), so samples, series and job_activity look
exactly as if the spool files had been ingested. A batch is identified by
(host, epoch, seq); one already in ``transport_batches`` changes nothing.
A batch whose lines carry another host tag than its ``Hm-Host`` header is
rejected whole: never stored under another node's name.

Summaries: :mod:`hushmon.transport.collect_summaries`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.store import lineproto
from hushmon.store.fastparse import FastBatch, parse_batch
from hushmon.store.ingest import IngestReport, _Ingester, _LineKeys, _Parsed, _SpoolFile
from hushmon.store.schema import open_store
from hushmon.store.transaction import in_transaction
from hushmon.transport.collect_records import CollectStats, Event, Message, sender_of
from hushmon.transport.collect_summaries import store_summary_group
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES
from hushmon.transport.raw_group import BATCHES_SCHEMA
from hushmon.transport.set_aside import write_or_set_aside
from hushmon.transport.wire import H_HOST, BatchHeader, parse_batch_header

__all__ = ["COLLECT_MEMORY_MIB", "CollectStats", "CollectorStore", "Message"]


@dataclass
class _Accepted:
    header: BatchHeader
    message: Message
    file: _SpoolFile


# DuckDB's buffer manager may take 80 % of the machine's memory by default:
# a collector running for months beside other services keeps its own bound
# (inserts spill nothing; the store's pages are read back as needed).
COLLECT_MEMORY_MIB = 512


class CollectorStore:
    """The collector's writer: one open store, one transaction per call."""

    def __init__(
        self,
        db_path: Path,
        max_batch_bytes: int = MAX_PAYLOAD_BYTES,
        memory_mib: int = COLLECT_MEMORY_MIB,
    ) -> None:
        self.db_path = Path(db_path)
        self.max_batch_bytes = max_batch_bytes
        self.stats = CollectStats()
        self.con = open_store(self.db_path)
        self.con.execute(f"SET memory_limit = '{int(memory_mib)}MiB'").fetchall()
        self._ingester = _Ingester(self.con, IngestReport(self.db_path, Path("-")), False)
        # the newest seq stored per (host, epoch), from the store itself, so it
        # holds after a restart; raised after each commit (_not_stored)
        self._newest_seq: dict[tuple[str, int], int] = {
            (host, int(epoch)): int(seq)
            for host, epoch, seq in self.con.execute(
                "SELECT host, epoch, max(seq) FROM transport_batches GROUP BY host, epoch"
            ).fetchall()
        }

    def close(self) -> None:
        self.con.close()

    # ---- raw batches -------------------------------------------------------

    def write_raw(self, messages: list[Message]) -> list[bytes]:
        """Stores the batches not stored yet, in one transaction; returns the
        stored batches' bytes (for forwarding). Raises HushmonError when the
        store fails (nothing of the call is then stored, nothing must be acked).
        A message that breaks the group any other way is set aside alone:
        the rest is stored, it is counted as rejected (:meth:`_set_aside`)."""
        try:
            return self._write_raw_group(messages)
        except Exception as exc:  # noqa: BLE001 - a store failure or a poison message
            self._after_failed_group(exc)
            if len(messages) == 1:
                self._set_aside(messages[0], exc, "rejected")
                return []
            return [data for m in messages for data in self.write_raw([m])]

    def _write_raw_group(self, messages: list[Message]) -> list[bytes]:
        events: list[Event] = []
        accepted = accept_batches(messages, self.max_batch_bytes, events)
        fresh = self._not_stored(accepted, events)
        group = self._drop_liars(fresh, events) if fresh else None
        if group is not None:
            fresh = group.fresh
            self._ingest(group, events)
            for a in fresh:
                key = (a.header.host, a.header.epoch)
                self._newest_seq[key] = max(self._newest_seq.get(key, 0), a.header.seq)
        else:
            fresh = []
            if events:
                self._in_transaction(lambda: self._insert_events(events))
        self.stats.raw_messages += len(messages)
        count_raw_events(self.stats, events)
        self.stats.batches_stored += len(fresh)
        self.stats.lines_stored += sum(a.file.lines for a in fresh)
        return [a.message.data for a in fresh]

    def _after_failed_group(self, exc: Exception) -> None:
        """The group was rolled back: a failure of the store itself stops the
        call (nothing is acked); any other error is a message's, and the
        caller writes the group's messages one at a time to find it."""
        # the ingester's series cache may hold ids of the rolled-back group
        self._ingester = _Ingester(self.con, IngestReport(self.db_path, Path("-")), False)
        if _store_failure(exc):
            raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc

    def _set_aside(self, msg: Message, exc: Exception, kind: str) -> None:
        """A message that fails alone is poison: recorded with its sender and
        acked, so it can neither stop collection nor hold back the valid
        messages fetched with it (unacked, it came back on every restart)."""
        sender = sender_of(msg)
        why = f"not storable ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        event = Event(kind, sender, msg.subject[:200], None, None, 1, why)
        try:
            self._in_transaction(lambda: self._insert_events([event]))
        except Exception as again:
            raise HushmonError(f"store {self.db_path}: {again}") from again
        if kind == "rejected":
            self.stats.raw_messages += 1
            self.stats.rejected_batches += 1
        else:
            self.stats.summary_messages += 1
            self.stats.rejected_summaries += 1
        self.stats.note(f"set aside a message from {sender} ({msg.subject[:80]}): {why}")

    def _in_transaction(self, body: Callable[[], None]) -> None:
        in_transaction(self.con, lambda _con: body())

    def _not_stored(self, accepted: list[_Accepted], events: list[Event]) -> list[_Accepted]:
        """The batches not in transport_batches (nor earlier in the group).
        A batch above the newest seq stored for its (host, epoch) cannot be
        stored: it is new without a look at the table (a join per group that
        scanned the whole table). Only the others (an agent's replay, a
        redelivery) are looked up."""
        maybe_stored = [
            a
            for a in accepted
            if a.header.seq <= self._newest_seq.get((a.header.host, a.header.epoch), 0)
        ]
        stored = self._stored_keys(maybe_stored) if maybe_stored else set()
        out: list[_Accepted] = []
        for a in accepted:
            key = (a.header.host, a.header.epoch, a.header.seq)
            if key in stored:
                h = a.header
                why = "batch already stored (same host, epoch, seq)"
                events.append(Event("duplicate", h.host, h.subject, h.epoch, h.seq, 1, why))
                continue
            stored.add(key)
            out.append(a)
        return out

    def _stored_keys(self, accepted: list[_Accepted]) -> set[tuple[str, int, int]]:
        keys = pa.table(
            {
                "host": [a.header.host for a in accepted],
                "epoch": pa.array([a.header.epoch for a in accepted], pa.int64()),
                "seq": pa.array([a.header.seq for a in accepted], pa.int64()),
            }
        )
        self.con.register("hm_keys", keys)
        try:
            return set(
                self.con.execute(
                    """SELECT b.host, b.epoch, b.seq FROM transport_batches b
                       JOIN hm_keys k USING (host, epoch, seq)"""
                ).fetchall()
            )
        finally:
            self.con.unregister("hm_keys")

    def _drop_liars(self, fresh: list[_Accepted], events: list[Event]) -> _Group | None:
        """The group less the batches whose lines name another host than
        their header (rejected whole), parsed; None when none is left."""
        group = _Group.of(fresh)
        lies = _liars(group, self._ingester.keys)
        if not lies:
            return group
        for i, why in sorted(lies.items()):
            h = fresh[i].header
            events.append(Event("rejected", h.host, h.subject, h.epoch, h.seq, 1, why))
        honest = [a for i, a in enumerate(fresh) if i not in lies]
        return _Group.of(honest) if honest else None  # parsed again: liars are rare

    def _ingest(self, group: _Group, events: list[Event]) -> None:
        fresh = group.fresh
        parsed = _Parsed([a.file for a in fresh], group.data, group.fast)
        period = _newest_time_per_batch(group)
        report = IngestReport(self.db_path, Path("-"))
        self._ingester.report = report

        def record(con: duckdb.DuckDBPyConnection) -> None:
            by_name = {a.header.msg_id: a.header for a in fresh}
            bad: dict[str, list[str]] = {}
            for r in report.rejected:
                bad.setdefault(r.file, []).append(f"line {r.line}: {r.reason}")
            for name, reasons in bad.items():
                h = by_name[name]
                events.append(
                    Event(
                        "malformed_lines",
                        h.host,
                        h.subject,
                        h.epoch,
                        h.seq,
                        len(reasons),
                        reasons[0],
                    )
                )
            table = batches_table(fresh, period)
            con.register("hm_batches", table)
            try:
                con.execute(
                    f"INSERT INTO transport_batches ({', '.join(table.column_names)}) "
                    "SELECT * FROM hm_batches"
                ).fetchall()
            finally:
                con.unregister("hm_batches")
            self._insert_events(events)

        self._ingester.ingest(parsed, before_commit=record)
        self.stats.values_stored += report.values_stored

    def _insert_events(self, events: list[Event]) -> None:
        if not events:
            return
        self.con.executemany(
            "INSERT INTO transport_events (kind, host, subject, epoch, seq, count, reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[e.kind, e.host, e.subject, e.epoch, e.seq, e.count, e.reason] for e in events],
        )

    def _exec(self, sql: str, params: object = None) -> list[tuple[Any, ...]]:
        return self.con.execute(sql, params).fetchall()

    # ---- summaries ---------------------------------------------------------

    def write_summaries(self, messages: list[Message]) -> None:
        """Stores the summaries in one transaction (collect_summaries.py); a
        message that breaks the group is set aside as in write_raw."""

        def run(body: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
            self._in_transaction(lambda: body(self.con))

        write_or_set_aside(
            messages,
            lambda group: store_summary_group(group, run, self.stats),
            self._after_failed_group,
            lambda msg, exc: self._set_aside(msg, exc, "summary_rejected"),
        )


def accept_batches(
    messages: list[Message], max_batch_bytes: int, events: list[Event]
) -> list[_Accepted]:
    """The messages whose headers follow the contract (wire.py) and whose
    payload is neither empty nor oversized; the others become events (a
    redelivery is an event too, and still accepted)."""
    out: list[_Accepted] = []
    for msg in messages:
        header = parse_batch_header(msg.subject, msg.headers)
        if msg.delivered > 1:
            host = header.host if isinstance(header, BatchHeader) else sender_of(msg)
            events.append(Event("redelivered", host, msg.subject, None, None, 1, "redelivered"))
        if isinstance(header, str):
            events.append(Event("rejected", sender_of(msg), msg.subject, None, None, 1, header))
            continue
        reason = ""
        if len(msg.data) > max_batch_bytes:
            reason = f"oversized: {len(msg.data)} bytes > {max_batch_bytes}"
        elif not msg.data or msg.data.isspace():
            reason = "empty batch"
        if reason:
            events.append(
                Event("rejected", header.host, msg.subject, header.epoch, header.seq, 1, reason)
            )
            continue
        data = msg.data if msg.data.endswith(b"\n") else msg.data + b"\n"
        spool = _SpoolFile(header.msg_id, data, "", False, data.count(b"\n"))
        out.append(_Accepted(header, msg, spool))
    return out


def count_raw_events(stats: CollectStats, events: list[Event]) -> None:
    """The raw path's events into the counters (and the report's log)."""
    for e in events:
        if e.kind == "duplicate":
            stats.duplicate_batches += 1
        elif e.kind == "redelivered":
            stats.redelivered += 1
        elif e.kind == "rejected":
            stats.rejected_batches += 1
            stats.note(f"rejected batch from {e.host} ({e.subject}): {e.reason}")
        elif e.kind == "malformed_lines":
            stats.malformed_lines += e.count
            stats.note(f"{e.count} malformed line(s) from {e.host}: {e.reason}")


def _store_failure(exc: BaseException) -> bool:
    """Errors of the store itself (disk, memory, a lock, a closed or broken
    connection), not of a message: nothing may be acked."""
    return isinstance(
        exc,
        OSError
        | MemoryError
        | duckdb.IOException
        | duckdb.OutOfMemoryException
        | duckdb.FatalException
        | duckdb.TransactionException
        | duckdb.ConnectionException
        | duckdb.PermissionException
        | duckdb.InterruptException,
    )


# ---- helpers of the raw path ----------------------------------------------


@dataclass
class _Group:
    """The fresh batches of a fetched group as one buffer, parsed once for
    both the host check and the ingest."""

    fresh: list[_Accepted]
    data: bytes
    fast: FastBatch | None  # None: not valid UTF-8 (every line to the exact parser)
    batch_of_line: np.ndarray  # the batch (index in fresh) of each line, when fast

    @staticmethod
    def of(fresh: list[_Accepted]) -> _Group:
        data = b"".join(a.file.data for a in fresh)
        fast = _fast_or_none(data)
        batch_of_line = np.zeros(0, dtype=np.int64)
        if fast is not None:
            sizes = np.array([len(a.file.data) for a in fresh], dtype=np.int64)
            starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            batch_of_line = np.searchsorted(starts, fast.line_starts[:-1], side="right") - 1
        return _Group(fresh, data, fast, batch_of_line)


def _fast_or_none(data: bytes) -> FastBatch | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return parse_batch(data)


def _lie_exact(host: str, text: str) -> str:
    for no, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line or line.startswith("#"):
            continue
        try:
            tagged = lineproto.parse_line(line).tags.get("host", "")
        except lineproto.LineError:
            continue  # malformed lines are the ingester's to reject and count
        if tagged and tagged != host:
            return f"line {no} tagged host={tagged}, headers say {H_HOST}={host}"
    return ""


def _liars(group: _Group, keys: _LineKeys) -> dict[int, str]:
    """Batches (index in the group) whose lines name another host than their
    header, with the first such line: they are rejected whole. ``keys``: the
    ingester's, so each line key is worked out once for both."""
    fresh, fast = group.fresh, group.fast
    lies: dict[int, str] = {}
    if fast is None:
        for i, a in enumerate(fresh):
            why = _lie_exact(a.header.host, a.file.data.decode("utf-8", errors="replace"))
            if why:
                lies[i] = why
        return lies
    batch_of_line = group.batch_of_line
    if len(fast.key_id):
        # hosts as integers: one comparison per value, no Python per value
        key_ids = keys.key_ids(fast.keys)  # first: it extends keys.host
        value_host = keys.host[key_ids][fast.key_id]
        claimed = np.array([keys.host_id(a.header.host) for a in fresh], dtype=np.int64)
        value_batch = batch_of_line[fast.line]
        wrong = (value_host != claimed[value_batch]) & (value_host >= 0)
        for i in np.flatnonzero(wrong).tolist():
            b = int(value_batch[i])
            if b not in lies:
                line_no = int(fast.line[i]) - int(np.searchsorted(batch_of_line, b)) + 1
                lies[b] = (
                    f"line {line_no} tagged host={keys.hosts[value_host[i]]}, headers say "
                    f"{H_HOST}={fresh[b].header.host}"
                )
    for line in fast.exact_lines.tolist():
        b = int(batch_of_line[line])
        if b in lies:
            continue
        start, end = int(fast.line_starts[line]), int(fast.line_starts[line + 1])
        why = _lie_exact(fresh[b].header.host, group.data[start:end].decode("utf-8"))
        if why:
            lies[b] = why.replace(
                "line 1 ", f"line {line - int(np.searchsorted(batch_of_line, b)) + 1} "
            )
    return lies


def _newest_time_per_batch(group: _Group) -> list[int | None]:
    """The newest line timestamp of each batch (its period), for the lag."""
    fast = group.fast
    if fast is None or not len(fast.time_ns):
        return [None] * len(group.fresh)
    newest = np.full(len(group.fresh), -1, dtype=np.int64)
    np.maximum.at(newest, group.batch_of_line[fast.line], fast.time_ns)
    return [int(t) if t >= 0 else None for t in newest.tolist()]


def batches_table(accepted: list[_Accepted], period: list[int | None]) -> pa.Table:
    """The transport_batches rows of accepted batches (both stores)."""
    now = pa.scalar(int(time.time() * 1e6), pa.timestamp("us"))
    return pa.table(
        {
            "host": [a.header.host for a in accepted],
            "epoch": pa.array([a.header.epoch for a in accepted], pa.int64()),
            "seq": pa.array([a.header.seq for a in accepted], pa.int64()),
            "lines": pa.array([a.file.lines for a in accepted], pa.int64()),
            "period_ns": pa.array(period, pa.int64()),
            "dropped": pa.array([a.header.dropped for a in accepted], pa.int64()),
            "replay": pa.array([a.header.replay for a in accepted], pa.bool_()),
            "subject": [a.header.subject for a in accepted],
            "stream_seq": pa.array([a.message.stream_seq for a in accepted], pa.int64()),
            "received_at": pa.array([now.value] * len(accepted), pa.timestamp("us")),
        },
        schema=BATCHES_SCHEMA,
    )
