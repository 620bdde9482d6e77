"""The contract's summaries built from the raw data in the store.

The truth the reducers' partials are checked against, and what the
collector falls back to when partials overlap (a reducer that crashed
between publishing a partial and acking its raw input): a (job, period)'s
summary over every sample of the nodes that ran the job in that period,
one per sensor (measurement, sorted tags without host, field). Nodes
without a job are summarized under job ``-``. ``job`` lines are not sensors
(the store keeps them as job_activity).
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np

from hushmon.transport.summary import ALPHA, Summary
from hushmon.transport.wire import NO_JOB, SensorKey

_JOB_SQL = """
SELECT se.measurement, se.tags, se.field, s.value
FROM job_activity j
JOIN series se ON se.host = j.host
JOIN samples s ON s.series_id = se.series_id AND s.time_ns = j.time_ns
WHERE j.job = ? AND j.time_ns = ?
ORDER BY se.measurement, se.tags, se.field
"""

_NO_JOB_SQL = """
SELECT se.measurement, se.tags, se.field, s.value
FROM samples s JOIN series se ON se.series_id = s.series_id
WHERE s.time_ns = ?
  AND se.host NOT IN (SELECT host FROM job_activity WHERE time_ns = ?)
ORDER BY se.measurement, se.tags, se.field
"""


def summaries_from_store(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int, alpha: float = ALPHA
) -> dict[SensorKey, Summary]:
    """Every sensor's summary of (job, period) from the samples the store holds."""
    if job == NO_JOB:
        rows = con.execute(_NO_JOB_SQL, [time_ns, time_ns]).fetchall()
    else:
        rows = con.execute(_JOB_SQL, [job, time_ns]).fetchall()
    if not rows:
        return {}
    keys = [(r[0], r[1], r[2]) for r in rows]
    values = np.array([r[3] for r in rows], dtype=np.float64)
    # rows are ordered by sensor: cut where the key changes
    starts = [0] + [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]] + [len(keys)]
    out: dict[SensorKey, Summary] = {}
    for a, b in itertools.pairwise(starts):
        out[SensorKey(*keys[a])] = Summary.of(np.asarray(values[a:b]), alpha)
    return out
