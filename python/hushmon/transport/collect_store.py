"""What ``hushmon collect`` does to the store: raw batches and summaries in
transactions, idempotently, with every message it does not store counted.

Raw batches go through the same parsing and storing as ``hushmon ingest``
(:mod:`hushmon.store.ingest`), so samples, series and job_activity look
exactly as if the spool files had been ingested. A batch is identified by
(host, epoch, seq); one already in ``transport_batches`` changes nothing.
A batch whose lines carry another host tag than its ``Hm-Host`` header is
rejected whole: never stored under another node's name.

Summaries: rack partials are merged into ``job_summaries`` per (job,
period, sensor); a partial whose sources overlap ones already merged is
counted and that (job, period) is rebuilt from the raw data the store
holds, so the stored summary stays exact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.store import lineproto
from hushmon.store.fastparse import FastBatch, parse_batch
from hushmon.store.ingest import IngestReport, _Ingester, _Parsed, _SpoolFile, canonical_key
from hushmon.store.schema import open_store
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES
from hushmon.transport.rawsummary import summaries_from_store
from hushmon.transport.summary import Summary
from hushmon.transport.wire import (
    H_HOST,
    H_MSG_ID,
    SUM_JOB_PREFIX,
    SUM_RACK_PREFIX,
    BatchHeader,
    SensorKey,
    parse_batch_header,
    parse_sensor_key,
)

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

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class _Event:
    kind: str
    host: str
    subject: str
    epoch: int | None
    seq: int | None
    count: int
    reason: str


@dataclass
class _Accepted:
    header: BatchHeader
    message: Message
    file: _SpoolFile


def _event_host(msg: Message) -> str:
    """The node a bad message claims to come from: its header, else its subject."""
    host = (msg.headers or {}).get(H_HOST, "")
    return host or msg.subject.rsplit(".", 1)[-1]


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

    def close(self) -> None:
        self.con.close()

    # ---- raw batches -------------------------------------------------------

    def write_raw(self, messages: list[Message]) -> list[bytes]:
        """Stores the batches not stored yet, in one transaction; returns the
        stored batches' bytes (for forwarding). Raises HushmonError when the
        store fails (nothing of the call is then stored, nothing must be acked)."""
        events: list[_Event] = []
        accepted = self._accept(messages, events)
        fresh = self._not_stored(accepted, events)
        if fresh:
            fresh = self._drop_liars(fresh, events)
        try:
            if fresh:
                self._ingest(fresh, events)
            elif events:
                self._exec("BEGIN TRANSACTION")
                try:
                    self._insert_events(events)
                    self._exec("COMMIT")
                except BaseException:
                    self._exec("ROLLBACK")
                    raise
        except duckdb.Error as exc:
            # the ingester's series cache may hold ids of the rolled-back batch
            self._ingester = _Ingester(self.con, IngestReport(self.db_path, Path("-")), False)
            raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc
        self.stats.raw_messages += len(messages)
        for e in events:
            if e.kind == "duplicate":
                self.stats.duplicate_batches += 1
            elif e.kind == "redelivered":
                self.stats.redelivered += 1
            elif e.kind == "rejected":
                self.stats.rejected_batches += 1
                self.stats.note(f"rejected batch from {e.host} ({e.subject}): {e.reason}")
            elif e.kind == "malformed_lines":
                self.stats.malformed_lines += e.count
                self.stats.note(f"{e.count} malformed line(s) from {e.host}: {e.reason}")
        self.stats.batches_stored += len(fresh)
        self.stats.lines_stored += sum(a.file.lines for a in fresh)
        return [a.message.data for a in fresh]

    def _accept(self, messages: list[Message], events: list[_Event]) -> list[_Accepted]:
        out: list[_Accepted] = []
        for msg in messages:
            header = parse_batch_header(msg.subject, msg.headers)
            if msg.delivered > 1:
                host = header.host if isinstance(header, BatchHeader) else _event_host(msg)
                events.append(
                    _Event("redelivered", host, msg.subject, None, None, 1, "redelivered")
                )
            if isinstance(header, str):
                events.append(
                    _Event("rejected", _event_host(msg), msg.subject, None, None, 1, header)
                )
                continue
            reason = ""
            if len(msg.data) > self.max_batch_bytes:
                reason = f"oversized: {len(msg.data)} bytes > {self.max_batch_bytes}"
            elif not msg.data.strip():
                reason = "empty batch"
            if reason:
                events.append(
                    _Event(
                        "rejected", header.host, msg.subject, header.epoch, header.seq, 1, reason
                    )
                )
                continue
            data = msg.data if msg.data.endswith(b"\n") else msg.data + b"\n"
            spool = _SpoolFile(Path(header.msg_id), data, "", False, data.count(b"\n"))
            out.append(_Accepted(header, msg, spool))
        return out

    def _not_stored(self, accepted: list[_Accepted], events: list[_Event]) -> list[_Accepted]:
        if not accepted:
            return []
        keys = pa.table(
            {
                "host": [a.header.host for a in accepted],
                "epoch": pa.array([a.header.epoch for a in accepted], pa.int64()),
                "seq": pa.array([a.header.seq for a in accepted], pa.int64()),
            }
        )
        self.con.register("hm_keys", keys)
        try:
            stored = set(
                self.con.execute(
                    """SELECT b.host, b.epoch, b.seq FROM transport_batches b
                       JOIN hm_keys k USING (host, epoch, seq)"""
                ).fetchall()
            )
        finally:
            self.con.unregister("hm_keys")
        out: list[_Accepted] = []
        for a in accepted:
            key = (a.header.host, a.header.epoch, a.header.seq)
            if key in stored:
                h = a.header
                why = "batch already stored (same host, epoch, seq)"
                events.append(_Event("duplicate", h.host, h.subject, h.epoch, h.seq, 1, why))
                continue
            stored.add(key)
            out.append(a)
        return out

    def _drop_liars(self, fresh: list[_Accepted], events: list[_Event]) -> list[_Accepted]:
        """Batches whose lines name another host than their header are rejected whole."""
        data = b"".join(a.file.data for a in fresh)
        fast = _fast_or_none(data)
        lies: dict[int, str] = {}
        if fast is None:
            for i, a in enumerate(fresh):
                why = _lie_exact(a.header.host, a.file.data.decode("utf-8", errors="replace"))
                if why:
                    lies[i] = why
        else:
            lies = _lies_fast(fresh, data, fast)
        for i, why in sorted(lies.items()):
            h = fresh[i].header
            events.append(_Event("rejected", h.host, h.subject, h.epoch, h.seq, 1, why))
        return [a for i, a in enumerate(fresh) if i not in lies]

    def _ingest(self, fresh: list[_Accepted], events: list[_Event]) -> None:
        data = b"".join(a.file.data for a in fresh)
        fast = _fast_or_none(data)
        parsed = _Parsed([a.file for a in fresh], data, fast)
        period = _newest_time_per_batch(fresh, fast)
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
                    _Event(
                        "malformed_lines",
                        h.host,
                        h.subject,
                        h.epoch,
                        h.seq,
                        len(reasons),
                        reasons[0],
                    )
                )
            table = pa.table(
                {
                    "host": [a.header.host for a in fresh],
                    "epoch": pa.array([a.header.epoch for a in fresh], pa.int64()),
                    "seq": pa.array([a.header.seq for a in fresh], pa.int64()),
                    "lines": pa.array([a.file.lines for a in fresh], pa.int64()),
                    "period_ns": pa.array(period, pa.int64()),
                    "dropped": pa.array([a.header.dropped for a in fresh], pa.int64()),
                    "replay": pa.array([a.header.replay for a in fresh], pa.bool_()),
                    "subject": [a.header.subject for a in fresh],
                    "stream_seq": pa.array([a.message.stream_seq for a in fresh], pa.int64()),
                }
            )
            con.register("hm_batches", table)
            try:
                con.execute(
                    """INSERT INTO transport_batches
                       (host, epoch, seq, lines, period_ns, dropped, replay, subject, stream_seq)
                       SELECT * FROM hm_batches"""
                ).fetchall()
            finally:
                con.unregister("hm_batches")
            self._insert_events(events)

        self._ingester.ingest(parsed, before_commit=record)
        self.stats.values_stored += report.values_stored

    def _insert_events(self, events: list[_Event]) -> None:
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
        """Stores the partials in one transaction (see the module's doc)."""
        events: list[_Event] = []
        try:
            self._exec("BEGIN TRANSACTION")
            try:
                for msg in messages:
                    self._one_summary(msg, events)
                self._insert_events(events)
                self._exec("COMMIT")
            except BaseException:
                self._exec("ROLLBACK")
                raise
        except duckdb.Error as exc:
            raise HushmonError(f"store {self.db_path}: {str(exc).splitlines()[0]}") from exc
        self.stats.summary_messages += len(messages)

    def _one_summary(self, msg: Message, events: list[_Event]) -> None:
        msg_id = (msg.headers or {}).get(H_MSG_ID) or f"{msg.subject}#{msg.stream_seq}"
        parsed = parse_summary(msg.subject, msg.data)
        if isinstance(parsed, str):
            self.stats.rejected_summaries += 1
            self.stats.note(f"rejected summary {msg_id} ({msg.subject}): {parsed}")
            events.append(_Event("summary_rejected", "", msg.subject, None, None, 1, parsed))
            return
        if self._exec("SELECT 1 FROM summary_messages WHERE msg_id = ?", [msg_id]):
            self.stats.summary_duplicates += 1
            events.append(
                _Event("summary_duplicate", "", msg.subject, None, None, 1, f"{msg_id} stored")
            )
            return
        level, job, time_ns = parsed.level, parsed.job, parsed.time_ns
        overlap = 0
        if parsed.sources:
            src = pa.table(
                {
                    "host": [s[0] for s in parsed.sources],
                    "epoch": pa.array([s[1] for s in parsed.sources], pa.int64()),
                    "seq": pa.array([s[2] for s in parsed.sources], pa.int64()),
                }
            )
            self.con.register("hm_src", src)
            try:
                overlap = int(
                    self._exec(
                        """SELECT count(*) FROM summary_sources s JOIN hm_src n
                           USING (host, epoch, seq)
                           WHERE s.level = ? AND s.job = ? AND s.time_ns = ?""",
                        [level, job, time_ns],
                    )[0][0]
                )
                self._exec(
                    "INSERT INTO summary_sources SELECT ?, ?, ?, ?, host, epoch, seq FROM hm_src",
                    [msg_id, level, job, time_ns],
                )
            finally:
                self.con.unregister("hm_src")
        self._exec(
            "INSERT INTO summary_messages (msg_id, subject, level, rack, job, time_ns, sources, "
            "overlapped) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                msg_id,
                msg.subject,
                level,
                parsed.rack,
                job,
                time_ns,
                len(parsed.sources),
                overlap > 0,
            ],
        )
        self._insert_summaries("summary_partials", {"msg_id": msg_id}, parsed.sensors, {})
        self.stats.summaries_stored += 1
        if level != "rack":
            return  # job-wide merges are kept as sent; the store builds its own from racks
        rebuilt = self._exec(
            "SELECT 1 FROM job_summaries WHERE job = ? AND time_ns = ? AND origin = 'raw' LIMIT 1",
            [job, time_ns],
        )
        if overlap:
            self.stats.summary_overlaps += 1
            why = f"{overlap} source batch(es) already in an earlier partial; rebuilt from raw"
            self.stats.note(f"summary {msg_id} overlaps for job {job} at {time_ns}: {why}")
            events.append(
                _Event("summary_overlap", parsed.rack, msg.subject, None, None, overlap, why)
            )
        if overlap or rebuilt:
            self._rebuild(job, time_ns)
        else:
            self._merge(job, time_ns, parsed.sensors)

    def _merge(self, job: str, time_ns: int, sensors: dict[SensorKey, Summary]) -> None:
        current = read_job_summaries(self.con, job, time_ns)
        for key, part in sensors.items():
            current.setdefault(key, Summary(sketch=type(part.sketch)(part.sketch.alpha))).merge(
                part
            )
        self._replace(job, time_ns, current, "merged")

    def _rebuild(self, job: str, time_ns: int) -> None:
        self.stats.summaries_rebuilt += 1
        self._replace(job, time_ns, summaries_from_store(self.con, job, time_ns), "raw")

    def _replace(
        self, job: str, time_ns: int, sensors: dict[SensorKey, Summary], origin: str
    ) -> None:
        self._exec("DELETE FROM job_summaries WHERE job = ? AND time_ns = ?", [job, time_ns])
        if not sensors:
            return
        self._insert_summaries(
            "job_summaries", {"job": job, "time_ns": time_ns}, sensors, {"origin": origin}
        )

    def _insert_summaries(
        self,
        table: str,
        before: dict[str, object],
        sensors: dict[SensorKey, Summary],
        after: dict[str, object],
    ) -> None:
        """One Arrow insert of a summary row per sensor: DuckDB's executemany
        goes row by row and took 0.24 s for a partial of 110 sensors."""
        if not sensors:
            return
        n = len(sensors)
        items = list(sensors.items())
        columns: dict[str, pa.Array] = {k: pa.array([v] * n) for k, v in before.items()}
        columns |= {
            "measurement": pa.array([k.measurement for k, _ in items], pa.string()),
            "tags": pa.array([k.tags for k, _ in items], pa.string()),
            "field": pa.array([k.field for k, _ in items], pa.string()),
            "count": pa.array([s.count for _, s in items], pa.int64()),
            "sum": pa.array([s.sum for _, s in items], pa.float64()),
            "mean": pa.array([s.mean for _, s in items], pa.float64()),
            "m2": pa.array([s.m2 for _, s in items], pa.float64()),
            "min": pa.array([s.min for _, s in items], pa.float64()),
            "max": pa.array([s.max for _, s in items], pa.float64()),
            "sketch": pa.array([s.sketch_text() for _, s in items], pa.string()),
        }
        columns |= {k: pa.array([v] * n) for k, v in after.items()}
        self.con.register("hm_rows", pa.table(columns))
        try:
            names = ", ".join(columns)
            self._exec(f"INSERT INTO {table} ({names}) SELECT {names} FROM hm_rows")
        finally:
            self.con.unregister("hm_rows")


def read_job_summaries(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int
) -> dict[SensorKey, Summary]:
    """The store's job-wide summaries of (job, period)."""
    from hushmon.transport.summary import Sketch

    rows = con.execute(
        """SELECT measurement, tags, field, count, sum, mean, m2, min, max, sketch
           FROM job_summaries WHERE job = ? AND time_ns = ?""",
        [job, time_ns],
    ).fetchall()
    return {
        SensorKey(r[0], r[1], r[2]): Summary(
            int(r[3]), r[4], r[5], r[6], r[7], r[8], Sketch.from_json(json.loads(r[9]))
        )
        for r in rows
    }


@dataclass
class ParsedSummary:
    level: str
    rack: str
    job: str
    time_ns: int
    sources: list[tuple[str, int, int]]
    sensors: dict[SensorKey, Summary]


def parse_summary(subject: str, data: bytes) -> ParsedSummary | str:
    """A summary message of the contract, or why it breaks it."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not JSON ({exc})"
    if not isinstance(obj, dict):
        return "payload is not a JSON object"
    if obj.get("v") != 1:
        return f"unknown payload version {obj.get('v')!r}"
    level = obj.get("level")
    job, rack = obj.get("job"), obj.get("rack", "")
    if not isinstance(job, str) or not job or not isinstance(rack, str):
        return "job (or rack) missing or not a string"
    if level == "rack":
        if subject != SUM_RACK_PREFIX + rack:
            return f"rack partial of rack {rack!r} on subject {subject}"
    elif level == "job":
        if subject != SUM_JOB_PREFIX + job:
            return f"job summary of job {job!r} on subject {subject}"
    else:
        return f"unknown level {level!r}"
    time_ns = obj.get("time_ns")
    if not isinstance(time_ns, int) or isinstance(time_ns, bool):
        return "time_ns missing or not an integer"
    sources: list[tuple[str, int, int]] = []
    for s in obj.get("sources", []):
        if (
            not isinstance(s, list)
            or len(s) != 3
            or not isinstance(s[0], str)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in s[1:])
        ):
            return f"source {s!r} is not [host, epoch, seq]"
        sources.append((s[0], s[1], s[2]))
    raw_sensors = obj.get("sensors")
    if not isinstance(raw_sensors, dict):
        return "sensors missing or not an object"
    sensors: dict[SensorKey, Summary] = {}
    for text, value in raw_sensors.items():
        key = parse_sensor_key(text)
        if isinstance(key, str):
            return key
        try:
            summary = Summary.from_json(value)
        except ValueError as exc:
            return f"sensor {text!r}: {exc}"
        if key in sensors:
            sensors[key].merge(summary)  # same sensor with tags in another order
        else:
            sensors[key] = summary
    return ParsedSummary(level, rack, job, time_ns, sources, sensors)


# ---- helpers of the raw path ----------------------------------------------


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


def _batch_of_line(fresh: list[_Accepted], fast: FastBatch) -> np.ndarray:
    sizes = np.array([len(a.file.data) for a in fresh], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    return np.searchsorted(starts, fast.line_starts[:-1], side="right") - 1


def _lies_fast(fresh: list[_Accepted], data: bytes, fast: FastBatch) -> dict[int, str]:
    batch_of_line = _batch_of_line(fresh, fast)
    key_host = []
    for k in fast.keys:
        c = canonical_key(k)
        key_host.append("" if isinstance(c, str) else c[0])
    lies: dict[int, str] = {}
    if len(fast.key_id):
        header_host = np.array([a.header.host for a in fresh], dtype=object)
        value_host = np.array([*key_host, ""], dtype=object)[fast.key_id]
        claimed = header_host[batch_of_line[fast.line]]
        wrong = (value_host != claimed) & (value_host != "")
        for i in np.flatnonzero(wrong).tolist():
            b = int(batch_of_line[fast.line[i]])
            if b not in lies:
                line_no = int(fast.line[i]) - int(np.searchsorted(batch_of_line, b)) + 1
                lies[b] = (
                    f"line {line_no} tagged host={value_host[i]}, headers say "
                    f"{H_HOST}={fresh[b].header.host}"
                )
    for line in fast.exact_lines.tolist():
        b = int(batch_of_line[line])
        if b in lies:
            continue
        start, end = int(fast.line_starts[line]), int(fast.line_starts[line + 1])
        why = _lie_exact(fresh[b].header.host, data[start:end].decode("utf-8"))
        if why:
            lies[b] = why.replace(
                "line 1 ", f"line {line - int(np.searchsorted(batch_of_line, b)) + 1} "
            )
    return lies


def _newest_time_per_batch(fresh: list[_Accepted], fast: FastBatch | None) -> list[int | None]:
    """The newest line timestamp of each batch (its period), for the lag."""
    if fast is None or not len(fast.time_ns):
        return [None] * len(fresh)
    batch_of_line = _batch_of_line(fresh, fast)
    newest = np.full(len(fresh), -1, dtype=np.int64)
    np.maximum.at(newest, batch_of_line[fast.line], fast.time_ns)
    return [int(t) if t >= 0 else None for t in newest.tolist()]
