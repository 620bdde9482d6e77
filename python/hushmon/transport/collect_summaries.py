"""The reducers' summaries into the store, a fetched group at a time.

Rack partials are merged into ``job_summaries`` per (job, period, sensor); a
partial whose sources overlap ones already merged (a reducer that crashed
between publishing and acking, its twin publishing again) is counted, and
that (job, period) is rebuilt from the raw data the store holds, so the
stored summary stays exact. Job-wide summaries are kept as sent.

Every step is one statement for the whole group, never one per message: at
a 100 ms period on 4 nodes the per-message statements (about 10 each, 1-2
ms apiece in a growing store) held the collector at ~30 summaries/s, below
what the reducers send (bench/demo_live_bed.py's run fell minutes behind).
The statements that look a message up filter on the group's time range too,
so DuckDB skips row groups by their min/max instead of scanning the tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa

from hushmon.transport.collect_records import CollectStats, Event, Message, sender_of
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES
from hushmon.transport.rawsummary import summaries_from_store
from hushmon.transport.summary import Sketch, Summary
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


@dataclass
class ParsedSummary:
    level: str
    rack: str
    job: str
    time_ns: int
    sources: list[tuple[str, int, int]]
    sensors: dict[SensorKey, Summary]


@dataclass
class _Fresh:
    """A summary not in the store yet, with how many of its sources are."""

    msg_id: str
    msg: Message
    summary: ParsedSummary
    overlap: int = 0


def write_summaries(
    con: duckdb.DuckDBPyConnection,
    messages: list[Message],
    stats: CollectStats,
    events: list[Event],
) -> None:
    """Stores a group of summary messages; the caller holds the transaction."""
    fresh = _not_stored(con, _parsed(messages, stats, events), stats, events)
    if not fresh:
        return
    sources = _source_columns(fresh)
    _count_overlaps(con, fresh, sources)
    if len(sources["idx"]):
        _insert_rows(con, "summary_sources", {k: v for k, v in sources.items() if k != "idx"})
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
            "sources": pa.array([len(f.summary.sources) for f in fresh], pa.int64()),
            "overlapped": [f.overlap > 0 for f in fresh],
        },
    )
    _insert_summaries(
        con,
        "summary_partials",
        (({"msg_id": f.msg_id}, f.summary.sensors) for f in fresh),
    )
    stats.summaries_stored += len(fresh)
    _merge_rack_partials(con, [f for f in fresh if f.summary.level == "rack"], stats, events)


def _parsed(
    messages: list[Message], stats: CollectStats, events: list[Event]
) -> list[tuple[str, Message, ParsedSummary]]:
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


def _not_stored(
    con: duckdb.DuckDBPyConnection,
    parsed: list[tuple[str, Message, ParsedSummary]],
    stats: CollectStats,
    events: list[Event],
) -> list[_Fresh]:
    """Drops the messages stored before (or earlier in this group) by id."""
    if not parsed:
        return []
    # A message with an id has one payload, so one time_ns: look in that range.
    times = [p.time_ns for _, _, p in parsed]
    stored = {
        r[0]
        for r in _with_table(
            con,
            "hm_ids",
            {"msg_id": [i for i, _, _ in parsed]},
            """SELECT msg_id FROM summary_messages
               WHERE time_ns BETWEEN ? AND ? AND msg_id IN (SELECT msg_id FROM hm_ids)""",
            [min(times), max(times)],
        )
    }
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
        fresh.append(_Fresh(msg_id, msg, summary))
    return fresh


def _source_columns(fresh: list[_Fresh]) -> dict[str, Any]:
    rows = [(i, f, s) for i, f in enumerate(fresh) for s in f.summary.sources]
    return {
        "msg_id": [f.msg_id for _, f, _ in rows],
        "idx": pa.array([i for i, _, _ in rows], pa.int64()),
        "level": [f.summary.level for _, f, _ in rows],
        "job": [f.summary.job for _, f, _ in rows],
        "time_ns": pa.array([f.summary.time_ns for _, f, _ in rows], pa.int64()),
        "host": pa.array([s[0] for _, _, s in rows], pa.string()),
        "epoch": pa.array([s[1] for _, _, s in rows], pa.int64()),
        "seq": pa.array([s[2] for _, _, s in rows], pa.int64()),
    }


def _count_overlaps(
    con: duckdb.DuckDBPyConnection, fresh: list[_Fresh], sources: dict[str, Any]
) -> None:
    """How many of each message's sources an earlier summary of the same
    (level, job, period) already had: in the store or earlier in this group."""
    times = [f.summary.time_ns for f in fresh]
    in_store = dict(
        _with_table(
            con,
            "hm_src",
            sources,
            """SELECT n.idx, count(*) FROM summary_sources s
               JOIN hm_src n USING (level, job, time_ns, host, epoch, seq)
               WHERE s.time_ns BETWEEN ? AND ? GROUP BY n.idx""",
            [min(times), max(times)],
        )
    )
    seen: set[tuple[str, str, int, str, int, int]] = set()
    for i, f in enumerate(fresh):
        p = f.summary
        mine = {(p.level, p.job, p.time_ns, *s) for s in p.sources}
        f.overlap = int(in_store.get(i, 0)) + len(mine & seen)
        seen |= mine


def _merge_rack_partials(
    con: duckdb.DuckDBPyConnection, racks: list[_Fresh], stats: CollectStats, events: list[Event]
) -> None:
    """Each (job, period) the partials touch: merged into what the store has,
    or rebuilt from raw when a partial overlapped (then and from then on)."""
    if not racks:
        return
    keys = list(dict.fromkeys((f.summary.job, f.summary.time_ns) for f in racks))
    current = _read_many(con, keys)
    rebuild = {k for k in keys if current[k][1]}  # rebuilt from raw before
    for f in racks:
        key = (f.summary.job, f.summary.time_ns)
        if f.overlap:
            stats.summary_overlaps += 1
            why = f"{f.overlap} source batch(es) already in an earlier partial; rebuilt from raw"
            stats.note(f"summary {f.msg_id} overlaps for job {key[0]} at {key[1]}: {why}")
            events.append(
                Event("summary_overlap", f.summary.rack, f.msg.subject, None, None, f.overlap, why)
            )
        if f.overlap or key in rebuild:
            stats.summaries_rebuilt += 1
            rebuild.add(key)
            continue
        merged = current[key][0]
        for sensor, part in f.summary.sensors.items():
            merged.setdefault(sensor, Summary(sketch=type(part.sketch)(part.sketch.alpha))).merge(
                part
            )
    _with_table(
        con,
        "hm_keys",
        _key_columns(keys),
        "DELETE FROM job_summaries USING hm_keys "
        "WHERE job_summaries.job = hm_keys.job AND job_summaries.time_ns = hm_keys.time_ns",
    )
    _insert_summaries(
        con,
        "job_summaries",
        (
            ({"job": k[0], "time_ns": k[1], "origin": "merged"}, current[k][0])
            for k in keys
            if k not in rebuild
        ),
    )
    _insert_summaries(
        con,
        "job_summaries",
        (
            ({"job": k[0], "time_ns": k[1], "origin": "raw"}, summaries_from_store(con, *k))
            for k in keys
            if k in rebuild
        ),
    )


def _key_columns(keys: list[JobPeriod]) -> dict[str, Any]:
    return {
        "job": pa.array([k[0] for k in keys], pa.string()),
        "time_ns": pa.array([k[1] for k in keys], pa.int64()),
    }


def _read_many(
    con: duckdb.DuckDBPyConnection, keys: list[JobPeriod]
) -> dict[JobPeriod, tuple[dict[SensorKey, Summary], bool]]:
    """Per (job, period): the stored job-wide summaries, and whether they
    were rebuilt from raw (origin 'raw')."""
    out: dict[JobPeriod, tuple[dict[SensorKey, Summary], bool]] = {k: ({}, False) for k in keys}
    times = [k[1] for k in keys]
    rows = _with_table(
        con,
        "hm_keys",
        _key_columns(keys),
        """SELECT job, time_ns, measurement, tags, field, count, sum, mean, m2, min, max,
                  sketch, origin = 'raw'
           FROM job_summaries JOIN hm_keys USING (job, time_ns)
           WHERE time_ns BETWEEN ? AND ?""",
        [min(times), max(times)],
    )
    for r in rows:
        sensors, raw = out[(r[0], r[1])]
        sensors[SensorKey(r[2], r[3], r[4])] = _summary_of_row(r[5:12])
        out[(r[0], r[1])] = (sensors, raw or bool(r[12]))
    return out


def read_job_summaries(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int
) -> dict[SensorKey, Summary]:
    """The store's job-wide summaries of (job, period)."""
    rows = con.execute(
        """SELECT measurement, tags, field, count, sum, mean, m2, min, max, sketch
           FROM job_summaries WHERE job = ? AND time_ns = ?""",
        [job, time_ns],
    ).fetchall()
    return {SensorKey(r[0], r[1], r[2]): _summary_of_row(r[3:]) for r in rows}


def _summary_of_row(r: tuple[Any, ...]) -> Summary:
    """count, sum, mean, m2, min, max, sketch (JSON) as stored."""
    return Summary(int(r[0]), r[1], r[2], r[3], r[4], r[5], Sketch.from_json(json.loads(r[6])))


def _insert_summaries(
    con: duckdb.DuckDBPyConnection,
    table: str,
    groups: Iterable[tuple[dict[str, object], dict[SensorKey, Summary]]],
) -> None:
    """A summary row per sensor of every group, the group's own columns
    (msg_id, or job/time_ns/origin) repeated on its rows; one Arrow insert
    (DuckDB's executemany goes row by row: 0.24 s for 110 sensors)."""
    own: dict[str, list[object]] = {}
    items: list[tuple[SensorKey, Summary]] = []
    for columns, sensors in groups:
        for name, value in columns.items():
            own.setdefault(name, []).extend([value] * len(sensors))
        items.extend(sensors.items())
    if not items:
        return
    _insert_rows(
        con,
        table,
        {
            **own,
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
    params: list[object] | None = None,
) -> list[tuple[Any, ...]]:
    """Runs sql with the columns registered as table `name` (Arrow, no copy)."""
    con.register(name, pa.table(columns))
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.unregister(name)


def parse_summary(subject: str, data: bytes) -> ParsedSummary | str:
    """A summary message of the contract, or why it breaks it."""
    if len(data) > MAX_PAYLOAD_BYTES:
        return f"oversized: {len(data)} bytes > {MAX_PAYLOAD_BYTES}"
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"not JSON ({exc})"
    except RecursionError:
        return "not JSON (nested too deep)"
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
    sources: list[tuple[str, int, int]] = []
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
            return f"sensor {text[:80]!r}: {exc}"
        if key in sensors:
            sensors[key].merge(summary)  # same sensor with tags in another order
        else:
            sensors[key] = summary
    assert isinstance(time_ns, int)  # int64_reason says so otherwise
    return ParsedSummary(level, rack, job, time_ns, sources, sensors)
