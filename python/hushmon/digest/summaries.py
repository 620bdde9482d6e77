"""A job read from its summaries alone (``merged_summaries``, the rack
partials merged per period: store/summary_view.py), as a JobData.

The reducers keep per (job, period, sensor) the count, sum, mean, M2, min,
max and a quantile sketch over the job's nodes. That gives every sensor's
min / average / max over nodes per period -- the digest's ``stats`` -- at a
cost that grows with periods x sensors, whatever the node count. It holds no
node's own values: the cube has one row, the average over nodes
(:data:`AVERAGE_NODE`), so that the factors marked ``ACROSS_NODES`` (idle
CPU share, swapping and disk, the work rate) run on it unchanged, and the
ones needing each node (``PER_NODE``) are skipped with that reason.

Sensor names follow :mod:`hushmon.digest.jobdata`; a sensor the summaries
split in several keys that the raw digest sums per node (a job's cgroups)
gets the sum of their averages (exact for the average; min and max are
the sums of the keys' bounds).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np

from hushmon.digest import resolution as res
from hushmon.digest.jobdata import JobData, SensorStats
from hushmon.errors import HushmonError
from hushmon.store.query import JobInfo
from hushmon.store.schema import open_store_readonly
from hushmon.store.summary_view import has_job_summaries, summaries_relation

AVERAGE_NODE = "average of the nodes"

_ROWS_SQL = """
WITH k AS (
  SELECT time_ns, count, mean, min, max,
         measurement || '.' || field
           || CASE WHEN tags = '' OR measurement = 'cgroup' THEN '' ELSE '[' || tags || ']' END
           AS sensor
  FROM {relation}
  WHERE job = $job AND measurement NOT IN ('job', 'hushmon_agent', 'cpu_info')
    AND (NOT contains(tags, 'job=') OR list_contains(string_split(tags, ','), 'job=' || $job))
)
SELECT sensor, time_ns, sum(mean) AS mean, sum(min) AS min, sum(max) AS max,
       max(count) AS nodes
FROM k GROUP BY sensor, time_ns ORDER BY sensor, time_ns
"""


def has_summaries(con: duckdb.DuckDBPyConnection, job: str) -> bool:
    return has_job_summaries(con, job)


def _info(con: duckdb.DuckDBPyConnection, job: str, times: np.ndarray) -> JobInfo:
    rows = con.execute(
        "SELECT DISTINCT host FROM job_activity WHERE job = ? ORDER BY host", [job]
    ).fetchall()
    return JobInfo(job, [r[0] for r in rows], int(times[0]), int(times[-1]), len(times))


def load_summaries(db_path: Path, job: str) -> JobData:
    """The job's across-node statistics per period from its summaries."""
    con = open_store_readonly(Path(db_path))
    try:
        if not has_summaries(con, job):
            raise HushmonError(
                f"no summaries of job {job!r} in {db_path} (collected with hushmon collect?)"
            )
        relation = summaries_relation(con)
        rows = con.execute(_ROWS_SQL.format(relation=relation), {"job": job}).fetchnumpy()
        times = np.unique(rows["time_ns"].astype(np.int64))
        info = _info(con, job, times)
    except duckdb.Error as exc:
        raise HushmonError(f"reading job {job} failed: {str(exc).splitlines()[0]}") from exc
    finally:
        con.close()
    names, sensor_idx = np.unique(rows["sensor"].astype(str), return_inverse=True)
    t_idx = np.searchsorted(times, rows["time_ns"].astype(np.int64))
    shape = (len(names), len(times))
    cols = {}
    for col in ("mean", "min", "max", "nodes"):
        m = np.full(shape, np.nan)
        m[sensor_idx, t_idx] = rows[col].astype(np.float64)
        cols[col] = m
    cube = cols["mean"].astype(np.float32)[:, np.newaxis, :]
    period_s = float(np.median(np.diff(times))) / 1e9 if len(times) > 1 else 1.0
    data = JobData(
        info=info,
        times_ns=times,
        hosts=[AVERAGE_NODE],
        base_names=[str(n) for n in names],
        cube=cube,
        resolution=res.Resolution(res.SUMMARIES, len(times), period_s, period_s, len(times)),
    )
    nodes = np.nan_to_num(cols["nodes"]).astype(np.int64)
    for i, name in enumerate(data.base_names):
        data.stats[name] = SensorStats(cols["min"][i], cols["mean"][i], cols["max"][i], nodes[i])
        with np.errstate(all="ignore"):
            data.node_means[name] = np.array([np.nanmean(cols["mean"][i])])
    from hushmon.digest.sensors import add_derived

    add_derived(data)
    return data
