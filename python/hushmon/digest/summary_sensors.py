"""Per sensor, a job's whole-run statistics and its periods from the store's
job-wide summaries (store/summary_view.py): what ``digest --from-summaries``
prints and writes.

Moments are merged in SQL (Chan et al.: M2 = sum of the periods' M2 + count x
(period mean - job mean)^2). The quantile sketches are merged in SQL too, by
summing each bucket's count over every partial of the job: one rack partial
per rack and period is stored (read unmerged from ``summary_parts``), so a
1024-node job of an hour holds ~94,000 sketches per sensor, which merged one
by one in Python would take minutes.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from hushmon.store.summary_view import PARTS, VIEW, sketch_columns, summaries_relation
from hushmon.transport.summary import SKETCH_MAX_INDEX, Sketch
from hushmon.transport.wire import SensorKey

_MOMENTS_SQL = """
WITH k AS (
  SELECT measurement, tags, field, time_ns, count, mean, m2, min, max,
         sum(count * mean) OVER w / sum(count) OVER w AS job_mean
  FROM @relation WHERE job = $job
  WINDOW w AS (PARTITION BY measurement, tags, field)
)
SELECT measurement, tags, field, sum(count) AS n, any_value(job_mean) AS mean,
       sum(m2 + count * (mean - job_mean) ^ 2) AS m2, min(min) AS lo, max(max) AS hi,
       list(time_ns ORDER BY time_ns) AS times, list(min ORDER BY time_ns) AS mins,
       list(mean ORDER BY time_ns) AS means, list(max ORDER BY time_ns) AS maxes,
       list(count ORDER BY time_ns) AS counts
FROM k GROUP BY measurement, tags, field ORDER BY measurement, tags, field
"""

# Every bucket of every stored sketch of the job, summed per sensor, alpha,
# side (0: the zero count, 1: positive, -1: negative) and bucket index. The
# parts are read unmerged in one stream (a 1024-node job of an hour has ~9
# million, which the view's per-period lists would hold in memory), both
# sides' buckets as one list: a negative bucket k as k - _NEG (indices are
# within +-2^20, summary.SKETCH_MAX_INDEX), the zero count as bucket _ZERO.
_NEG = 1 << 22
_ZERO = 1 << 23
_SKETCH_SQL = f"""
SELECT measurement, tags, field, alpha, bucket, sum(n) FROM (
  SELECT measurement, tags, field, alpha,
         unnest(list_concat([{_ZERO}], pos_keys, list_transform(neg_keys, k -> k - {_NEG})))
           AS bucket,
         unnest(list_concat([zero], pos_counts, neg_counts)) AS n
  FROM (SELECT measurement, tags, field, @columns FROM @parts
        WHERE job = $job AND time_ns BETWEEN $lo AND $hi)
  WHERE alpha IS NOT NULL)
GROUP BY ALL
"""
# Periods per query: DuckDB's peak memory grows with the parts one query
# unnests (~1.2 GB for 600 periods of 26 racks x 99 sensors, load ~20), so
# a long job is read a slice at a time and the slices' sketches merged.
SLICE_PERIODS = 300


def _sql(template: str, relation: str) -> str:
    parts = PARTS if relation == VIEW else relation
    return (
        template.replace("@relation", relation)
        .replace("@parts", parts)
        .replace("@columns", sketch_columns(relation))
    )


def merged_sketches(
    con: duckdb.DuckDBPyConnection, relation: str, job: str, times: list[int] | None = None
) -> dict[tuple[str, str, str], Sketch]:
    """(measurement, tags, field) -> the job's sketch, every period merged;
    ``times``: the job's periods, when known (read a slice at a time)."""
    if times is None:
        times = [int(r[0]) for r in con.execute(
            f"SELECT DISTINCT time_ns FROM {relation} WHERE job = ? ORDER BY 1", [job]
        ).fetchall()]  # fmt: skip
    parts: dict[tuple[str, str, str], dict[float, Sketch]] = {}
    sql = _sql(_SKETCH_SQL, relation)
    for start in range(0, len(times), SLICE_PERIODS):
        last = times[min(start + SLICE_PERIODS, len(times)) - 1]
        span = {"job": job, "lo": times[start], "hi": last}
        for m, tags, fld, alpha, bucket, n in con.execute(sql, span).fetchall():
            by_alpha = parts.setdefault((m, tags, fld), {})
            sketch = by_alpha.setdefault(alpha, Sketch(alpha))
            if bucket == _ZERO:
                sketch.zero += int(n)
                continue
            side = sketch.neg if bucket < -SKETCH_MAX_INDEX else sketch.pos
            index = int(bucket) + _NEG if bucket < -SKETCH_MAX_INDEX else int(bucket)
            side[index] = side.get(index, 0) + int(n)
    out = {}
    for key, by_alpha in parts.items():
        first, *others = by_alpha.values()
        for sketch in others:
            first.merge(sketch)  # sketches of another alpha: ValueError, as before
        out[key] = first
    return out


def summary_sensor_rows(con: duckdb.DuckDBPyConnection, job: str) -> list[dict[str, Any]] | None:
    """The job's sensors (whole-run min/avg/max/std, p50/p99, per period
    min/avg/max/count); None when the store holds no summaries at all."""
    relation = summaries_relation(con)
    if relation is None:
        return None
    moments = con.execute(_sql(_MOMENTS_SQL, relation), {"job": job}).fetchall()
    times = sorted({int(t) for r in moments for t in r[8]})
    sketches = merged_sketches(con, relation, job, times)
    sensors = []
    for r in moments:
        (m, tags, fld, n, mean, m2, lo, hi, times, mins, means, maxes, counts) = r
        sketch = sketches.get((m, tags, fld), Sketch())
        sensors.append(
            {
                "name": SensorKey(m, tags, fld).name,
                "min": lo,
                "avg": mean,
                "max": hi,
                "std": math.sqrt(m2 / n) if n else None,
                "p50": _finite(sketch.quantile(0.5)),
                "p99": _finite(sketch.quantile(0.99)),
                "values": int(n),
                "periods": [
                    {"time_ns": t, "min": a, "avg": v, "max": b, "count": c}
                    for t, a, v, b, c in zip(times, mins, means, maxes, counts, strict=True)
                ],
            }
        )
    return sensors


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
