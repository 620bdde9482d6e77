"""Files a collector writes before its commit (store/lake_add_files.py):
sorted, read like inserted ones, merged and expired and deleted by
compaction like them; an orphan (written, never committed) is never read
and is deleted once older than the grace period; a batch that another
writer commits between the writer's first look and its lock is stored
once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hushmon.store.lake import DATA_NAME, open_lake_readonly
from hushmon.store.lake_add_files import FILE_PREFIX
from hushmon.store.lake_compact import compact
from hushmon.store.lake_retention import NS_PER_DAY, NS_PER_HOUR, NS_PER_S
from hushmon.transport.lake_writer import LakeWriter
from hushmon.transport.raw_group import (
    ACTIVITY_SCHEMA,
    BATCHES_SCHEMA,
    SAMPLES_SCHEMA,
    SERIES_SCHEMA,
    RawGroup,
)

DAY0 = 20_000 * NS_PER_DAY  # a UTC midnight
SERIES = 7  # per host
HOSTS = ["n1", "n2", "n3", "n4"]


def _group(hosts: list[str], t0_ns: int, periods: int, seq0: int, shuffle: bool) -> RawGroup:
    """One batch per host and period, SERIES values each; samples in
    arrival order (batch-major) or shuffled (a writer must sort them)."""
    sid, tim, val, bat = [], [], [], []
    b_host, b_seq, b_time = [], [], []
    for p in range(periods):
        for h, host in enumerate(hosts):
            row = len(b_host)
            b_host.append(host)
            b_seq.append(seq0 + p)
            b_time.append(t0_ns + p * 10 * NS_PER_S)
            for s in range(SERIES):
                sid.append(1000 * (h + 1) + s)
                tim.append(b_time[-1])
                val.append(float(p * 10 + s))
                bat.append(row)
    order = np.random.default_rng(1).permutation(len(sid)) if shuffle else np.arange(len(sid))
    samples = pa.table(
        [pa.array(np.asarray(c)[order]) for c in (sid, tim, val)]
        + [pa.array(np.asarray(bat, dtype=np.int32)[order])],
        schema=SAMPLES_SCHEMA,
    )
    ids = sorted({s for s in sid})
    series = pa.table(
        [ids, [hosts[i // 1000 - 1] for i in ids], ["m"] * len(ids), [""] * len(ids),
         [f"f{i % 1000}" for i in ids]],
        schema=SERIES_SCHEMA,
    )  # fmt: skip
    n = len(b_host)
    activity = pa.table(
        [["9"] * n, b_host, b_time, pa.array(range(n), pa.int32())], schema=ACTIVITY_SCHEMA
    )
    batches = pa.table(
        [b_host, [1] * n, b_seq, [SERIES] * n, b_time, [0] * n, [False] * n,
         [f"hm.raw.r0.{h}" for h in b_host], list(range(n)),
         pa.array([t // 1000 for t in b_time], pa.int64()).cast(pa.timestamp("us"))],
        schema=BATCHES_SCHEMA,
    )  # fmt: skip
    return RawGroup(samples, series, activity, batches)


def _files(lake: Path) -> list[Path]:
    return sorted((lake / DATA_NAME).rglob(f"{FILE_PREFIX}*.parquet"))


def _count(lake: Path, sql: str) -> int:
    con = open_lake_readonly(lake)
    try:
        return int(con.execute(sql).fetchone()[0])  # type: ignore[index]
    finally:
        con.close()


def test_added_files_are_sorted_merged_rolled_up_expired_and_deleted(tmp_path: Path) -> None:
    lake = tmp_path / "a.lake"
    writer = LakeWriter(lake)
    try:
        # day 0 and day 2, two groups each; shuffled samples come out sorted
        for day, part in ((0, 0), (0, 1), (2, 0), (2, 1)):
            t0 = DAY0 + day * NS_PER_DAY + part * NS_PER_HOUR
            appended, _ = writer.append(_group(HOSTS, t0, 30, 1 + 30 * part + 100 * day, True))
            assert appended.values == len(HOSTS) * 30 * SERIES
        writer.con.execute(
            "INSERT INTO lake_policy VALUES (1, 10, NULL, 0, current_timestamp)"
        ).fetchall()
    finally:
        writer.close()
    files = _files(lake)
    # a file per group of samples, job activity and batches (120 rows each:
    # up to 100 they are inserted and inlined in the catalog instead)
    assert len(files) == 4 * 3
    for f in files:
        if f.parent.name == "samples":
            t = pq.read_table(f)
            keys = list(zip(t["series_id"].to_pylist(), t["time_ns"].to_pylist(), strict=True))
            assert keys == sorted(keys) and len(keys) == len(HOSTS) * 30 * SERIES
    rows = 4 * len(HOSTS) * 30 * SERIES
    assert _count(lake, "SELECT count(*) FROM samples") == rows
    assert _count(lake, "SELECT count(DISTINCT (series_id, time_ns)) FROM samples") == rows
    assert _count(lake, "SELECT count(*) FROM transport_batches") == 4 * len(HOSTS) * 30
    assert _count(lake, "SELECT count(*) FROM jobs") == 1
    # day 2 + 6 h with raw data kept 1 day: day 0 is rolled up, then deleted;
    # every file a collector added is merged away and, with no grace, deleted
    report = compact(lake, now_ns=DAY0 + 2 * NS_PER_DAY + 6 * NS_PER_HOUR, grace_s=0, settle_s=0)
    assert report.raw_rows_deleted == rows // 2
    assert report.files_merged >= 4 and report.orphans_deleted == 0
    assert _files(lake) == []
    assert _count(lake, "SELECT count(*) FROM samples") == rows // 2
    assert _count(lake, "SELECT sum(count) FROM samples_1m") == rows
    assert _count(lake, "SELECT count(*) FROM transport_batches") == 4 * len(HOSTS) * 30


def test_an_orphan_is_never_read_and_is_deleted_after_the_grace(tmp_path: Path) -> None:
    lake = tmp_path / "o.lake"
    writer = LakeWriter(lake)
    try:
        writer.append(_group(["n1"], DAY0, 10, 1, False))
        # a collector that died between its files and its commit
        group = _group(["n2"], DAY0, 10, 1, False)
        orphan = writer.files.write("samples", group.samples.drop_columns(["batch"]))
    finally:
        writer.close()
    assert orphan.path.exists() and orphan.path.parent.name == "samples"
    assert _count(lake, "SELECT count(*) FROM samples") == 10 * SERIES
    # younger than the grace: it may be a live collector's, kept
    report = compact(lake, now_ns=DAY0 + NS_PER_HOUR, settle_s=0)
    assert report.orphans_deleted == 0 and orphan.path.exists()
    old_s = time.time() - 3600
    os.utime(orphan.path, (old_s, old_s))
    report = compact(lake, now_ns=DAY0 + NS_PER_HOUR, settle_s=0)
    assert report.orphans_deleted == 1 and report.orphan_bytes_deleted > 0
    assert not orphan.path.exists()
    assert _count(lake, "SELECT count(*) FROM samples") == 10 * SERIES


def test_a_batch_committed_by_another_writer_after_the_first_look_is_stored_once(
    tmp_path: Path,
) -> None:
    lake = tmp_path / "r.lake"
    first, second = LakeWriter(lake), LakeWriter(lake)
    try:
        # 16 batches: 112 samples, a file (up to 100 rows would be inlined)
        original = _group(HOSTS, DAY0, 4, 1, False)
        redelivered = _group(HOSTS, DAY0, 4, 1, False)
        redelivered.recheck = list(range(redelivered.batches.num_rows))
        # the other writer commits the originals after `second` looked them
        # up (not found) and while it writes its files
        write = second.files.write
        committed: list[int] = []

        def write_then_other_commits(*args, **kwargs):  # type: ignore[no-untyped-def]
            done = write(*args, **kwargs)
            if not committed:
                committed.append(len(first.append(original)[0].kept))
            return done

        second.files.write = write_then_other_commits  # type: ignore[method-assign]
        appended, events = second.append(redelivered)
        assert committed == [16]
        assert appended.kept == [] and appended.duplicates == 16 and appended.values == 0
        assert sum(e.kind == "duplicate" for e in events) == 16
    finally:
        first.close()
        second.close()
    assert _count(lake, "SELECT count(*) FROM transport_batches") == 16
    assert _count(lake, "SELECT count(*) FROM samples") == 16 * SERIES
    # its file was deleted, not left as an orphan: only the first writer's remains
    assert len(_files(lake)) == 1
