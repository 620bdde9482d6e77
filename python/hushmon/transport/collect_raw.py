"""The collector's Python raw path: a fetched group of messages as a
:class:`~hushmon.transport.raw_group.RawGroup` for the lake writer.

The same checks as the embedded store's path (collect_store.py): headers by
the wire contract, oversized and empty payloads, the host check (a batch
whose lines name another host than its ``Hm-Host`` is rejected whole),
malformed lines counted per batch. Lines are parsed once for the whole group
(:mod:`hushmon.store.fastparse`), the lines it cannot take by the exact
parser, as ``hushmon ingest`` does; series ids are the lake's key hashes
(:func:`hushmon.store.lake.series_id_of`), so collectors that never talk to
each other name a series alike.

A batch is put in ``recheck`` (the writer looks it up in transport_batches
before it appends) when it may be stored already: delivered more than once
(a collector died or stalled after its commit, before its ack), an agent's
replay (beyond JetStream's Nats-Msg-Id window), or at or below the newest
seq this collector stored for its (host, epoch). A second copy of a batch
inside the group is dropped here as a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from hushmon.store import lineproto
from hushmon.store.ingest import _LineKeys
from hushmon.store.lake import series_id_of
from hushmon.transport.collect_records import Event, Message
from hushmon.transport.collect_store import (
    _Accepted,
    _Group,
    _liars,
    _newest_time_per_batch,
    accept_batches,
    batches_table,
)
from hushmon.transport.raw_group import (
    ACTIVITY_SCHEMA,
    SAMPLES_SCHEMA,
    SERIES_SCHEMA,
    RawGroup,
)

_SeriesRow = tuple[int, str, str, str, str]  # series_id, host, measurement, tags, field


@dataclass
class _Columns:
    """Samples, activity and the series met, as plain columns before Arrow."""

    sid: list[np.ndarray]
    time_ns: list[np.ndarray]
    value: list[np.ndarray]
    batch: list[np.ndarray]
    jobs: list[tuple[str, str, int, int]]  # job, host, time_ns, batch
    series: list[_SeriesRow]


class RawGroupBuilder:
    """Turns fetched messages into RawGroups; keeps the line keys and series
    met for its life (a cache: :meth:`forget` after a group that was not
    stored, so its series are offered again)."""

    def __init__(self, max_batch_bytes: int) -> None:
        self.max_batch_bytes = max_batch_bytes
        self.keys = _LineKeys()
        self._met: list[_SeriesRow] = []
        # the newest seq this collector stored per (host, epoch): at or below
        # it a batch may be stored (raised by stored(), loaded by the store)
        self.newest_seq: dict[tuple[str, int], int] = {}
        # the last group's accepted payloads, one per row of its batches
        self.payloads: list[bytes] = []

    def forget(self) -> None:
        self.keys = _LineKeys()

    def stored(self, group: RawGroup, kept: list[int]) -> None:
        """Called after the commit with the batches the writer appended."""
        hosts = group.batches.column("host").to_pylist()
        epochs = group.batches.column("epoch").to_pylist()
        seqs = group.batches.column("seq").to_pylist()
        for i in kept:
            key = (hosts[i], epochs[i])
            self.newest_seq[key] = max(self.newest_seq.get(key, 0), seqs[i])

    def build(self, messages: list[Message]) -> RawGroup:
        events: list[Event] = []
        self.payloads = []
        accepted = _unique(accept_batches(messages, self.max_batch_bytes, events), events)
        if not accepted:
            nothing = RawGroup.empty()
            nothing.events = events
            return nothing
        group = _Group.of(accepted)
        lies = _liars(group, self.keys)
        if lies:
            for i, why in sorted(lies.items()):
                h = accepted[i].header
                events.append(Event("rejected", h.host, h.subject, h.epoch, h.seq, 1, why))
            accepted = [a for i, a in enumerate(accepted) if i not in lies]
            if not accepted:
                empty = RawGroup.empty()
                empty.events = events
                return empty
            group = _Group.of(accepted)  # parsed again: liars are rare
        self.payloads = [a.message.data for a in accepted]
        cols, bad = self._columns(group)
        for i, (count, first) in sorted(bad.items()):
            h = accepted[i].header
            events.append(Event("malformed_lines", h.host, h.subject, h.epoch, h.seq, count, first))
        return RawGroup(
            samples=_samples(cols),
            series=_series(cols.series),
            activity=_activity(cols),
            batches=batches_table(accepted, _newest_time_per_batch(group)),
            events=events,
            recheck=[i for i, a in enumerate(accepted) if self._maybe_stored(a)],
        )

    def _maybe_stored(self, a: _Accepted) -> bool:
        h = a.header
        return (
            a.message.delivered > 1
            or h.replay
            or h.seq <= self.newest_seq.get((h.host, h.epoch), 0)
        )

    def _series_id(self, host: str, measurement: str, tags: str, field: str) -> int:
        sid = series_id_of(host, measurement, tags, field)
        self._met.append((sid, host, measurement, tags, field))
        return sid

    def _columns(self, group: _Group) -> tuple[_Columns, dict[int, tuple[int, str]]]:
        """The group's values; per batch (index) its malformed lines: count, first reason."""
        self._met = []
        cols = _Columns([], [], [], [], [], [])
        bad: dict[int, tuple[int, str]] = {}

        def reject(batch: int, line_no: int, why: str) -> None:
            count, first = bad.get(batch, (0, f"line {line_no}: {why}"))
            bad[batch] = (count + 1, first)

        fast = group.fast
        if fast is None:  # not UTF-8: every line by the exact parser
            for b, a in enumerate(group.fresh):
                text = a.file.data.decode("utf-8", errors="replace")
                for no, line in enumerate(text.split("\n")[:-1], 1):
                    if "\ufffd" in line:
                        reject(b, no, "invalid UTF-8")
                    else:
                        self._exact(line, b, no, cols, reject)
        else:
            self._fast(group, cols, reject)
            for line in fast.exact_lines.tolist():
                b = int(group.batch_of_line[line])
                start, end = int(fast.line_starts[line]), int(fast.line_starts[line + 1])
                first_line = int(np.searchsorted(group.batch_of_line, b))
                text = group.data[start:end].decode("utf-8").rstrip("\n")
                self._exact(text, b, line - first_line + 1, cols, reject)
        cols.series = self._met
        return cols, bad

    def _fast(self, group: _Group, cols: _Columns, reject: object) -> None:
        fast = group.fast
        assert fast is not None
        if not len(fast.key_id):
            return
        keys = self.keys.key_ids(fast.keys)
        value_key = keys[fast.key_id]
        value_batch = group.batch_of_line[fast.line]
        keep = self.keys.host[value_key] >= 0
        if not keep.all():
            seen: set[int] = set()
            for i in np.flatnonzero(~keep).tolist():
                line = int(fast.line[i])
                if line not in seen:
                    seen.add(line)
                    b = int(value_batch[i])
                    no = line - int(np.searchsorted(group.batch_of_line, b)) + 1
                    reject(b, no, str(self.keys.canon[value_key[i]]))  # type: ignore[operator]
        is_job = self.keys.job[value_key]
        if "active" in fast.names:
            active = (
                keep & is_job & (fast.name_id == fast.names.index("active")) & (fast.value != 0)
            )
            for i in np.flatnonzero(active).tolist():
                c = self.keys.canon[int(value_key[i])]
                assert not isinstance(c, str)
                cols.jobs.append((c[3], c[0], int(fast.time_ns[i]), int(value_batch[i])))
        mask = keep & ~is_job
        cols.sid.append(
            self.keys.series_ids(
                keys, fast.names, fast.key_id[mask], fast.name_id[mask], self._series_id
            )
        )
        cols.time_ns.append(fast.time_ns[mask])
        cols.value.append(fast.value[mask])
        cols.batch.append(value_batch[mask].astype(np.int32))

    def _exact(self, text: str, batch: int, no: int, cols: _Columns, reject: object) -> None:
        """One line by the exact parser, as the ingester's _exact_line."""
        line = text.rstrip("\r")
        if not line or line.startswith("#"):
            return
        try:
            parsed = lineproto.parse_line(line)
        except lineproto.LineError as exc:
            reject(batch, no, str(exc))  # type: ignore[operator]
            return
        host = parsed.tags.pop("host", "")
        if not host:
            reject(batch, no, "no host tag")  # type: ignore[operator]
            return
        if parsed.measurement == "job":
            job = parsed.tags.get("job", "")
            if not job:
                reject(batch, no, "job line without a job tag")  # type: ignore[operator]
            elif parsed.fields.get("active", 0.0) != 0.0:
                cols.jobs.append((job, host, parsed.time_ns, batch))
            return
        tags = ",".join(f"{k}={v}" for k, v in sorted(parsed.tags.items()))
        sids, values = [], []
        for field_name, value in parsed.fields.items():
            sids.append(series_id_of(host, parsed.measurement, tags, field_name))
            self._met.append((sids[-1], host, parsed.measurement, tags, field_name))
            values.append(value)
        cols.sid.append(np.array(sids, dtype=np.int64))
        cols.time_ns.append(np.full(len(sids), parsed.time_ns, dtype=np.int64))
        cols.value.append(np.array(values, dtype=np.float64))
        cols.batch.append(np.full(len(sids), batch, dtype=np.int32))


def _unique(accepted: list[_Accepted], events: list[Event]) -> list[_Accepted]:
    """The first copy of each (host, epoch, seq) in the group; the others
    are duplicates (an agent's replay fetched with its original)."""
    seen: set[tuple[str, int, int]] = set()
    out: list[_Accepted] = []
    for a in accepted:
        h = a.header
        key = (h.host, h.epoch, h.seq)
        if key in seen:
            why = "batch already stored (same host, epoch, seq)"
            events.append(Event("duplicate", h.host, h.subject, h.epoch, h.seq, 1, why))
            continue
        seen.add(key)
        out.append(a)
    return out


def _samples(cols: _Columns) -> pa.Table:
    """The values, the first of a repeated (series, time) kept (as ingest does)."""
    if not cols.sid:
        return SAMPLES_SCHEMA.empty_table()
    sid = np.concatenate(cols.sid)
    t = np.concatenate(cols.time_ns)
    value = np.concatenate(cols.value)
    batch = np.concatenate(cols.batch)
    order = np.lexsort((t, sid))  # stable: the first of equals stays first
    s_sorted, t_sorted = sid[order], t[order]
    repeat = (s_sorted[1:] == s_sorted[:-1]) & (t_sorted[1:] == t_sorted[:-1])
    if repeat.any():
        keep = np.sort(order[np.concatenate(([True], ~repeat))])
        sid, t, value, batch = sid[keep], t[keep], value[keep], batch[keep]
    return pa.table([sid, t, value, batch], schema=SAMPLES_SCHEMA)


def _series(rows: list[_SeriesRow]) -> pa.Table:
    if not rows:
        return SERIES_SCHEMA.empty_table()
    columns = list(zip(*rows, strict=True))
    return pa.table(
        [pa.array(columns[0], pa.int64()), *(pa.array(c, pa.string()) for c in columns[1:])],
        schema=SERIES_SCHEMA,
    )


def _activity(cols: _Columns) -> pa.Table:
    if not cols.jobs:
        return ACTIVITY_SCHEMA.empty_table()
    # one row per (job, host, time): the first batch that named it
    first: dict[tuple[str, str, int], int] = {}
    for job, host, t, b in cols.jobs:
        first.setdefault((job, host, t), b)
    return pa.table(
        {
            "job": [k[0] for k in first],
            "host": [k[1] for k in first],
            "time_ns": pa.array([k[2] for k in first], pa.int64()),
            "batch": pa.array(list(first.values()), pa.int32()),
        },
        schema=ACTIVITY_SCHEMA,
    )
