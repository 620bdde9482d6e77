"""A compaction step: store the closed periods' summaries merged.

Since store schema 3 the collector appends rack partials (``summary_rows``)
and rebuilds overlaps (``summary_rebuilt``); readers merge them through the
view ``merged_summaries`` (store/summary_view.py), which costs 2-3x the CPU
and memory of rows stored merged (bench/bench_summary_read.py). A period
older than :data:`DEFAULT_CLOSE_S` can no longer change in the normal course,
so one lake transaction copies what the view returns for it into
``job_summaries`` (the view's first choice) and deletes its partials and
rebuilds: the view reads the same rows before and after.

A late partial (a collector that lagged more than the margin) can still
arrive for a stored period. The view prefers the stored rows, so it is not
counted twice, only not yet counted; the next compaction merges it into the
stored rows (count, sum, min, max added, Chan's pairwise M2, sketch buckets
summed) unless a newer rebuild from raw data exists for the period, which
then replaces them, as the view would have preferred it.

A period whose partials overlapped was rebuilt from raw data by the
summary collector, from what the raw collectors had committed then: with a
``--summaries-only`` collector beside ``--raw-only`` ones, a rebuild can run
before their lag lets the period's last batches in, and no raw batch
arriving later rebuilds it. So the slice that closes such a period first
rebuilds it once more from raw data (store/raw_summaries.py), by then
complete: ``close_s`` (an hour) is far above the collectors' lag (p99 5 s)
and HM_RAW's duplicate window (2 min), past which no replay is stored. The
new rebuild is kept only when it holds more samples than the newest one
(raw data only grows until retention deletes it: fewer means the raw rows
are gone, and the stored rebuild stays).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.period import SUMMARY_CLOSE_S
from hushmon.store.lake import CommitStats, lake_commit
from hushmon.store.lake_retention import NS_PER_S
from hushmon.store.raw_summaries import ALPHA, RawSummary, SensorName, summaries_of_period
from hushmon.store.summary_view import PARTS, VIEW

# The reducers keep a published (job, period) for --keep-s (300 s) to count
# late batches; the collector's lag stays under 5 s (p99) and an agent
# replays its spool within minutes: after an hour a period is closed.
DEFAULT_CLOSE_S = SUMMARY_CLOSE_S

# Sketch bucket lists summed per sensor over a relation's rows; ``src`` is
# a relation with the key columns and the sketch columns.
_SKETCH_SQL = """
WITH s AS (SELECT * FROM {src}),
zero AS (SELECT job, time_ns, measurement, tags, field, any_value(alpha) AS alpha,
                sum(zero)::BIGINT AS zero
         FROM s GROUP BY ALL),
side AS (SELECT job, time_ns, measurement, tags, field, 'pos' AS side,
                unnest(pos_keys) AS k, unnest(pos_counts) AS c FROM s
         UNION ALL
         SELECT job, time_ns, measurement, tags, field, 'neg',
                unnest(neg_keys), unnest(neg_counts) FROM s),
summed AS (SELECT job, time_ns, measurement, tags, field, side, k, sum(c)::BIGINT AS c
           FROM side GROUP BY ALL),
maps AS (SELECT job, time_ns, measurement, tags, field,
                map(list(k ORDER BY k) FILTER (side = 'pos'),
                    list(c ORDER BY k) FILTER (side = 'pos')) AS pos,
                map(list(k ORDER BY k) FILTER (side = 'neg'),
                    list(c ORDER BY k) FILTER (side = 'neg')) AS neg
         FROM summed GROUP BY ALL)
SELECT z.job, z.time_ns, z.measurement, z.tags, z.field,
       CASE WHEN z.alpha IS NULL THEN '{{}}' ELSE to_json({{'alpha': z.alpha, 'zero': z.zero,
            'pos': coalesce(m.pos, MAP {{}}::MAP(INTEGER, BIGINT)),
            'neg': coalesce(m.neg, MAP {{}}::MAP(INTEGER, BIGINT))}})::VARCHAR END AS sketch
FROM zero z LEFT JOIN maps m USING (job, time_ns, measurement, tags, field)"""

_KEYS = "job, time_ns, measurement, tags, field"


@dataclass
class SummaryCompaction:
    periods_stored: int = 0  # (job, period)s newly stored merged
    rows_stored: int = 0  # job_summaries rows written (new and late)
    partial_rows_deleted: int = 0  # summary_rows (rack) and summary_rebuilt rows
    late_periods_merged: int = 0  # stored periods that took late partials or a rebuild
    periods_rebuilt: int = 0  # overlapped periods rebuilt from raw data again on closing


def _periods(con: duckdb.DuckDBPyConnection, cut_ns: int, stored: bool) -> None:
    """Temp table ``hm_periods`` (job, time_ns): periods before ``cut_ns``
    with partials or rebuilds, already stored merged or not."""
    sense = "" if stored else "NOT"
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE hm_periods AS
            SELECT DISTINCT job, time_ns FROM (
              SELECT job, time_ns FROM summary_rows WHERE level = 'rack' AND time_ns < $cut
              UNION ALL SELECT job, time_ns FROM summary_rebuilt WHERE time_ns < $cut) p
            WHERE {sense} EXISTS (SELECT 1 FROM job_summaries s
                                  WHERE s.job = p.job AND s.time_ns = p.time_ns)""",
        {"cut": cut_ns},
    ).fetchall()


def _delete_parts(con: duckdb.DuckDBPyConnection) -> int:
    deleted = 0
    for sql in (
        """DELETE FROM summary_rows WHERE level = 'rack' AND (job, time_ns) IN
           (SELECT (job, time_ns) FROM hm_periods)""",
        """DELETE FROM summary_rebuilt WHERE (job, time_ns) IN
           (SELECT (job, time_ns) FROM hm_periods)""",
    ):
        row = con.execute(sql).fetchone()
        deleted += int(row[0]) if row else 0
    return deleted


def _store_new(con: duckdb.DuckDBPyConnection, cut_ns: int) -> SummaryCompaction:
    """Closed periods never stored: the view's rows, as it returns them."""
    _periods(con, cut_ns, stored=False)
    out = SummaryCompaction()
    row = con.execute("SELECT count(*) FROM hm_periods").fetchone()
    out.periods_stored = int(row[0]) if row else 0
    if out.periods_stored == 0:
        return out
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE hm_parts AS SELECT p.* FROM {PARTS} p
            SEMI JOIN hm_periods USING (job, time_ns)"""
    ).fetchall()
    row = con.execute(
        f"""INSERT INTO job_summaries
            SELECT m.job, m.time_ns, m.measurement, m.tags, m.field, m.count, m.sum, m.mean,
                   m.m2, m.min, m.max, k.sketch, m.origin
            FROM {VIEW} m SEMI JOIN hm_periods USING (job, time_ns)
            JOIN ({_SKETCH_SQL.format(src="hm_parts")}) k USING ({_KEYS})"""
    ).fetchone()
    out.rows_stored = int(row[0]) if row else 0
    out.partial_rows_deleted = _delete_parts(con)
    return out


def _merge_late(con: duckdb.DuckDBPyConnection, cut_ns: int) -> SummaryCompaction:
    """Stored periods with late partials or a rebuild: a rebuild replaces
    the stored rows, else the late rack rows are merged into them."""
    _periods(con, cut_ns, stored=True)
    out = SummaryCompaction()
    row = con.execute("SELECT count(*) FROM hm_periods").fetchone()
    out.late_periods_merged = int(row[0]) if row else 0
    if out.late_periods_merged == 0:
        return out
    # Each period's parts: the newest rebuild if any, else the stored rows
    # (sketch from JSON) and the late rack rows.
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE hm_parts AS
        WITH rebuilt AS (
          SELECT * FROM (SELECT *, max(built_ns) OVER (PARTITION BY job, time_ns) AS newest_ns
                         FROM summary_rebuilt SEMI JOIN hm_periods USING (job, time_ns))
          WHERE built_ns = newest_ns)
        SELECT {_KEYS}, count, sum, mean, m2, min, max, alpha, zero, pos_keys, pos_counts,
               neg_keys, neg_counts, 'raw' AS origin
        FROM rebuilt WHERE measurement IS NOT NULL
        UNION ALL
        SELECT {_KEYS}, count, sum, mean, m2, min, max, alpha, zero, pos_keys, pos_counts,
               neg_keys, neg_counts, origin
        FROM (SELECT * FROM {PARTS} WHERE part = 'stored') s
        SEMI JOIN hm_periods USING (job, time_ns)
        WHERE NOT EXISTS (SELECT 1 FROM rebuilt r WHERE r.job = s.job AND r.time_ns = s.time_ns)
        UNION ALL
        SELECT {_KEYS}, count, sum, mean, m2, min, max, alpha, zero, pos_keys, pos_counts,
               neg_keys, neg_counts, 'merged'
        FROM summary_rows p SEMI JOIN hm_periods USING (job, time_ns)
        WHERE level = 'rack'
          AND NOT EXISTS (SELECT 1 FROM rebuilt r WHERE r.job = p.job AND r.time_ns = p.time_ns)"""
    ).fetchall()
    con.execute(
        "DELETE FROM job_summaries WHERE (job, time_ns) IN (SELECT (job, time_ns) FROM hm_periods)"
    ).fetchall()
    row = con.execute(
        f"""INSERT INTO job_summaries
            SELECT {_KEYS}, m.count, m.sum, m.mean, m.m2, m.min, m.max, k.sketch, m.origin
            FROM (SELECT {_KEYS}, sum(count)::BIGINT AS count, sum(sum) AS sum,
                         sum(count * mean) / sum(count) AS mean,
                         list_reduce(list({{'n': count::DOUBLE, 'mean': mean, 'm2': m2}}),
                           lambda a, b: {{'n': a.n + b.n,
                             'mean': a.mean + (b.mean - a.mean) * b.n / (a.n + b.n),
                             'm2': a.m2 + b.m2 + (b.mean - a.mean) ^ 2 * a.n * b.n / (a.n + b.n)
                           }}).m2 AS m2,
                         min(min) AS min, max(max) AS max,
                         CASE WHEN bool_or(origin = 'raw') THEN 'raw' ELSE 'merged' END AS origin
                  FROM hm_parts GROUP BY ALL) m
            JOIN ({_SKETCH_SQL.format(src="hm_parts")}) k USING ({_KEYS})"""
    ).fetchone()
    out.rows_stored = int(row[0]) if row else 0
    out.partial_rows_deleted = _delete_parts(con)
    return out


# Periods stored per lake commit: one commit for a whole hour of a
# 1024-node job peaked at 12.6 GiB (26 racks x 99 sensors x 3600 periods,
# bench/bench_summary_read.py); a minute of periods is 1/60 of that.
SLICE_S = 60


def store_closed_summaries(
    con: duckdb.DuckDBPyConnection, now_ns: int, stats: CommitStats, close_s: float
) -> SummaryCompaction:
    """Store every period older than ``close_s`` merged, oldest first, a
    slice of SLICE_S of periods per lake transaction (late partials of
    stored periods in the same one as their slice)."""
    cut_ns = now_ns - int(close_s * NS_PER_S)
    total = SummaryCompaction()
    below_ns = -1  # every pending period below this was stored
    while (oldest := _oldest_pending_ns(con, cut_ns)) is not None:
        if oldest < below_ns:  # a slice left rows behind: never loop on them
            raise HushmonError(
                f"summary compaction: rows of period {oldest} are still pending after their "
                "slice was stored"
            )
        hi = below_ns = min(cut_ns, oldest + SLICE_S * NS_PER_S)

        def body(c: duckdb.DuckDBPyConnection, hi: int = hi) -> SummaryCompaction:
            rebuilt = rebuild_overlapped(c, hi)
            late = _merge_late(c, hi)
            new = _store_new(c, hi)
            c.execute("DROP TABLE IF EXISTS hm_periods").fetchall()
            c.execute("DROP TABLE IF EXISTS hm_parts").fetchall()
            return SummaryCompaction(
                periods_stored=new.periods_stored,
                rows_stored=new.rows_stored + late.rows_stored,
                partial_rows_deleted=new.partial_rows_deleted + late.partial_rows_deleted,
                late_periods_merged=late.late_periods_merged,
                periods_rebuilt=rebuilt,
            )

        done = lake_commit(con, body, stats)
        total.periods_stored += done.periods_stored
        total.rows_stored += done.rows_stored
        total.partial_rows_deleted += done.partial_rows_deleted
        total.late_periods_merged += done.late_periods_merged
        total.periods_rebuilt += done.periods_rebuilt
    return total


def rebuild_overlapped(con: duckdb.DuckDBPyConnection, cut_ns: int) -> int:
    """Every period before ``cut_ns`` with a rebuild (its partials
    overlapped) rebuilt from raw data again, as a newer set of
    summary_rebuilt rows, where the raw data now holds more samples than the
    newest rebuild counted; how many were."""
    newest = con.execute(
        """SELECT job, time_ns, sum(count)::BIGINT, any_value(alpha)
           FROM (SELECT *, max(built_ns) OVER (PARTITION BY job, time_ns) AS newest_ns
                 FROM summary_rebuilt WHERE time_ns < $cut)
           WHERE built_ns = newest_ns GROUP BY job, time_ns ORDER BY time_ns, job""",
        {"cut": cut_ns},
    ).fetchall()
    fresh: list[tuple[str, int, dict[SensorName, RawSummary]]] = []
    for job, time_ns, counted, alpha in newest:
        found = summaries_of_period(con, job, int(time_ns), alpha or ALPHA)
        if sum(s.moments.count for s in found.values()) > (counted or 0):
            fresh.append((job, int(time_ns), found))
    if fresh:
        _insert_rebuilt(con, fresh, time.time_ns())
    return len(fresh)


def _insert_rebuilt(
    con: duckdb.DuckDBPyConnection,
    periods: list[tuple[str, int, dict[SensorName, RawSummary]]],
    built_ns: int,
) -> None:
    rows = [(job, t, name, s) for job, t, found in periods for name, s in found.items()]
    pos = [sorted(s.buckets.pos.items()) for *_, s in rows]
    neg = [sorted(s.buckets.neg.items()) for *_, s in rows]
    table = pa.table(
        {
            "job": pa.array([r[0] for r in rows], pa.string()),
            "time_ns": pa.array([r[1] for r in rows], pa.int64()),
            "built_ns": pa.array([built_ns] * len(rows), pa.int64()),
            "measurement": pa.array([r[2][0] for r in rows], pa.string()),
            "tags": pa.array([r[2][1] for r in rows], pa.string()),
            "field": pa.array([r[2][2] for r in rows], pa.string()),
            "count": pa.array([r[3].moments.count for r in rows], pa.int64()),
            "sum": pa.array([r[3].moments.sum for r in rows], pa.float64()),
            "mean": pa.array([r[3].moments.mean for r in rows], pa.float64()),
            "m2": pa.array([r[3].moments.m2 for r in rows], pa.float64()),
            "min": pa.array([r[3].moments.min for r in rows], pa.float64()),
            "max": pa.array([r[3].moments.max for r in rows], pa.float64()),
            "alpha": pa.array([r[3].alpha for r in rows], pa.float64()),
            "zero": pa.array([r[3].buckets.zero for r in rows], pa.int64()),
            "pos_keys": pa.array([[k for k, _ in b] for b in pos], pa.list_(pa.int32())),
            "pos_counts": pa.array([[c for _, c in b] for b in pos], pa.list_(pa.int64())),
            "neg_keys": pa.array([[k for k, _ in b] for b in neg], pa.list_(pa.int32())),
            "neg_counts": pa.array([[c for _, c in b] for b in neg], pa.list_(pa.int64())),
        }
    )
    names = ", ".join(table.column_names)
    con.register("hm_rebuilt", table)
    try:
        con.execute(f"INSERT INTO summary_rebuilt ({names}) SELECT {names} FROM hm_rebuilt")
    finally:
        con.unregister("hm_rebuilt")


def _oldest_pending_ns(con: duckdb.DuckDBPyConnection, cut_ns: int) -> int | None:
    row = con.execute(
        """SELECT min(t) FROM (
             SELECT min(time_ns) AS t FROM summary_rows WHERE level = 'rack' AND time_ns < $cut
             UNION ALL SELECT min(time_ns) FROM summary_rebuilt WHERE time_ns < $cut)""",
        {"cut": cut_ns},
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def pending_summary_periods(con: duckdb.DuckDBPyConnection, now_ns: int, close_s: float) -> int:
    """(job, period)s the next compaction would store merged or merge late
    partials into (for ``store status``)."""
    row = con.execute(
        """SELECT count(*) FROM (SELECT DISTINCT job, time_ns FROM (
             SELECT job, time_ns FROM summary_rows WHERE level = 'rack' AND time_ns < $cut
             UNION ALL SELECT job, time_ns FROM summary_rebuilt WHERE time_ns < $cut))""",
        {"cut": now_ns - int(close_s * NS_PER_S)},
    ).fetchone()
    return int(row[0]) if row else 0
