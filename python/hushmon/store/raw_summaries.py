"""The contract's summaries of a (job, period) built from the store's raw data.

The truth the reducers' partials are checked against, and what a period
whose partials overlapped (a reducer's twin publishing again) is rebuilt
from: by the collector when the overlap arrives, and once more by
``hushmon store compact`` when it closes the period, once every raw batch
is in (lake_summaries_compact.py). One summary per sensor (measurement,
sorted tags without host, field) over every sample of the nodes that ran
the job in that period; nodes without a job are summarized under job
:data:`NO_JOB`. ``job`` lines are not sensors (the store keeps them as
job_activity).

The numbers are the ones of transport/summary.py's ``Summary`` (it builds
its own from :func:`moments_of` and :func:`buckets_of`), so a summary
rebuilt here and one a reducer merged agree; this module lives in the store
because the store's compaction rebuilds without the transport above it
(python/hushmon/README.md: imports go down).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import duckdb
import numpy as np

# The sketches' relative accuracy (DDSketch), the reducers' default.
ALPHA = 0.01
NO_JOB = "-"  # the summary job of a node that runs none

SensorName = tuple[str, str, str]  # (measurement, tags, field), as series

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


def gamma_of(alpha: float) -> float:
    return (1.0 + alpha) / (1.0 - alpha)


@dataclass(frozen=True)
class Moments:
    count: int
    sum: float
    mean: float
    m2: float  # sum of squared deviations from the mean
    min: float
    max: float


def moments_of(values: np.ndarray) -> Moments | None:
    """The moments of at least one value; None for none."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return None
    total = float(x.sum())
    mean = total / len(x)
    return Moments(
        len(x), total, mean, float(np.sum((x - mean) ** 2)), float(x.min()), float(x.max())
    )


@dataclass
class Buckets:
    """DDSketch buckets: a positive x counts in ceil(log(x) / log(gamma)), a
    negative one likewise by -x in ``neg``, zeros apart."""

    zero: int = 0
    pos: dict[int, int] = field(default_factory=dict)
    neg: dict[int, int] = field(default_factory=dict)


def buckets_of(values: np.ndarray, alpha: float) -> Buckets:
    values = np.asarray(values, dtype=np.float64)
    log_gamma = math.log(gamma_of(alpha))
    out = Buckets(zero=int(np.count_nonzero(values == 0.0)))
    for sign, buckets in ((1.0, out.pos), (-1.0, out.neg)):
        part = values[values * sign > 0.0] * sign
        if len(part) == 0:
            continue
        index = np.ceil(np.log(part) / log_gamma).astype(np.int64)
        keys, counts = np.unique(index, return_counts=True)
        buckets.update(zip(keys.tolist(), counts.tolist(), strict=True))
    return out


@dataclass(frozen=True)
class RawSummary:
    moments: Moments
    alpha: float
    buckets: Buckets


def summaries_of_period(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int, alpha: float = ALPHA
) -> dict[SensorName, RawSummary]:
    """Every sensor's summary of (job, period) from the samples the store
    holds (a lake or the embedded file: the same tables)."""
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
    out: dict[SensorName, RawSummary] = {}
    for a, b in itertools.pairwise(starts):
        part = values[a:b]
        moments = moments_of(part)
        assert moments is not None  # a sensor's run holds at least one row
        out[keys[a]] = RawSummary(moments, alpha, buckets_of(part, alpha))
    return out
