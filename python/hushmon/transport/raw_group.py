"""One fetched group of raw batches, parsed and checked, as the lake takes it.

The contract between the collector's two raw paths and the lake writer: the
Python path (nats-py and the ingest parser) and the C hot path
(``libhushmon_collect``, :mod:`hushmon.transport.fastcollect`) both produce a
:class:`RawGroup`; the lake writer appends it in one commit and only then are
its messages acked. Columns are Arrow so neither path copies per value.

- ``samples``: ``series_id`` int64 (:func:`hushmon.store.lake.series_id_of`),
  ``time_ns`` int64, ``value`` float64, ``batch`` int32 (its row in
  ``batches``; the writer drops the column): every value of the accepted
  batches except the agent's ``job`` lines.
- ``series``: ``series_id``, ``host``, ``measurement``, ``tags`` (sorted
  ``k=v`` pairs without ``host``), ``field``: the series met in the group
  (the writer drops those it knows are stored).
- ``activity``: ``job``, ``host``, ``time_ns``, ``batch`` int32: from the ``job`` lines whose
  ``active`` field is non-zero (what ``job_activity`` holds).
- ``batches``: one row per accepted batch, the columns of
  ``transport_batches`` (``host``, ``epoch``, ``seq``, ``lines``,
  ``period_ns``, ``dropped``, ``replay``, ``subject``, ``stream_seq``,
  ``received_at``).
- ``events``: what was not stored as data and why (rejected batches,
  malformed lines, duplicates within the group), as ``transport_events`` rows.
- ``recheck``: indexes into ``batches`` of batches that may already be stored
  (a redelivery or an agent's replay): the writer looks them up before it
  appends and drops those it holds, with their samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from hushmon.transport.collect_records import Event

SAMPLES_SCHEMA = pa.schema(
    [
        ("series_id", pa.int64()),
        ("time_ns", pa.int64()),
        ("value", pa.float64()),
        ("batch", pa.int32()),
    ]
)
SERIES_SCHEMA = pa.schema(
    [
        ("series_id", pa.int64()),
        ("host", pa.string()),
        ("measurement", pa.string()),
        ("tags", pa.string()),
        ("field", pa.string()),
    ]
)
ACTIVITY_SCHEMA = pa.schema(
    [("job", pa.string()), ("host", pa.string()), ("time_ns", pa.int64()), ("batch", pa.int32())]
)
BATCHES_SCHEMA = pa.schema(
    [
        ("host", pa.string()),
        ("epoch", pa.int64()),
        ("seq", pa.int64()),
        ("lines", pa.int64()),
        ("period_ns", pa.int64()),
        ("dropped", pa.int64()),
        ("replay", pa.bool_()),
        ("subject", pa.string()),
        ("stream_seq", pa.int64()),
        ("received_at", pa.timestamp("us")),
    ]
)


@dataclass
class RawGroup:
    samples: pa.Table
    series: pa.Table
    activity: pa.Table
    batches: pa.Table
    events: list[Event] = field(default_factory=list)
    recheck: list[int] = field(default_factory=list)

    @staticmethod
    def empty() -> RawGroup:
        return RawGroup(
            samples=SAMPLES_SCHEMA.empty_table(),
            series=SERIES_SCHEMA.empty_table(),
            activity=ACTIVITY_SCHEMA.empty_table(),
            batches=BATCHES_SCHEMA.empty_table(),
        )
