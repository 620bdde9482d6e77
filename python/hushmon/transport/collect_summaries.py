"""The reducers' summaries into the store, a fetched group at a time, by
appending only.

Each message's rows go to ``summary_rows`` as sent (rack partials and the
top reducer's job-wide summaries, with level, job and period), the message
with its source batches to ``summary_messages``; readers merge the racks of
a (job, period, sensor) through the view ``merged_summaries``
(store/summary_view.py). Nothing stored is deleted or updated here: on a
lake each DELETE writes a delete file and catalog rows, and the
read-merge-DELETE-INSERT this replaced cost the one summary collector 24-39
ms of CPU per message.

A partial whose sources overlap ones already stored for its (level, job,
period) (a reducer that crashed between publishing and acking, its twin
publishing again) is counted, and that (job, period) is rebuilt from the
raw data the store holds into ``summary_rebuilt``; so is every later
partial of a rebuilt (job, period), each rebuild a new set of rows that the
view prefers to the partials. The stored summary stays exact.

A group costs one lookup statement and one vectorized insert per table
(summary_messages, summary_rows; events and rebuilds when there are any),
never a statement per message; the lookup filters on the group's time
range, so DuckDB skips row groups and files by their min/max.

A message's sources are kept as a set of 64-bit hashes in one BLOB
(``summary_messages.source_hashes``, source_hashes.py), not as a list of
(host, epoch, seq) rows or structs: nothing per source is built in Python,
written to the catalog or unnested by the lookup, so a rack partial of
1,750 nodes costs about what one of 40 does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import orjson
import pyarrow as pa

from hushmon.store.summary_view import sketch_rows, summaries_relation
from hushmon.transport.collect_records import CollectStats, Event, Message, sender_of
from hushmon.transport.lake_writer import insert_events
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES
from hushmon.transport.rawsummary import summaries_from_store
from hushmon.transport.source_hashes import (
    EMPTY,
    from_blob,
    overlap,
    source_hashes,
    to_blob,
    union,
)
from hushmon.transport.summary import ALPHA, Sketch, Summary
from hushmon.transport.summary_rows import (
    SensorRows,
    SourceColumns,
    fast_rows,
    fast_source_columns,
)
from hushmon.transport.wire import (
    H_MSG_ID,
    SUM_JOB_PREFIX,
    SUM_RACK_PREFIX,
    SensorKey,
    bad_job,
    bad_name,
    int64_reason,
    parse_sensor_key,
)

JobPeriod = tuple[str, int]  # (job, time_ns)
PartKey = tuple[str, str, int]  # (level, job, time_ns): partials that must not overlap


@dataclass
class ParsedSummary:
    level: str
    rack: str
    job: str
    time_ns: int
    sources: int  # how many the message names
    hashes: np.ndarray  # the sources' hashes, sorted and unique (source_hashes.py)
    sensors: SensorRows

    @property
    def key(self) -> PartKey:
        return (self.level, self.job, self.time_ns)


@dataclass
class _Fresh:
    """A summary not in the store yet, with how many of its sources are."""

    msg_id: str
    msg: Message
    summary: ParsedSummary
    overlap: int = 0


Parsed = list[tuple[str, Message, ParsedSummary]]  # (msg_id, message, summary)


def write_summaries(
    con: duckdb.DuckDBPyConnection,
    parsed: Parsed,
    stats: CollectStats,
    events: list[Event],
) -> None:
    """Stores a group of parsed summary messages and the events of the group;
    the caller holds the transaction. One lookup, then one insert per table."""
    if parsed:
        found = _look_up(con, parsed)
        fresh = _fresh(parsed, found, stats, events)
        if fresh:
            _insert_messages(con, fresh)
            _insert_summaries(
                con,
                "summary_rows",
                (
                    ({"msg_id": f.msg_id, "level": f.summary.level, "job": f.summary.job,
                      "time_ns": f.summary.time_ns}, f.summary.sensors)
                    for f in fresh
                ),
            )  # fmt: skip
            stats.summaries_stored += len(fresh)
            racks = [f for f in fresh if f.summary.level == "rack"]
            _rebuild_overlapped(con, racks, found.rebuilt, stats, events)
    insert_events(con, events)


def store_summary_group(
    messages: list[Message],
    run: Callable[[Callable[[duckdb.DuckDBPyConnection], None]], None],
    total: CollectStats,
) -> None:
    """The group in one transaction, by ``run(body)`` (the store's: a lake's
    retries a commit that met another writer's, running body again); its
    counters are added to ``total`` once it is committed (a group that fails
    is written again per message and must not count twice). The messages
    are parsed before: a lake's transaction holds the commit lock that the
    raw collectors wait for."""
    rejected = CollectStats()
    rejections: list[Event] = []
    parsed = _parsed(messages, rejected, rejections)
    counted = CollectStats()

    def body(con: duckdb.DuckDBPyConnection) -> None:
        nonlocal counted
        counted = CollectStats()
        write_summaries(con, parsed, counted, list(rejections))

    run(body)
    total.add(rejected)
    total.add(counted)
    total.summary_messages += len(messages)


def _parsed(messages: list[Message], stats: CollectStats, events: list[Event]) -> Parsed:
    out = []
    for msg in messages:
        msg_id = (msg.headers or {}).get(H_MSG_ID) or f"{msg.subject}#{msg.stream_seq}"
        parsed = parse_summary(msg.subject, msg.data)
        if isinstance(parsed, str):
            stats.rejected_summaries += 1
            stats.note(f"rejected summary {msg_id[:80]!r} from {sender_of(msg)}: {parsed}")
            events.append(
                Event("summary_rejected", sender_of(msg), msg.subject[:200], None, None, 1, parsed)
            )
        else:
            out.append((msg_id, msg, parsed))
    return out


@dataclass
class _Found:
    """What the store holds of a group: ids stored, per (level, job, period)
    of the group the hashes of every source its stored summaries named, and
    the (job, period)s rebuilt from raw before."""

    stored: set[str]
    sources: dict[PartKey, np.ndarray]
    rebuilt: set[JobPeriod]


# One scan of summary_messages over the group's time range (a message with
# an id has one payload, so one time_ns), three answers. On a lake each table
# a statement reads costs ~15-30 ms of CPU in the catalog whatever it holds,
# so every lookup is in this one statement. A message stored before schema
# 4 has its sources as a list of structs (source_list), hashed here.
_LOOK_UP_SQL = """
WITH s AS MATERIALIZED (
  SELECT msg_id, level, job, time_ns, overlapped, source_hashes, source_list
  FROM summary_messages WHERE time_ns BETWEEN $lo AND $hi
)
SELECT 0 AS kind, msg_id, NULL AS level, NULL AS job, NULL::BIGINT AS time_ns,
       NULL::BLOB AS hashes, NULL AS sources
FROM s WHERE msg_id IN (SELECT msg_id FROM hm_new)
UNION ALL
SELECT DISTINCT 1, NULL, NULL, job, time_ns, NULL, NULL FROM s
WHERE overlapped AND level = 'rack'
UNION ALL
SELECT 2, NULL, s.level, s.job, s.time_ns, s.source_hashes,
       CASE WHEN s.source_hashes IS NULL THEN s.source_list END
FROM s JOIN hm_keys k ON k.level = s.level AND k.job = s.job AND k.time_ns = s.time_ns
"""


def _look_up(con: duckdb.DuckDBPyConnection, parsed: Parsed) -> _Found:
    times = [p.time_ns for _, _, p in parsed]
    keys = sorted({p.key for _, _, p in parsed})
    con.register("hm_new", pa.table({"msg_id": pa.array([m for m, _, _ in parsed], pa.string())}))
    con.register(
        "hm_keys",
        pa.table(
            {
                "level": pa.array([k[0] for k in keys], pa.string()),
                "job": pa.array([k[1] for k in keys], pa.string()),
                "time_ns": pa.array([k[2] for k in keys], pa.int64()),
            }
        ),
    )
    try:
        rows = con.execute(_LOOK_UP_SQL, {"lo": min(times), "hi": max(times)}).fetchall()
    finally:
        con.unregister("hm_new")
        con.unregister("hm_keys")
    found = _Found(set(), {}, set())
    parts: dict[PartKey, list[np.ndarray]] = {}
    for kind, msg_id, level, job, time_ns, hashes, old in rows:
        if kind == 0:
            found.stored.add(msg_id)
        elif kind == 1:
            found.rebuilt.add((job, int(time_ns)))
        else:
            part = from_blob(hashes) if hashes is not None else _hashes_of_list(old)
            parts.setdefault((level, job, int(time_ns)), []).append(part)
    found.sources = {k: union(v) for k, v in parts.items()}
    return found


def _hashes_of_list(sources: list[dict[str, Any]] | None) -> np.ndarray:
    """The hashes of a source list stored before schema 4."""
    if not sources:
        return EMPTY
    return source_hashes(
        [s["host"] for s in sources], [s["epoch"] for s in sources], [s["seq"] for s in sources]
    )


def _fresh(
    parsed: Parsed,
    found: _Found,
    stats: CollectStats,
    events: list[Event],
) -> list[_Fresh]:
    """The messages not stored before (nor earlier in this group), by id,
    each with how many of its sources an earlier summary of the same
    (level, job, period) had: in the store or earlier in this group."""
    stored = set(found.stored)
    seen = dict(found.sources)
    fresh: list[_Fresh] = []
    for msg_id, msg, summary in parsed:
        if msg_id in stored:
            stats.summary_duplicates += 1
            events.append(
                Event(
                    "summary_duplicate",
                    sender_of(msg),
                    msg.subject,
                    None,
                    None,
                    1,
                    f"{msg_id} stored",
                )
            )
            continue
        stored.add(msg_id)
        key = summary.key
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = summary.hashes
            fresh.append(_Fresh(msg_id, msg, summary))
            continue
        fresh.append(_Fresh(msg_id, msg, summary, overlap(summary.hashes, earlier)))
        seen[key] = union([earlier, summary.hashes])
    return fresh


def _insert_messages(con: duckdb.DuckDBPyConnection, fresh: list[_Fresh]) -> None:
    _insert_rows(
        con,
        "summary_messages",
        {
            "msg_id": [f.msg_id for f in fresh],
            "subject": [f.msg.subject for f in fresh],
            "level": [f.summary.level for f in fresh],
            "rack": [f.summary.rack for f in fresh],
            "job": [f.summary.job for f in fresh],
            "time_ns": pa.array([f.summary.time_ns for f in fresh], pa.int64()),
            "sources": pa.array([f.summary.sources for f in fresh], pa.int64()),
            "overlapped": [f.overlap > 0 for f in fresh],
            "source_hashes": pa.array([to_blob(f.summary.hashes) for f in fresh], pa.binary()),
        },
    )


def _rebuild_overlapped(
    con: duckdb.DuckDBPyConnection,
    racks: list[_Fresh],
    rebuilt_before: set[JobPeriod],
    stats: CollectStats,
    events: list[Event],
) -> None:
    """Each (job, period) where a partial overlapped, now or before: its
    summaries from raw data, appended as a new set of summary_rebuilt rows
    (the view takes the newest; their rows already stored stay, unread)."""
    rebuild: list[JobPeriod] = []
    for f in racks:
        key = (f.summary.job, f.summary.time_ns)
        if f.overlap:
            stats.summary_overlaps += 1
            why = f"{f.overlap} source batch(es) already in an earlier partial; rebuilt from raw"
            stats.note(f"summary {f.msg_id} overlaps for job {key[0]} at {key[1]}: {why}")
            events.append(
                Event("summary_overlap", f.summary.rack, f.msg.subject, None, None, f.overlap, why)
            )
        if f.overlap or key in rebuilt_before or key in rebuild:
            stats.summaries_rebuilt += 1
            if key not in rebuild:
                rebuild.append(key)
    if not rebuild:
        return
    built_ns = time.time_ns()
    found = [(key, summaries_from_store(con, *key)) for key in rebuild]
    _insert_summaries(
        con,
        "summary_rebuilt",
        (
            ({"job": k[0], "time_ns": k[1], "built_ns": built_ns}, SensorRows.of(s))
            for k, s in found
            if s
        ),
    )
    # with no raw data yet, a row without a sensor still marks the period
    # rebuilt, so that its overlapping partials are never merged
    empty = [k for k, s in found if not s]
    if empty:
        _insert_rows(
            con,
            "summary_rebuilt",
            {
                "job": pa.array([k[0] for k in empty], pa.string()),
                "time_ns": pa.array([k[1] for k in empty], pa.int64()),
                "built_ns": pa.array([built_ns] * len(empty), pa.int64()),
            },
        )


def read_job_summaries(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int
) -> dict[SensorKey, Summary]:
    """The store's job-wide summaries of (job, period), sketches merged."""
    relation = summaries_relation(con)
    if relation is None:
        return {}
    at = {"job": job, "time_ns": time_ns}
    rows = con.execute(
        f"""SELECT measurement, tags, field, count, sum, mean, m2, min, max
            FROM {relation} WHERE job = $job AND time_ns = $time_ns""",
        at,
    ).fetchall()
    sketches: dict[SensorKey, Sketch] = {}
    for r in con.execute(sketch_rows(relation), at).fetchall():
        part = _sketch_of(*r[3:])
        key = SensorKey(r[0], r[1], r[2])
        if key in sketches:
            sketches[key].merge(part)
        else:
            sketches[key] = part
    return {
        SensorKey(r[0], r[1], r[2]): Summary(
            int(r[3]),
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            sketches.get(SensorKey(r[0], r[1], r[2])) or Sketch(),
        )
        for r in rows
    }


def _sketch_of(
    alpha: float | None,
    zero: int | None,
    pos_keys: list[int] | None,
    pos_counts: list[int] | None,
    neg_keys: list[int] | None,
    neg_counts: list[int] | None,
) -> Sketch:
    """A sketch from the store's columns (NULLs: a sketch stored as '{}')."""
    return Sketch(
        alpha or ALPHA,
        zero or 0,
        dict(zip(pos_keys or (), pos_counts or (), strict=True)),
        dict(zip(neg_keys or (), neg_counts or (), strict=True)),
    )


def _insert_summaries(
    con: duckdb.DuckDBPyConnection,
    table: str,
    groups: Iterable[tuple[dict[str, object], SensorRows]],
) -> None:
    """A row per sensor of every group, the group's own columns (msg_id,
    level, job, time_ns...) repeated on its rows; one Arrow insert (DuckDB's
    executemany goes row by row: 0.24 s for 110 sensors)."""
    own: dict[str, list[object]] = {}
    rows = SensorRows()
    for columns, sensors in groups:
        for name, value in columns.items():
            own.setdefault(name, []).extend([value] * len(sensors))
        rows.extend(sensors)
    if not len(rows):
        return
    (pos_keys, pos_counts), (neg_keys, neg_counts) = rows.pos.arrow(), rows.neg.arrow()
    _insert_rows(
        con,
        table,
        {
            **own,
            "measurement": pa.array([k.measurement for k in rows.keys], pa.string()),
            "tags": pa.array([k.tags for k in rows.keys], pa.string()),
            "field": pa.array([k.field for k in rows.keys], pa.string()),
            "count": pa.array(rows.count, pa.int64()),
            "sum": pa.array(rows.sum, pa.float64()),
            "mean": pa.array(rows.mean, pa.float64()),
            "m2": pa.array(rows.m2, pa.float64()),
            "min": pa.array(rows.min, pa.float64()),
            "max": pa.array(rows.max, pa.float64()),
            "alpha": pa.array(rows.alpha, pa.float64()),
            "zero": pa.array(rows.zero, pa.int64()),
            "pos_keys": pos_keys,
            "pos_counts": pos_counts,
            "neg_keys": neg_keys,
            "neg_counts": neg_counts,
        },
    )


def _insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: dict[str, Any]) -> None:
    names = ", ".join(columns)
    _with_table(
        con, "hm_rows", columns, f"INSERT INTO {table} ({names}) SELECT {names} FROM hm_rows"
    )


def _with_table(
    con: duckdb.DuckDBPyConnection,
    name: str,
    columns: dict[str, Any],
    sql: str,
    params: list[object] | dict[str, object] | None = None,
) -> list[tuple[Any, ...]]:
    """Runs sql with the columns registered as table `name` (Arrow, no copy)."""
    con.register(name, pa.table(columns))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.unregister(name)


def parse_summary(subject: str, data: bytes) -> ParsedSummary | str:
    """A summary message of the contract, or why it breaks it.

    Read by orjson first (0.30 ms for a 34 KB partial where json took 0.99;
    1.24 against 3.26 ms for 111 KB with 1,750 sources) and taken when every
    fast check passes. Anything else is read again as before, by json and
    the exact checks, which say what is wrong: orjson refuses NaN and lone
    surrogates, and reads an integer beyond 64 bits as a float, so its
    reading alone would name another fault or none (the fast checks take
    no float of 2^1000 or more, which json would have read as an integer
    that counts as infinite)."""
    if len(data) > MAX_PAYLOAD_BYTES:
        return f"oversized: {len(data)} bytes > {MAX_PAYLOAD_BYTES}"
    try:
        fast = _parse_object(subject, orjson.loads(data), exact=False)
    except orjson.JSONDecodeError:
        fast = ""
    if isinstance(fast, ParsedSummary):
        return fast
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not JSON ({exc})"
    except RecursionError:
        return "not JSON (nested too deep)"
    return _parse_object(subject, obj, exact=True)


def _parse_object(subject: str, obj: object, exact: bool) -> ParsedSummary | str:
    """The decoded payload checked; without ``exact``, "" where a fast check
    does not accept something (the exact checks decide)."""
    if not isinstance(obj, dict):
        return "payload is not a JSON object"
    if obj.get("v") != 1:
        return f"unknown payload version {str(obj.get('v'))[:20]!r}"
    level = obj.get("level")
    job, rack = obj.get("job"), obj.get("rack", "")
    why = (
        bad_job(job)
        or ("" if isinstance(rack, str) else "rack is not a string")
        or (bad_name("rack", rack) if rack or level == "rack" else "")
    )
    if why:
        return why
    assert isinstance(job, str)  # bad_job says so otherwise
    if level == "rack":
        if subject != SUM_RACK_PREFIX + rack:
            return f"rack partial of rack {rack!r} on subject {subject[:80]!r}"
    elif level == "job":
        if subject != SUM_JOB_PREFIX + job:
            return f"job summary of job {job!r} on subject {subject[:80]!r}"
    else:
        return f"unknown level {str(level)[:20]!r}"
    time_ns = obj.get("time_ns")
    why = int64_reason("time_ns", time_ns, 1)
    if why:
        return why
    raw_sources = obj.get("sources", [])
    if not isinstance(raw_sources, list):
        return "sources is not a list"
    columns: SourceColumns | tuple[list[str], list[int], list[int]] | None = (
        fast_source_columns(raw_sources) if raw_sources else ([], [], [])
    )
    if columns is None:
        if not exact:
            return ""
        hosts: list[str] = []
        epochs: list[int] = []
        seqs: list[int] = []
        columns = hosts, epochs, seqs
        for s in raw_sources:
            if not isinstance(s, list) or len(s) != 3:
                return f"source {str(s)[:80]!r} is not [host, epoch, seq]"
            why = (
                bad_name("source host", s[0])
                or int64_reason("source epoch", s[1])
                or int64_reason("source seq", s[2], 1)
            )
            if why:
                return why
            hosts.append(s[0])
            epochs.append(s[1])
            seqs.append(s[2])
    raw_sensors = obj.get("sensors")
    if not isinstance(raw_sensors, dict):
        return "sensors missing or not an object"
    assert isinstance(time_ns, int)  # int64_reason says so otherwise
    rows = fast_rows(raw_sensors)
    if rows is None:
        if not exact:
            return ""
        checked = _exact_sensors(raw_sensors)
        if isinstance(checked, str):
            return checked
        rows = SensorRows.of(checked)
    hashes = source_hashes(*columns)
    return ParsedSummary(level, rack, job, time_ns, len(raw_sources), hashes, rows)


def _exact_sensors(raw_sensors: dict[str, Any]) -> dict[SensorKey, Summary] | str:
    """Every sensor checked one at a time (summary.py), or what is wrong."""
    sensors: dict[SensorKey, Summary] = {}
    for text, value in raw_sensors.items():
        key = parse_sensor_key(text)
        if isinstance(key, str):
            return key
        try:
            summary = Summary.from_json(value)
        except ValueError as exc:
            return f"sensor {text[:80]!r}: {exc}"
        if key in sensors:
            sensors[key].merge(summary)  # same sensor with tags in another order
        else:
            sensors[key] = summary
    return sensors
