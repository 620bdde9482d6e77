"""A job's monitoring data as arrays: the time axis, the nodes, and a
sensor x node x period cube, with per sensor the min / average / max across
nodes for every period.

Sensor names are ``measurement.field`` with the tags in brackets when there
are any (``cpu.user_pct[cpu=cpu3]``, ``disk.busy_pct[device=sda]``). Per-job
cgroup values are summed over the job's cgroups per node. Derived sensors
(:mod:`hushmon.digest.sensors`) are computed from the cube.

Names are resolved once per series (a few thousand rows), so the per-sample
work in DuckDB is integer joins only; the cube is filled by one numpy
scatter. 256 nodes x 3600 periods x 100 sensors is 368 MB as float32.

A job with more periods than ``[resolution] max_bins`` is read as per-node
bins instead (:mod:`hushmon.digest.binned`): the cube's time axis is then
the bins, ``resolution`` says so, and the analyzers see bins as periods.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from hushmon.digest import resolution as res
from hushmon.digest.binned import has_raw, read_bins
from hushmon.digest.sensors import DERIVED, add_derived
from hushmon.errors import HushmonError
from hushmon.store.query import JobInfo, job_info
from hushmon.store.schema import open_store_readonly

_JOB_SERIES_SQL = """
CREATE TEMP TABLE job_series AS
WITH s AS (
  SELECT series_id, host,
         measurement || '.' || field
           || CASE WHEN tags = '' OR measurement = 'cgroup' THEN '' ELSE '[' || tags || ']' END
           AS sensor
  FROM series
  WHERE host IN (SELECT DISTINCT host FROM job_activity WHERE job = $job)
    AND measurement NOT IN ('job', 'hushmon_agent', 'cpu_info')
    AND (NOT contains(tags, 'job=') OR list_contains(string_split(tags, ','), 'job=' || $job))
)
SELECT series_id, sensor, host,
       (dense_rank() OVER (ORDER BY sensor) - 1)::INTEGER AS sensor_id,
       (dense_rank() OVER (ORDER BY host) - 1)::INTEGER AS host_id,
       count(*) OVER (PARTITION BY sensor, host) > 1 AS summed,
       1.0 / count(*) OVER (PARTITION BY sensor, host) AS weight
FROM s
"""

_JOB_TIMES_SQL = """
CREATE TEMP TABLE job_times AS
SELECT time_ns, (row_number() OVER (ORDER BY time_ns) - 1)::INTEGER AS t_idx
FROM (SELECT DISTINCT time_ns FROM job_activity WHERE job = $job)
"""

# Samples at the periods the job ran on that node; several series of one
# (sensor, host) -- a job's cgroups -- are summed.
_JOB_ROWS_SQL = """
WITH a AS (SELECT host, time_ns FROM job_activity WHERE job = $job),
js AS (SELECT * FROM job_series),
r AS (
  SELECT js.sensor_id, js.host_id, t.t_idx, s.value, js.summed
  FROM samples s
  JOIN js ON js.series_id = s.series_id
  JOIN job_times t ON t.time_ns = s.time_ns
  JOIN a ON a.time_ns = s.time_ns AND a.host = js.host
)
SELECT sensor_id, host_id, t_idx, value FROM r WHERE NOT summed
UNION ALL
SELECT sensor_id, host_id, t_idx, sum(value) FROM r WHERE summed GROUP BY ALL
"""


# The common case, faster: the job's periods lie on a regular grid and every
# node ran the job over the same unbroken span. Then a time range replaces
# the join with job_activity, and DuckDB computes each value's cell in the
# cube (sensor, node, period), so 12 bytes per value cross over to numpy.
_JOB_CELLS_SQL = """
WITH r AS (
  SELECT (js.sensor_id::BIGINT * $hosts + js.host_id) * $periods
           + (s.time_ns - $t0) // $period AS cell,
         s.value, js.summed
  FROM samples s JOIN job_series js ON js.series_id = s.series_id
  WHERE s.time_ns BETWEEN $t0 AND $last AND (s.time_ns - $t0) % $period = 0
)
SELECT cell, value::FLOAT AS value FROM r WHERE NOT summed
UNION ALL
SELECT cell, sum(value)::FLOAT FROM r WHERE summed GROUP BY cell
"""


@dataclass
class SensorStats:
    """Across-node statistics of one sensor per period (NaN where no node had it)."""

    min: np.ndarray
    avg: np.ndarray
    max: np.ndarray
    nodes: np.ndarray  # how many nodes reported it


@dataclass
class JobData:
    info: JobInfo
    times_ns: np.ndarray  # sorted periods of the job
    hosts: list[str]
    base_names: list[str]
    cube: np.ndarray  # float32, base sensor x host x period, NaN = not measured
    stats: dict[str, SensorStats] = field(default_factory=dict)
    node_means: dict[str, np.ndarray] = field(default_factory=dict)
    # The base sensors each derived sensor was computed from (sensors.add_derived).
    derived_inputs: dict[str, list[str]] = field(default_factory=dict)
    # What the digest knows of the racks (hushmon.digest.fabric.FabricInfo), set by
    # build_digest / compare; None = not looked up (the analyzers then treat it as unknown).
    fabric_info: Any = None
    # How the values were read (full resolution, per-node bins, summaries).
    resolution: res.Resolution | None = None
    # Binned jobs: each base sensor's smallest and largest sample of the job
    # (bin means hide the extremes).
    extremes: dict[str, tuple[float, float]] = field(default_factory=dict)
    _derived: dict[str, np.ndarray | None] = field(default_factory=dict)
    _trace: list[str] | None = None

    @property
    def job(self) -> str:
        return self.info.job

    @property
    def seconds(self) -> np.ndarray:
        """Time axis in seconds from the job's first period."""
        return (self.times_ns - self.times_ns[0]) / 1e9

    @property
    def period_s(self) -> float:
        if len(self.times_ns) < 2:
            return 1.0
        return float(np.median(np.diff(self.times_ns))) / 1e9

    @property
    def span_s(self) -> float:
        """Time the periods cover, first to last plus one period: not
        periods x period_s, since the period may change during a job
        (hushmon ctl set period=...)."""
        if len(self.times_ns) == 0:
            return 0.0
        return float(self.times_ns[-1] - self.times_ns[0]) / 1e9 + self.period_s

    @property
    def sensors(self) -> list[str]:
        return sorted(self.stats)

    def has(self, sensor: str) -> bool:
        return sensor in self.stats

    def matrix(self, sensor: str) -> np.ndarray | None:
        """hosts x periods values of a sensor (float64, NaN where missing), or None."""
        idx = self._index.get(sensor)
        if idx is not None:
            if self._trace is not None:
                self._trace.append(sensor)
            return self.cube[idx].astype(np.float64)
        if sensor not in self._derived:
            outer, self._trace = self._trace, []
            try:
                self._derived[sensor] = DERIVED[sensor].compute(self) if sensor in DERIVED else None
                self.derived_inputs[sensor] = sorted(set(self._trace))
            finally:
                if outer is not None:
                    outer.extend(self.derived_inputs.get(sensor, []))
                self._trace = outer
        elif self._trace is not None:
            self._trace.extend(self.derived_inputs.get(sensor, []))
        return self._derived[sensor]

    @property
    def fabric(self) -> Any:
        """The racks (hushmon.digest.fabric.Fabric), or None when unknown."""
        return None if self.fabric_info is None else self.fabric_info.fabric

    def base_sensors(self, prefix: str) -> list[str]:
        """Base sensors named ``prefix`` or ``prefix[tags]``."""
        return [s for s in self.base_names if s == prefix or s.startswith(prefix + "[")]

    @property
    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_index_cache")
        if cached is None:
            cached = {s: i for i, s in enumerate(self.base_names)}
            self.__dict__["_index_cache"] = cached
        return cached

    def add_stats(self, sensor: str, m: np.ndarray) -> None:
        self.stats[sensor] = across_nodes(m)
        with np.errstate(all="ignore"):
            self.node_means[sensor] = _nanmean_rows(m)


def _nanmean_rows(m: np.ndarray) -> np.ndarray:
    n = (~np.isnan(m)).sum(axis=1)
    s = np.nansum(m, axis=1, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def across_nodes(m: np.ndarray) -> SensorStats:
    """min / avg / max over the node axis of a hosts x periods matrix."""
    present = ~np.isnan(m)
    n = present.sum(axis=0)
    filled_lo = np.where(present, m, np.inf)
    filled_hi = np.where(present, m, -np.inf)
    mn = filled_lo.min(axis=0).astype(np.float64)
    mx = filled_hi.max(axis=0).astype(np.float64)
    total = np.where(present, m, 0).sum(axis=0, dtype=np.float64)
    with np.errstate(all="ignore"):
        avg = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    mn[n == 0] = np.nan
    mx[n == 0] = np.nan
    return SensorStats(mn, avg, mx, n)


def _bound(con: duckdb.DuckDBPyConnection, lim: res.Limits, spill: Path) -> None:
    """DuckDB's memory and threads while it reads the job: its hash tables
    spill to ``spill`` beyond the limit instead of growing with the job, so
    the digest's peak is the limit plus numpy's bounded cube."""
    con.execute(f"SET memory_limit = '{lim.memory_limit}'").fetchall()
    con.execute(f"SET threads = {lim.threads}").fetchall()
    con.execute(f"SET temp_directory = '{spill}'").fetchall()


def load_job(db_path: Path, job: str, max_bins: int | None = None) -> JobData:
    """Load a job's samples into memory (cube + per-period statistics).

    ``max_bins``: read a job with more periods as per-node bins (default
    ``[resolution] max_bins`` in parameters.toml)."""
    lim = res.limits(max_bins)
    spill = Path(tempfile.mkdtemp(prefix="hushmon-digest-"))
    con = open_store_readonly(Path(db_path))
    bins = None
    summed: set[int] = set()
    try:
        _bound(con, lim, spill)
        info = job_info(con, job)
        params = {"job": info.job}
        con.execute(_JOB_SERIES_SQL, params).fetchall()
        con.execute(_JOB_TIMES_SQL, params).fetchall()
        names = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT sensor, sensor_id FROM job_series ORDER BY sensor_id"
            ).fetchall()
        ]
        hosts = [
            r[0]
            for r in con.execute(
                "SELECT DISTINCT host, host_id FROM job_series ORDER BY host_id"
            ).fetchall()
        ]
        times = np.array(
            [r[0] for r in con.execute("SELECT time_ns FROM job_times ORDER BY t_idx").fetchall()],
            dtype=np.int64,
        )
        spans = con.execute(
            "SELECT DISTINCT min(time_ns), max(time_ns), count(*) FROM job_activity "
            "WHERE job = $job GROUP BY host",
            params,
        ).fetchall()
        period = int(np.median(np.diff(times))) if len(times) > 1 else 1
        same_grid = (
            len(times) > 1
            and bool(np.all(np.diff(times) == period))
            and len(spans) == 1
            and int(spans[0][2]) == len(times)
        )
        # long jobs, and jobs whose raw samples expired (the lake's rollups remain)
        if len(times) > lim.max_bins or (len(times) > 1 and not has_raw(con, times)):
            bins = read_bins(con, info.job, times, len(names), len(hosts), same_grid, lim)
            summed = {
                int(r[0])
                for r in con.execute(
                    "SELECT DISTINCT sensor_id FROM job_series WHERE summed"
                ).fetchall()
            }
            cube = bins.cube
        elif same_grid:
            cube = np.full((len(names), len(hosts), len(times)), np.nan, dtype=np.float32)
            cells = con.execute(
                _JOB_CELLS_SQL,
                {
                    "hosts": len(hosts),
                    "periods": len(times),
                    "t0": int(times[0]),
                    "last": int(times[-1]),
                    "period": period,
                },
            ).fetchnumpy()
            cube.ravel()[cells["cell"]] = cells["value"]
            del cells
        else:
            cube = np.full((len(names), len(hosts), len(times)), np.nan, dtype=np.float32)
            rows = con.execute(_JOB_ROWS_SQL, params).fetchnumpy()
            cube[rows["sensor_id"], rows["host_id"], rows["t_idx"]] = rows["value"]
            del rows
    except duckdb.Error as exc:
        raise HushmonError(f"reading job {job} failed: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    if not names or np.isnan(cube).all():
        raise HushmonError(f"job {job!r} has no samples in the store (only job lines)")
    period_s = float(np.median(np.diff(times))) / 1e9 if len(times) > 1 else 1.0
    data = JobData(info=info, times_ns=times, hosts=hosts, base_names=names, cube=cube)
    data.resolution = res.Resolution(res.RAW, len(times), period_s, period_s, len(times))
    if bins is not None:
        data.times_ns = bins.times_ns
        data.resolution = bins.resolution
    # all base sensors at once: reductions over the node axis of the cube
    present = ~np.isnan(cube)
    count = present.sum(axis=1)
    with np.errstate(all="ignore"):
        mn = np.fmin.reduce(cube, axis=1).astype(np.float64)
        mx = np.fmax.reduce(cube, axis=1).astype(np.float64)
        total = np.nansum(cube, axis=1, dtype=np.float64)
        avg = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        node_n = present.sum(axis=2)
        node_mean = np.where(
            node_n > 0, np.nansum(cube, axis=2, dtype=np.float64) / np.maximum(node_n, 1), np.nan
        )
    del present
    if bins is not None:
        # exact whole-job means: each bin weighs by the periods behind it
        w = bins.periods
        with np.errstate(all="ignore"):
            node_mean = np.nansum(cube * w, axis=2, dtype=np.float64) / w.sum(
                axis=2, dtype=np.float64
            )
        for i, name in enumerate(names):
            # a summed sensor's (cgroups') extremes are its sums', seen as bin means;
            # so are those of a sensor the summaries lacked when they stood in
            lo, hi = float(bins.lo[i]), float(bins.hi[i])
            if i in summed or np.isnan(lo) or np.isnan(hi):
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    lo, hi = float(np.nanmin(mn[i])), float(np.nanmax(mx[i]))
            data.extremes[name] = (lo, hi)
    for i, name in enumerate(names):
        data.stats[name] = SensorStats(mn[i], avg[i], mx[i], count[i])
        data.node_means[name] = node_mean[i]
    add_derived(data)
    return data
