"""The contract's summaries built from the raw data in the store, as
:class:`Summary` objects.

The truth the reducers' partials are checked against, and what the
collector falls back to when partials overlap (a reducer that crashed
between publishing a partial and acking its raw input). The rows are read
and summarized by the store (store/raw_summaries.py), which rebuilds the
same way when compaction closes an overlapped period.
"""

from __future__ import annotations

import duckdb

from hushmon.store.raw_summaries import ALPHA, summaries_of_period
from hushmon.transport.summary import Sketch, Summary
from hushmon.transport.wire import SensorKey


def summaries_from_store(
    con: duckdb.DuckDBPyConnection, job: str, time_ns: int, alpha: float = ALPHA
) -> dict[SensorKey, Summary]:
    """Every sensor's summary of (job, period) from the samples the store holds."""
    out: dict[SensorKey, Summary] = {}
    for name, raw in summaries_of_period(con, job, time_ns, alpha).items():
        m, b = raw.moments, raw.buckets
        sketch = Sketch(raw.alpha, b.zero, b.pos, b.neg)
        out[SensorKey(*name)] = Summary(m.count, m.sum, m.mean, m.m2, m.min, m.max, sketch)
    return out
