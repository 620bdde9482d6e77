"""The job-wide summaries every reader uses: ``merged_summaries``, one row per
(job, period, sensor), merged from the rack partials when read.

The collector only appends (transport/collect_summaries.py): each message's
rows go to ``summary_rows`` as sent (with its level, job and period), and a
(job, period) whose partials overlapped (a reducer's twin publishing again)
is rebuilt from raw data into ``summary_rebuilt``, a new set of rows each
time (the newest ``built_ns`` wins; a row with no sensor says "rebuilt:
nothing"). On a lake every DELETE or UPDATE writes a delete file and catalog
rows: the read-merge-DELETE-INSERT this replaced held the one summary
collector to 24-39 ms of CPU per message.

The view (over ``summary_parts``, the same rows not merged: what a reader
that sums every part over the job, such as the quantile sketches, reads)
puts together, per (job, period), exactly one of:
- ``job_summaries``: rows stored merged (a collector before store schema 3,
  a synthetic store): they win;
- ``summary_rebuilt``'s newest set: the period was rebuilt from raw data;
- the rack partials merged: count, sum, min and max add up, the mean is the
  count-weighted mean, M2 is merged pairwise (Chan et al., as
  summary.Summary.merge does) with ``list_reduce``. Sketches are not in the
  view: a reader merges them from ``summary_parts`` (``sketch_rows``).

Schema: docs/store.md ("Summaries").
"""

from __future__ import annotations

import duckdb

VIEW = "merged_summaries"
PARTS = "summary_parts"
# Older stores (before schema 3) have the stored table only.
LEGACY_TABLE = "job_summaries"
# summary_messages.source_list: the message's source batches (host, epoch, seq).
SOURCE_LIST = "STRUCT(host VARCHAR, epoch BIGINT, seq BIGINT)[]"
# A sketch as columns (summary.Sketch), each side's buckets as two lists
# (index, count): no JSON to write per sensor when storing (encoding ~100
# sketches a message was ~1 ms of the collector's CPU) nor to parse when
# merging; lists, not MAPs: DuckDB builds a MAP from Arrow at ~8 us a row
# (it checks the keys), a list at ~0.5 us.
SKETCH_COLUMNS = """alpha DOUBLE, zero BIGINT, pos_keys INTEGER[], pos_counts BIGINT[],
        neg_keys INTEGER[], neg_counts BIGINT[]"""
# The same from a sketch stored as JSON (job_summaries; '{}' gives NULLs),
# one expression per column so that a query that reads none parses nothing.
_SIDE = """json_transform(sketch, '{"@": "MAP(INTEGER, BIGINT)"}').@"""
_COLUMNS_OF_JSON = f"""json_extract(sketch, '$.alpha')::DOUBLE AS alpha,
       json_extract(sketch, '$.zero')::BIGINT AS zero,
       map_keys({_SIDE.replace("@", "pos")}) AS pos_keys,
       map_values({_SIDE.replace("@", "pos")}) AS pos_counts,
       map_keys({_SIDE.replace("@", "neg")}) AS neg_keys,
       map_values({_SIDE.replace("@", "neg")}) AS neg_counts"""
_ROW = """job, time_ns, measurement, tags, field, count, sum, mean, m2, min, max,
       alpha, zero, pos_keys, pos_counts, neg_keys, neg_counts"""

_CHAN_M2 = """list_reduce(
        list({'n': count::DOUBLE, 'mean': mean, 'm2': m2}),
        lambda a, b: {
          'n': a.n + b.n,
          'mean': a.mean + (b.mean - a.mean) * b.n / (a.n + b.n),
          'm2': a.m2 + b.m2 + (b.mean - a.mean) ^ 2 * a.n * b.n / (a.n + b.n)}).m2"""

# What each (job, period) is made of, not merged: the stored merged rows,
# else the newest rebuild, else the rack partials. ``part`` says which.
CREATE_PARTS_VIEW = f"""CREATE OR REPLACE VIEW {PARTS} AS
SELECT job, time_ns, measurement, tags, field, count, sum, mean, m2, min, max,
       {_COLUMNS_OF_JSON}, origin, 'stored' AS part
FROM job_summaries
UNION ALL
SELECT {_ROW}, 'raw' AS origin, 'rebuilt' AS part
FROM (SELECT *, max(built_ns) OVER (PARTITION BY job, time_ns) AS newest_ns
      FROM summary_rebuilt) r
WHERE built_ns = newest_ns AND measurement IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM job_summaries s WHERE s.job = r.job AND s.time_ns = r.time_ns)
UNION ALL
SELECT {_ROW}, 'merged' AS origin, 'rack' AS part
FROM summary_rows p
WHERE level = 'rack'
  AND NOT EXISTS (SELECT 1 FROM summary_rebuilt r WHERE r.job = p.job AND r.time_ns = p.time_ns)
  AND NOT EXISTS (SELECT 1 FROM job_summaries s WHERE s.job = p.job AND s.time_ns = p.time_ns)"""

# Moments only: a sketch list per row made DuckDB build ~9 million lists
# for a 1024-node hour even where no query read them (9.4 GiB peak in
# bench_summary_read); sketches are read from the parts (sketch_rows).
CREATE_VIEW = f"""CREATE OR REPLACE VIEW {VIEW} AS
SELECT job, time_ns, measurement, tags, field, count, sum, mean, m2, min, max, origin
FROM {PARTS} WHERE part <> 'rack'
UNION ALL
SELECT job, time_ns, measurement, tags, field, sum(count)::BIGINT AS count, sum(sum) AS sum,
       sum(count * mean) / sum(count) AS mean, {_CHAN_M2} AS m2,
       min(min) AS min, max(max) AS max, 'merged' AS origin
FROM {PARTS} WHERE part = 'rack'
GROUP BY job, time_ns, measurement, tags, field"""

VIEWS = (CREATE_PARTS_VIEW, CREATE_VIEW)


def sketch_columns(relation: str) -> str:
    """The SQL for a row's sketch columns (alpha, zero, bucket lists) in
    ``relation``: the parts view, or an unmigrated store's table."""
    return (
        _COLUMNS_OF_JSON
        if relation == LEGACY_TABLE
        else ("alpha, zero, pos_keys, pos_counts, neg_keys, neg_counts")
    )


def sketch_rows(relation: str) -> str:
    """SQL for every part's sketch of a (job, period): measurement, tags,
    field and the sketch columns, with ``$job`` and ``$time_ns`` bound."""
    source = PARTS if relation == VIEW else relation
    return f"""SELECT measurement, tags, field, {sketch_columns(relation)}
               FROM {source} WHERE job = $job AND time_ns = $time_ns"""


def summaries_relation(con: duckdb.DuckDBPyConnection) -> str | None:
    """The relation to read job-wide summaries from: the view, or the stored
    table of a store no writer has migrated yet; None without summaries."""
    names = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
    }
    for name in (VIEW, LEGACY_TABLE):
        if name in names:
            return name
    return None


def has_job_summaries(con: duckdb.DuckDBPyConnection, job: str) -> bool:
    """Whether the store holds summaries of ``job``: a look at the stored
    rows, without merging any."""
    relation = summaries_relation(con)
    if relation is None:
        return False
    tables = ["job_summaries"]
    if relation == VIEW:
        tables += ["summary_rows", "summary_rebuilt"]
    for table in tables:
        rack = " AND level = 'rack'" if table == "summary_rows" else ""
        row = con.execute(
            f"SELECT 1 FROM {table} WHERE job = ? AND measurement IS NOT NULL{rack} LIMIT 1",
            [job],
        ).fetchone()
        if row is not None:
            return True
    return False


def job_period_counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(job, period)s with job-wide summaries, and how many of them were
    rebuilt from raw data: from the keys of the messages and stored rows,
    not by merging (transport status reads the whole store)."""
    relation = summaries_relation(con)
    if relation is None:
        return 0, 0
    if relation == LEGACY_TABLE:
        sql = """SELECT count(*), count(*) FILTER (WHERE raw) FROM
                 (SELECT job, time_ns, bool_or(origin = 'raw') AS raw
                  FROM job_summaries GROUP BY job, time_ns)"""
    else:
        sql = """SELECT count(*), count(*) FILTER (WHERE raw) FROM
                 (SELECT job, time_ns, bool_or(raw) AS raw FROM (
                    SELECT job, time_ns, origin = 'raw' AS raw FROM job_summaries
                    UNION ALL SELECT job, time_ns, false FROM summary_messages
                      WHERE level = 'rack'
                    UNION ALL SELECT job, time_ns, true FROM summary_rebuilt)
                  GROUP BY job, time_ns)"""
    row = con.execute(sql).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)
