"""A long job read as per-node bins: one GROUP BY in DuckDB, a bounded cube out.

For a job with more periods than ``[resolution] max_bins`` the digest does
not move every sample into numpy (256 nodes x 1 h x 100 sensors is 92 M
values; 4096 nodes, 1.5 G). DuckDB averages each node's series over bins of
``bin_periods`` periods in one streaming GROUP BY and returns one row per
(sensor, node, bin): the sum, the number of periods, the min and the max.
The cube then holds sensors x nodes x bins means (float32), bounded by
``max_cells`` whatever the job's length, and the per-node whole-job means
are exact (weighted by each bin's periods).

Two sources give the same rows: the raw ``samples``, or the lake's
1-minute rollups ``samples_1m`` (per series and minute: count, sum, min,
max), which a bin of whole minutes reads instead -- 60 times fewer rows,
and the only per-node data left once raw samples have expired. Rollup bins
are aligned on the minute; a node's first and last minute may hold samples
from just before or after the job (a rollup does not know the job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb
import numpy as np

from hushmon.digest.resolution import RAW_BINS, ROLLUPS, Limits, Resolution
from hushmon.store.summary_view import summaries_relation

NS_PER_MINUTE = 60_000_000_000

# Per (series, bin) first -- the job's series picked by a semi-join, no
# column carried through a join per sample (on this VM 4 s against 27 s for
# joining then grouping by cell, 256 nodes x 1 h) -- then one row per cube
# cell. A (sensor, node) with several series (a job's cgroups) is their sum:
# each series' rows count 1/n periods (js.weight), so total / periods is the
# mean of the node's sum.
_CELLS_SQL = """
WITH g AS ({per_series}),
c AS (
  SELECT ((js.sensor_id::BIGINT * $hosts + js.host_id) * $bins + g.b) AS cell,
         js.summed, js.weight, g.total, g.n, g.lo, g.hi
  FROM g JOIN job_series js USING (series_id)
)
SELECT cell, total, n::FLOAT AS periods, lo::FLOAT AS lo, hi::FLOAT AS hi
FROM c WHERE NOT summed
UNION ALL
SELECT cell, sum(total), sum(n * weight)::FLOAT, min(lo)::FLOAT, max(hi)::FLOAT
FROM c WHERE summed GROUP BY cell
"""

# The job's nodes over its span (one grid, every node the whole span).
_RAW_GRID = """
SELECT series_id, (time_ns - $origin) // $width AS b, sum(value) AS total,
       count(*) AS n, {extremes}
FROM samples
WHERE series_id IN (SELECT series_id FROM job_series) AND time_ns BETWEEN $t0 AND $last
GROUP BY ALL"""

# Nodes that joined or left during the job: only the periods they ran it.
_RAW_ACTIVITY = """
SELECT s.series_id, (s.time_ns - $origin) // $width AS b, sum(s.value) AS total,
       count(*) AS n, {extremes_s}
FROM samples s JOIN job_series js ON js.series_id = s.series_id
JOIN job_activity a ON a.job = $job AND a.host = js.host AND a.time_ns = s.time_ns
WHERE s.time_ns BETWEEN $t0 AND $last
GROUP BY ALL"""

# Rollup rows are per series and minute already: no GROUP BY (23.5 M groups
# for 4096 nodes cost DuckDB 58 s under load 16); numpy adds them into the
# cube (ufunc.at), which also sums a node's several series and any minute
# rolled up twice.
_ROLLUP_ROWS_SQL = """
SELECT ((js.sensor_id::BIGINT * $hosts + js.host_id) * $bins
        + (r.minute_ns - $origin) // $width) AS cell,
       r.sum AS total, (r.count * js.weight)::FLOAT AS periods,
       r.min::FLOAT AS lo, r.max::FLOAT AS hi
FROM samples_1m r JOIN job_series js ON js.series_id = r.series_id
WHERE r.minute_ns BETWEEN $origin AND $last
"""


@dataclass
class Bins:
    """What the binned read produced (the cube's layout: sensor x node x bin)."""

    times_ns: np.ndarray  # start of each bin (the first: the job's start)
    cube: np.ndarray  # float32 means, NaN = no sample in the bin
    periods: np.ndarray  # float32, periods behind each cell
    lo: np.ndarray  # float64 per sensor: the smallest sample of the job
    hi: np.ndarray  # float64 per sensor: the largest
    resolution: Resolution


def bin_periods(periods: int, sensors: int, hosts: int, lim: Limits) -> int:
    """Periods per bin: at most ``max_bins`` bins and ``max_cells`` cube cells --
    or one cell per ``values_per_cell`` values scanned, if more: a scan that
    long costs more than the groups (4096 nodes x 1 h: 14 M cells, 100-s bins
    instead of 347-s)."""
    values = periods * sensors * hosts
    cells = max(lim.max_cells, values // lim.values_per_cell)
    by_bins = math.ceil(periods / lim.max_bins)
    by_cells = math.ceil(values / cells)
    return max(1, by_bins, by_cells)


def _has_rows(con: duckdb.DuckDBPyConnection, table: str, column: str, lo: int, hi: int) -> bool:
    """Whether ``table`` has a row of any of the job's series between lo and hi
    (stops at the first)."""
    row = con.execute(
        f"""SELECT 1 FROM {table}
            WHERE series_id IN (SELECT series_id FROM job_series)
              AND {column} BETWEEN $lo AND $hi LIMIT 1""",
        {"lo": lo, "hi": hi},
    ).fetchone()
    return row is not None


# Each sensor's smallest and largest value over the job from its summaries
# (named as job_series names them; several keys of one sensor -- a job's
# cgroups -- are left to the bins: the summaries do not hold their sum).
_SUMMARY_EXTREMES_SQL = """
WITH k AS (
  SELECT measurement || '.' || field
           || CASE WHEN tags = '' OR measurement = 'cgroup' THEN '' ELSE '[' || tags || ']' END
           AS sensor, tags, min, max, time_ns
  FROM {relation}
  WHERE job = $job
    AND (NOT contains(tags, 'job=') OR list_contains(string_split(tags, ','), 'job=' || $job))
)
SELECT js.sensor_id, min(k.min), max(k.max)
FROM k JOIN (SELECT DISTINCT sensor, sensor_id FROM job_series WHERE NOT summed) js USING (sensor)
GROUP BY js.sensor_id HAVING count(DISTINCT k.tags) = 1
"""


def summary_extremes(
    con: duckdb.DuckDBPyConnection, job: str, periods: int
) -> dict[int, tuple[float, float]]:
    """sensor_id -> (min, max) of the job from its summaries, when they cover
    every period; {} otherwise (the raw GROUP BY then computes them)."""
    relation = summaries_relation(con)
    if relation is None:
        return {}
    row = con.execute(
        f"SELECT count(DISTINCT time_ns) FROM {relation} WHERE job = ?", [job]
    ).fetchone()
    if not row or row[0] < periods:
        return {}
    rows = con.execute(_SUMMARY_EXTREMES_SQL.format(relation=relation), {"job": job}).fetchall()
    return {int(r[0]): (float(r[1]), float(r[2])) for r in rows}


def has_raw(con: duckdb.DuckDBPyConnection, times: np.ndarray) -> bool:
    """Whether raw samples of the job are still there (retention may have expired them)."""
    return _has_rows(con, "samples", "time_ns", int(times[0]), int(times[-1]))


def _rollups_cover(con: duckdb.DuckDBPyConnection, t0: int, last: int) -> bool:
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if "samples_1m" not in tables:
        return False
    first_minute, last_minute = t0 // NS_PER_MINUTE, last // NS_PER_MINUTE
    row = con.execute(
        """SELECT count(DISTINCT minute_ns) FROM samples_1m
           WHERE series_id = (SELECT min(series_id) FROM job_series)
             AND minute_ns BETWEEN $lo AND $hi""",
        {"lo": first_minute * NS_PER_MINUTE, "hi": last_minute * NS_PER_MINUTE},
    ).fetchone()
    return bool(row and row[0] == last_minute - first_minute + 1)


def read_bins(
    con: duckdb.DuckDBPyConnection,
    job: str,
    times: np.ndarray,
    sensors: int,
    hosts: int,
    same_grid: bool,
    lim: Limits,
) -> Bins:
    """The job's cube as per-node bin means (job_series must exist in ``con``)."""
    t0, last = int(times[0]), int(times[-1])
    period_ns = int(np.median(np.diff(times)))
    per_bin = bin_periods(len(times), sensors, hosts, lim)
    width = per_bin * period_ns
    raw = has_raw(con, times)
    # The rollups (60 times fewer rows) when they cover the job and bins are a
    # minute or more anyway, or the raw scan would be long (max_raw_values);
    # expired raw data leaves them the only source.
    costly = len(times) * sensors * hosts > lim.max_raw_values
    use_rollups = (width >= NS_PER_MINUTE or costly or not raw) and _rollups_cover(con, t0, last)
    from_summaries: dict[int, tuple[float, float]] = {}
    if use_rollups:
        # Rows already are per series and minute: the cube may hold more cells
        # (max_rollup_cells) for the same cost as raw bins under max_cells.
        per_bin = max(
            math.ceil(len(times) / lim.max_bins),
            math.ceil(len(times) * sensors * hosts / lim.max_rollup_cells),
        )
        width = -(-(per_bin * period_ns) // NS_PER_MINUTE) * NS_PER_MINUTE
        origin = (t0 // NS_PER_MINUTE) * NS_PER_MINUTE
        bins = int((last - origin) // width) + 1
        sql = _ROLLUP_ROWS_SQL
        params: dict[str, object] = {"origin": origin, "last": last}
    else:
        origin = t0
        bins = int((last - origin) // width) + 1
        # The job's extremes from its summaries when the store has them for
        # every period (exact, and the GROUP BY skips two aggregates: 4.4 ->
        # 2.8 s for 256 nodes x 1 h); else per bin.
        from_summaries = summary_extremes(con, job, len(times))
        lo_hi = "'NaN'::DOUBLE AS lo, 'NaN'::DOUBLE AS hi"
        per_series = (_RAW_GRID if same_grid else _RAW_ACTIVITY).format(
            extremes=lo_hi if from_summaries else "min(value) AS lo, max(value) AS hi",
            extremes_s=lo_hi if from_summaries else "min(s.value) AS lo, max(s.value) AS hi",
        )
        sql = _CELLS_SQL.format(per_series=per_series)
        params = {"origin": origin, "t0": t0, "last": last}
        if not same_grid:
            params["job"] = job
    params.update({"hosts": hosts, "bins": bins, "width": width})
    shape = (sensors, hosts, bins)
    total = np.zeros(sensors * hosts * bins, dtype=np.float64)
    weight = np.zeros(shape, dtype=np.float32)
    lo = np.full(shape, np.inf, dtype=np.float32)
    hi = np.full(shape, -np.inf, dtype=np.float32)
    flat_w, flat_lo, flat_hi = weight.reshape(-1), lo.reshape(-1), hi.reshape(-1)
    for batch in con.execute(sql, params).to_arrow_reader(1 << 20):
        cell = batch.column(0).to_numpy()
        np.add.at(total, cell, batch.column(1).to_numpy())
        np.add.at(flat_w, cell, batch.column(2).to_numpy())
        with np.errstate(invalid="ignore"):  # NaN: the extremes came from the summaries
            np.minimum.at(flat_lo, cell, batch.column(3).to_numpy())
            np.maximum.at(flat_hi, cell, batch.column(4).to_numpy())
    with np.errstate(all="ignore"):
        cube = np.where(weight > 0, total.reshape(shape) / weight, np.nan).astype(np.float32)
    del total
    lo[weight == 0] = np.nan
    hi[weight == 0] = np.nan
    with np.errstate(all="ignore"):
        job_lo = np.fmin.reduce(lo.reshape(sensors, -1), axis=1).astype(np.float64)
        job_hi = np.fmax.reduce(hi.reshape(sensors, -1), axis=1).astype(np.float64)
    for sensor_id, (a, b) in from_summaries.items():
        job_lo[sensor_id], job_hi[sensor_id] = a, b
    del lo, hi
    starts = origin + np.arange(bins, dtype=np.int64) * width
    starts[0] = t0
    resolution = Resolution(
        source=ROLLUPS if use_rollups else RAW_BINS,
        periods=len(times),
        period_s=period_ns / 1e9,
        bin_s=width / 1e9,
        steps=bins,
    )
    return Bins(starts, cube, weight, job_lo, job_hi, resolution)
