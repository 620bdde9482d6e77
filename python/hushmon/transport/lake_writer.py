"""Appends a :class:`~hushmon.transport.raw_group.RawGroup` to the lake in
one transaction: the collector acks its messages only after this returns.

The group's big tables (samples sorted by (series_id, time_ns), job
activity, transport batches) are encoded into Parquet files *before* the
transaction, outside the lake's commit lock (store/lake_add_files.py); the
transaction registers them with the small rows (new series, events), so
two collectors encode at once and take turns only for the catalog.

What makes storage exactly once with several collectors on one durable
consumer (each message goes to one of them): a batch can reach the store a
second time only as a redelivery (a collector died or stalled after its
commit and before its ack) or an agent's replay beyond JetStream's
Nats-Msg-Id window. The raw path puts both in ``recheck``. They are looked
up in ``transport_batches`` before the files are written (those found are
left out of them), and those not found are looked up again inside the
transaction that registers the files, under the commit lock: a batch found
only then (another collector committed it in between) makes the group go
in by INSERT without it, its files deleted. Those found are counted as
store duplicates. DuckLake has no unique keys, so this lookup is the
guard. docs/transport.md ("Collector") states the one window left.

Series: the ids known stored are loaded at open and kept; only the others
are appended (two collectors that meet a new series at once both append it:
readers see ``series``, one row per id).

The connection is opened again every :data:`REOPEN_EVERY_COMMITS`
transactions: DuckLake keeps, per attached lake, the tables' statistics of
every data-file count a transaction of it has seen (its catalog's stats
cache, keyed by the snapshot's next file id, never evicted). Every commit
adds files, so each transaction of a collector added an entry: writing 600
summary groups (one commit each) on one connection grew the process by
~20 MiB (~35 KB an entry), and for as long as it ran; opened again every
256, it stopped growing after the first reopen
(bench/bench_lake_writer_memory.py; docs/transport.md, "Memory over time").
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hushmon.errors import HushmonError
from hushmon.store.lake import CommitStats, lake_commit, open_lake
from hushmon.store.lake_add_files import FileWriter, PendingFile, register
from hushmon.transport.collect_records import Event
from hushmon.transport.memdump import give_back_after_close
from hushmon.transport.raw_group import RawGroup

# HUSHMON_COLLECT_FAULT=exit-after-commit:N (or exit-before-commit:N): the
# process ends with os._exit right after (before) the commit of its Nth
# group, with nothing acked: the test of exactly-once storage. Raw and
# summary groups count alike; exit-before-commit and stall-before-commit
# hit raw groups only. stall-before-commit:N:SECONDS holds the Nth group
# that long before its commit: the test that in-progress acks keep it from
# being redelivered.
FAULT_ENV = "HUSHMON_COLLECT_FAULT"
FAULT_EXIT_CODE = 86
_FAULTS = ("exit-after-commit", "exit-before-commit", "stall-before-commit")


@dataclass(frozen=True)
class Fault:
    kind: str
    group: int  # the raw group it hits, from 1
    stall_s: float = 0.0


# Transactions (commit attempts) between reopens of the connection (module
# doc): the cache it drops holds at most this many entries (~9 MiB). A
# reopen cost 0.8 s of CPU here (DuckDB's extensions loaded again; load 19):
# at a commit a second, 0.3 % of a core.
REOPEN_EVERY_COMMITS = 256

# DuckDB's buffer manager bound for a collector's lake connection (its
# default is 80 % of the machine's memory); the embedded store's is the same
# (collect_store.COLLECT_MEMORY_MIB). A group needs a few MiB of it.
LAKE_MEMORY_MIB = 512

# How far back a starting collector looks for the newest seq per (host, epoch).
NEWEST_SEQ_DAYS = 2

_DUPLICATE_WHY = "batch already stored (same host, epoch, seq)"


def fault_from_env() -> Fault | None:
    text = os.environ.get(FAULT_ENV, "")
    if not text:
        return None
    kind, _, rest = text.partition(":")
    n, _, seconds = rest.partition(":")
    try:
        fault = Fault(kind, int(n or "1"), float(seconds or "0"))
    except ValueError:
        fault = Fault("", 0)
    stall = kind == "stall-before-commit"
    if kind not in _FAULTS or fault.group < 1 or (stall != (fault.stall_s > 0)):
        raise HushmonError(
            f"{FAULT_ENV}={text!r}: expected exit-after-commit:N, exit-before-commit:N or "
            "stall-before-commit:N:SECONDS (N >= 1)"
        )
    return fault


@dataclass
class Appended:
    """What one append stored: the batches kept (indexes into the group's
    ``batches``), the values and activity rows stored, and the batches
    dropped as already stored."""

    kept: list[int]
    values: int
    duplicates: int


class LakeWriter:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.fault = fault_from_env()  # a bad value: one line, before the lake is made
        self.con = self._open()
        self.files = FileWriter(self.con, self.path)
        # A table's rows up to this many go by INSERT, which DuckLake inlines
        # into the catalog (store/lake.py's session setting) instead of a
        # tiny file each; a small site's groups of a few batches stay as
        # they were before the files.
        row = self.con.execute(
            "SELECT current_setting('ducklake_default_data_inlining_row_limit')"
        ).fetchone()
        self.inline_rows = int(row[0]) if row and row[0] is not None else 0
        self.commits = CommitStats()
        # wall seconds in lake_commit: holding the lake's commit lock (from
        # the body's start, after the lock and BEGIN, to the commit's end)
        # and in all (the wait for the lock included): a bench reads them
        self.lock_held_s = 0.0
        self.commit_wall_s = 0.0
        # CPU seconds of the append's two halves: the files (before the lock)
        # and the transaction (lookups, registration, small rows, commit)
        self.files_cpu_s = 0.0
        self.commit_cpu_s = 0.0
        self.groups = 0
        self.known_series: set[int] = {
            int(r[0])
            for r in self.con.execute("SELECT DISTINCT series_id FROM series_rows").fetchall()
        }
        self.reopens = 0
        self._attempts_at_open = 0

    def _open(self) -> duckdb.DuckDBPyConnection:
        con = open_lake(self.path)
        # One thread per collector: a group's Parquet write is too small for
        # DuckDB's pool to pay for its hand-offs; measured on the C path
        # (bench_collect --engine c --duckdb-threads 1, docs/transport.md)
        # 1.4-2.3x more batches per CPU-second. A site scales out with more
        # collector processes instead.
        con.execute("SET threads = 1").fetchall()
        con.execute(f"SET memory_limit = '{LAKE_MEMORY_MIB}MiB'").fetchall()
        return con

    def close(self) -> None:
        self.files.close()
        self.con.close()

    def after_commit(self) -> None:
        """Between transactions: the connection opened again when it has run
        REOPEN_EVERY_COMMITS of them (module doc). Nothing is held across
        it (the files of a group are registered or discarded by then; the
        known series stay known). A lake that cannot be opened now keeps
        the old connection, tried again after the next commit."""
        attempts = self.commits.commits + self.commits.retries
        if attempts - self._attempts_at_open < REOPEN_EVERY_COMMITS:
            return
        try:
            con = self._open()
        except (HushmonError, duckdb.Error):
            return
        old, self.con = self.con, con
        self.files = FileWriter(con, self.path)
        self._attempts_at_open = attempts
        self.reopens += 1
        with contextlib.suppress(duckdb.Error):
            old.close()
        give_back_after_close()

    def newest_seqs(self) -> dict[tuple[str, int], int]:
        """The newest seq stored per (host, epoch), by any collector, among
        the batches received in the last NEWEST_SEQ_DAYS: the whole table is
        864 M rows a day at 10,000 nodes, and its files are pruned by their
        received_at range. An older batch sent again is a replay or a
        redelivery, which the raw path rechecks anyway."""
        return {
            (str(h), int(e)): int(s)
            for h, e, s in self.con.execute(
                "SELECT host, epoch, max(seq) FROM transport_batches "
                "WHERE received_at >= ? GROUP BY host, epoch",
                [datetime.now(UTC).replace(tzinfo=None) - timedelta(days=NEWEST_SEQ_DAYS)],
            ).fetchall()
        }

    def append(self, group: RawGroup) -> tuple[Appended, list[Event]]:
        """Stores the group in one transaction (retried when another writer's
        commit gets in the way); returns what was stored and the group's
        events with a duplicate event for each batch found stored.

        The big tables' rows (samples, job activity, batches) are written as
        Parquet files first, outside the lake's commit lock, so that two
        collectors encode at the same time; the transaction under the lock
        rechecks, registers the files and adds the small rows
        (docs/transport.md, "Several collectors, exactly once", says why
        storage stays exactly once)."""
        self.groups += 1
        self._fault("stall-before-commit")
        # Before the lock: the recheck batches stored by then are dropped
        # from the files. A stored batch stays stored, so inside the lock
        # only the others can have changed (another collector committed one
        # meanwhile): those are looked up again there.
        early = self._stored(self.con, group, group.recheck) if group.recheck else []
        rest = sorted(set(group.recheck) - set(early))
        rows = _without(group, early)
        cpu0 = time.process_time()
        files = self._write_files(rows)
        cpu1 = time.process_time()
        self.files_cpu_s += cpu1 - cpu0
        result: list[tuple[Appended, list[Event], list[int]]] = []

        locked_at = [0.0]

        def body(con: duckdb.DuckDBPyConnection) -> None:
            locked_at[0] = time.perf_counter()
            result.clear()
            late = self._stored(con, group, rest) if rest else []
            if late:
                # rare: a redelivery whose first delivery another collector
                # committed since the look above. Its rows are in the files:
                # the group is stored without them, by INSERT, as before.
                final = _without(group, sorted(early + late))
                for table, part in final.tables():
                    _insert(con, table, part)
            else:
                final = rows
                register(con, files)
                for table, part in rows.tables():
                    if part.num_rows <= self.inline_rows:
                        _insert(con, table, part)
            result.append(self._small_rows(con, group, final))
            self._fault("exit-before-commit")

        began = time.perf_counter()
        try:
            commit(self.con, body, self.commits)
        except BaseException:
            self.files.discard(files)
            raise
        ended = time.perf_counter()
        self.commit_cpu_s += time.process_time() - cpu1
        self.commit_wall_s += ended - began
        self.lock_held_s += ended - locked_at[0]
        self._fault("exit-after-commit")
        appended, events, new_series = result[0]
        if appended.duplicates > len(early):
            self.files.discard(files)  # stored by INSERT instead
        self.known_series.update(new_series)
        self.after_commit()
        return appended, events

    def summaries_committed(self) -> None:
        """A group of summaries is committed (collect_lake.py): it counts as
        a group for the fault hooks, then the reopen check."""
        self.groups += 1
        self._fault("exit-after-commit")
        self.after_commit()

    def append_events(self, events: list[Event]) -> None:
        if events:
            commit(self.con, lambda con: insert_events(con, events), self.commits)
            self.after_commit()

    def _fault(self, when: str) -> None:
        f = self.fault
        if f is None or f.group != self.groups:
            return
        if f.kind == when == "stall-before-commit":
            time.sleep(f.stall_s)  # outside the transaction: a retried commit stalls once
        elif f.kind == when:
            os._exit(FAULT_EXIT_CODE)

    def _write_files(self, rows: _Kept) -> list[PendingFile]:
        """The kept rows of the big tables as files, before the transaction
        (a table with no rows: no file); on a failure the files written so
        far are deleted."""
        files: list[PendingFile] = []
        try:
            for table, part in rows.tables():
                if part.num_rows <= self.inline_rows:
                    continue  # inserted in the transaction, inlined
                sort_by = SAMPLES_ORDER if table == "samples" else ()
                files.append(self.files.write(table, part, sort_by))
        except BaseException:
            self.files.discard(files)
            raise
        return files

    def _small_rows(
        self, con: duckdb.DuckDBPyConnection, group: RawGroup, final: _Kept
    ) -> tuple[Appended, list[Event], list[int]]:
        """Inside the transaction: the series met for the first time, the
        group's events and one duplicate event per batch dropped."""
        events = list(group.events)
        if final.found:
            rows = group.batches.take(pa.array(final.found, pa.int64())).to_pylist()
            events.extend(
                Event("duplicate", r["host"], r["subject"], r["epoch"], r["seq"], 1, _DUPLICATE_WHY)
                for r in rows
            )
        samples = final.samples
        new_series: list[int] = []
        if samples.num_rows and group.series.num_rows:
            series = group.series
            ids = series.column("series_id").to_numpy()
            fresh = np.array([i not in self.known_series for i in ids.tolist()], dtype=bool)
            if fresh.any():
                series = series.filter(pa.array(fresh))
                # one row per id, and only ids whose values are being stored
                series = _first_per_id(series, samples.column("series_id"))
                new_series = series.column("series_id").to_pylist()
                _insert(con, "series_rows", series)
        insert_events(con, events)
        kept = final.kept
        return Appended(kept, samples.num_rows, len(final.found)), events, new_series

    def _stored(
        self, con: duckdb.DuckDBPyConnection, group: RawGroup, which: list[int]
    ) -> list[int]:
        """Those of the batches ``which`` (indexes) transport_batches holds already."""
        keys = group.batches.select(["host", "epoch", "seq"]).take(pa.array(which, pa.int64()))
        keys = keys.append_column("idx", pa.array(which, pa.int64()))
        seqs = keys.column("seq")
        bounds = [pc.min(seqs).as_py(), pc.max(seqs).as_py()]
        con.register("hm_recheck", keys)
        try:
            rows = con.execute(
                """SELECT DISTINCT k.idx FROM hm_recheck k JOIN transport_batches b
                   ON b.host = k.host AND b.epoch = k.epoch AND b.seq = k.seq
                   WHERE b.seq BETWEEN ? AND ?""",
                bounds,
            ).fetchall()
        finally:
            con.unregister("hm_recheck")
        return sorted(int(r[0]) for r in rows)


# The lake's layout of samples (store/lake.py sorts its own inserts alike).
SAMPLES_ORDER = ("series_id", "time_ns")


@dataclass
class _Kept:
    """A group's rows without the batches ``found`` stored already."""

    found: list[int]
    kept: list[int]
    samples: pa.Table  # without the batch column, as the table holds them
    activity: pa.Table
    batches: pa.Table

    def tables(self) -> list[tuple[str, pa.Table]]:
        """The big tables' rows, those with any."""
        parts = [
            ("samples", self.samples),
            ("job_activity", self.activity),
            ("transport_batches", self.batches),
        ]
        return [(name, t) for name, t in parts if t.num_rows]


def _without(group: RawGroup, found: list[int]) -> _Kept:
    batches, samples, activity = group.batches, group.samples, group.activity
    dropped = set(found)
    kept = [i for i in range(batches.num_rows) if i not in dropped]
    if found:
        drop = pa.array(found, pa.int32())
        batches = batches.take(pa.array(kept, pa.int64()))
        samples = samples.filter(pc.invert(pc.is_in(samples.column("batch"), drop)))
        activity = activity.filter(pc.invert(pc.is_in(activity.column("batch"), drop)))
    return _Kept(
        found, kept, samples.drop_columns(["batch"]), activity.drop_columns(["batch"]), batches
    )


def commit(
    con: duckdb.DuckDBPyConnection,
    body: Callable[[duckdb.DuckDBPyConnection], None],
    stats: CommitStats,
) -> None:
    """lake_commit (retried on other writers' commits), and a rollback when
    the body fails otherwise (lake_commit rolls back DuckDB's errors only):
    the connection is left with no transaction open either way."""
    try:
        lake_commit(con, body, stats)
    except duckdb.Error:
        raise
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK").fetchall()
        raise


def _first_per_id(series: pa.Table, stored_ids: pa.ChunkedArray) -> pa.Table:
    ids = series.column("series_id").to_numpy()
    _, first = np.unique(ids, return_index=True)
    series = series.take(pa.array(np.sort(first), pa.int64()))
    return series.filter(pc.is_in(series.column("series_id"), pc.unique(stored_ids)))


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: pa.Table) -> None:
    names = ", ".join(rows.column_names)
    con.register("hm_rows", rows)
    try:
        con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM hm_rows").fetchall()
    finally:
        con.unregister("hm_rows")


def insert_events(con: duckdb.DuckDBPyConnection, events: list[Event]) -> None:
    if not events:
        return
    now_us = int(time.time() * 1e6)  # UTC, as the batches' received_at
    table = pa.table(
        {
            "seen_at": pa.array([now_us] * len(events), pa.timestamp("us")),
            "kind": [e.kind for e in events],
            "host": [e.host for e in events],
            "subject": [e.subject for e in events],
            "epoch": pa.array([e.epoch for e in events], pa.int64()),
            "seq": pa.array([e.seq for e in events], pa.int64()),
            "count": pa.array([e.count for e in events], pa.int64()),
            "reason": [e.reason for e in events],
        }
    )
    con.register("hm_events", table)
    try:
        con.execute(
            """INSERT INTO transport_events
                 (seen_at, kind, host, subject, epoch, seq, count, reason)
               SELECT * FROM hm_events"""
        ).fetchall()
    finally:
        con.unregister("hm_events")
