"""hushmon collect into a lake: several collectors on one durable consumer
store every batch exactly once, also when one dies after its commit and
before its acks and another before its commit; readers work while a
collector writes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import nats
import pytest
from transport_batches import hushmon, publish, store_rows, synthetic_batch
from waiting import wait_until

from hushmon.errors import HushmonError
from hushmon.store.lake import DATA_NAME
from hushmon.store.lake_add_files import FILE_PREFIX, META
from hushmon.store.lake_compact import compact
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_raw import RawGroupBuilder
from hushmon.transport.collect_records import Message
from hushmon.transport.fuzz import valid_batch
from hushmon.transport.lake_writer import FAULT_ENV, FAULT_EXIT_CODE
from hushmon.transport.natsserver import LocalNatsServer
from hushmon.transport.raw_group import RawGroup

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
HOSTS = ("n1", "n2", "n3", "n4")
# AckWait of collect-raw in these tests: redeliveries come after seconds, not 30 s
ACK_WAIT_S = 2.0


def _collect_argv(url: str, lake: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--db", str(lake), *extra]


def _run(argv: list[str], fault: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


async def _set_ack_wait(url: str, seconds: float) -> None:
    """The admin redefines collect-raw's AckWait (deploy streams would)."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.consumer_info("HM_RAW", "collect-raw")
        config = info.config
        config.ack_wait = seconds
        await js.add_consumer("HM_RAW", config)
    finally:
        await nc.close()


def _stored_batches(lake: Path) -> int:
    """0 until the collector has made the lake (its catalog file comes first)."""
    try:
        return int(store_rows(lake, "SELECT count(*) FROM transport_batches")[0][0])
    except HushmonError:
        return 0


def test_two_collectors_store_each_batch_once_across_crashes(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    url, lake = nats_server.url, tmp_path / "c.lake"
    asyncio.run(_set_ack_wait(url, ACK_WAIT_S))
    batches = [synthetic_batch(h, i + 1, T0 + i * S, value=i) for i in range(40) for h in HOSTS]
    publish(url, batches)
    # dies right after committing its 2nd group, before acking it
    a = _run(_collect_argv(url, lake, "--fetch-batch", "16"), "exit-after-commit:2")
    assert a.returncode == FAULT_EXIT_CODE, a.stderr
    assert store_rows(lake, "SELECT count(*) FROM transport_batches") == [(32,)]
    # dies before committing its first group: nothing of it stored
    b = _run(_collect_argv(url, lake, "--fetch-batch", "16"), "exit-before-commit:1")
    assert b.returncode == FAULT_EXIT_CODE, b.stderr
    assert store_rows(lake, "SELECT count(*) FROM transport_batches") == [(32,)]
    # two collectors share the consumer until the stream is drained (their
    # --once waits for the dead ones' messages to come back after AckWait):
    # one on each raw path, Python and C (fastcollect)
    argv = _collect_argv(url, lake, "--fetch-batch", "16", "--once", "--json", "-")
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    procs = [
        subprocess.Popen(
            [*argv, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for extra in ((), ("--raw-only", "--engine", "c"))
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    n = len(batches)
    per_identity = store_rows(
        lake,
        "SELECT max(c), count(*) FROM (SELECT count(*) AS c FROM transport_batches "
        "GROUP BY host, epoch, seq)",
    )
    assert per_identity == [(1, n)]
    per_value = store_rows(
        lake,
        "SELECT max(c), count(*) FROM (SELECT count(*) AS c FROM samples "
        "GROUP BY series_id, time_ns)",
    )
    assert per_value == [(1, 3 * n)]
    assert store_rows(
        lake, "SELECT count(*), count(DISTINCT (host, time_ns)) FROM job_activity"
    ) == [(n, n)]
    # the survivors took the redeliveries: A's 16 committed ones found stored
    # (duplicates), B's stored now. B took either a fresh group or A's
    # unacked one (when A's AckWait ran out before B's start): 32 or 16
    # redelivered, 16 duplicates and the rest new either way.
    redelivered = sum(r["redelivered"] for r in reports)
    assert redelivered in (16, 32)
    assert sum(r["duplicate_batches"] for r in reports) == 16
    assert sum(r["batches_stored"] for r in reports) == n - 32
    events = store_rows(
        lake, "SELECT kind, sum(count) FROM transport_events GROUP BY kind ORDER BY kind"
    )
    assert events == [("duplicate", 16), ("redelivered", redelivered)]
    # groups of 16 batches are inlined in the catalog (48 samples): no files,
    # no orphans; compaction after the crashes changes no count
    report = compact(lake, grace_s=0)
    assert report.orphans_deleted == 0
    assert store_rows(lake, "SELECT count(*) FROM transport_batches") == [(n,)]
    assert store_rows(lake, "SELECT count(*) FROM samples") == [(3 * n,)]


def test_a_collector_killed_before_its_commit_leaves_an_orphan_no_reader_sees(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    url, lake = nats_server.url, tmp_path / "c.lake"
    # one group of 160 batches: a file each of samples, activity and batches
    # (a table's rows up to 100 go inlined into the catalog instead)
    publish(url, [synthetic_batch(h, i + 1, T0 + i * S) for i in range(40) for h in HOSTS])
    a = _run(_collect_argv(url, lake, "--engine", "c", "--raw-only"), "exit-before-commit:1")
    assert a.returncode == FAULT_EXIT_CODE, a.stderr
    orphans = set(_added_files(lake))
    assert len(orphans) == 3 and not orphans & set(_registered(lake))
    assert store_rows(lake, "SELECT count(*) FROM samples") == [(0,)]
    young = compact(lake)  # the default grace: it may be a live collector's
    assert young.orphans_deleted == 0 and set(_added_files(lake)) == orphans
    report = compact(lake, grace_s=0)
    assert report.orphans_deleted == 3 and report.orphan_bytes_deleted > 0
    assert _added_files(lake) == []
    assert store_rows(lake, "SELECT count(*) FROM transport_batches") == [(0,)]


def _added_files(lake: Path) -> list[str]:
    """The files collectors wrote into the lake's data folder."""
    return [p.name for p in (lake / DATA_NAME).rglob(f"{FILE_PREFIX}*.parquet")]


def _registered(lake: Path) -> list[str]:
    return [str(r[0]) for r in store_rows(lake, f"SELECT path FROM {META}.ducklake_data_file")]


def test_readers_work_while_a_collector_writes(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """The default store of collect is <data>/hushmon.lake; status, ingest
    --list and digest read it while the collector runs."""
    url, data = nats_server.url, tmp_path / "data"
    first = [synthetic_batch(h, i + 1, T0 + i * S, job="7") for i in range(5) for h in HOSTS]
    publish(url, first)
    collector = subprocess.Popen(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lake = data / "hushmon.lake"
        wait_until(lambda: _stored_batches(lake) == 20, "the first 20 batches stored", 60, 0.2)
        st = hushmon("transport", "status", "--data-dir", str(data), "--json", "-")
        assert st.returncode == 0, st.stderr
        nodes = {n["host"]: n for n in json.loads(st.stdout)["nodes"]}
        assert sorted(nodes) == list(HOSTS) and {n["batches"] for n in nodes.values()} == {5}
        jobs = hushmon("ingest", "--list", "--data-dir", str(data))
        assert jobs.returncode == 0 and jobs.stdout.startswith("7\t4 node(s)"), jobs.stderr
        # more arrives and is stored while a digest of job 7 is built
        publish(url, [synthetic_batch(h, 6, T0 + 5 * S, job="8") for h in HOSTS])
        dig = hushmon("digest", "7", "--data-dir", str(data), "--json", "-")
        assert dig.returncode == 0, dig.stderr
        assert json.loads(dig.stdout)["job"] == "7"
        assert collector.poll() is None, "the collector kept running"
        # stored before the stop: on a loaded machine the digest can end first
        wait_until(lambda: _stored_batches(lake) == 24, "job 8's 4 batches stored", 60, 0.2)
    finally:
        collector.terminate()
        out, err = collector.communicate(timeout=60)
    assert collector.returncode == 0, err
    assert "collected 24 batch(es)" in out and "hushmon.lake" in out


class _BrokenLakeBuilder(RawGroupBuilder):
    """Fails on one batch the way an unknown bug would (checks passed)."""

    def build(self, messages: list[Message]) -> RawGroup:
        if any(b"POISON" in m.data for m in messages):
            raise ValueError("a bug triggered by this message")
        return super().build(messages)


def test_the_lake_sets_a_poison_message_aside_and_stops_on_its_own_failure(
    tmp_path: Path,
) -> None:
    store = LakeCollectorStore(tmp_path / "c.lake")
    store.builder = _BrokenLakeBuilder(store.builder.max_batch_bytes)
    try:
        batches = [valid_batch(f"n{i}", 1) for i in range(5)]
        batches[2].data += b"mem,host=n2,x=POISON used_pct=1 1\n"
        assert len(store.write_raw(batches)) == 4
        assert store.stats.batches_stored == 4 and store.stats.rejected_batches == 1
        rows = store.writer.con.execute(
            "SELECT host, reason FROM transport_events WHERE kind = 'rejected'"
        ).fetchall()
        assert len(rows) == 1 and rows[0][0] == "n2" and "ValueError" in rows[0][1]

        def disk_full(table: object, rows: object, sort_by: object = ()) -> None:
            raise duckdb.IOException("could not write: No space left on device")

        store.writer.files.write = disk_full  # type: ignore[method-assign, assignment]
        store.writer.inline_rows = 0  # a batch's few rows go to files too
        with pytest.raises(HushmonError, match="No space left"):
            store.write_raw([valid_batch("n7", 1)])
        assert store.stats.rejected_batches == 1  # nothing set aside
        assert store.writer.con.execute("SELECT count(*) FROM transport_batches").fetchall() == [
            (4,)
        ]
    finally:
        store.close()


async def _ack_pending(url: str) -> int:
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info("HM_RAW", "collect-raw")
        return int(info.num_ack_pending)
    finally:
        await nc.close()


def test_a_group_held_past_the_ack_wait_is_not_redelivered(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """Collector A holds its first group 3 ack waits before its commit
    (stall-before-commit); its in-progress acks keep the server from
    handing the group to collector B meanwhile, which would store it too."""
    url, lake = nats_server.url, tmp_path / "c.lake"
    asyncio.run(_set_ack_wait(url, ACK_WAIT_S))
    batches = [synthetic_batch(h, i + 1, T0 + i * S) for i in range(16) for h in HOSTS]
    publish(url, batches)
    argv = _collect_argv(url, lake, "--fetch-batch", "16", "--once", "--json", "-")
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    a = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, FAULT_ENV: f"stall-before-commit:1:{3 * ACK_WAIT_S}"},
    )
    deadline = time.monotonic() + 60
    while asyncio.run(_ack_pending(url)) < 16 and time.monotonic() < deadline:
        time.sleep(0.1)  # A holds its first group
    b = subprocess.Popen(
        [*argv, "--raw-only"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    reports = []
    for p in (a, b):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    assert reports[0]["batches_stored"] >= 16
    assert sum(r["batches_stored"] for r in reports) == len(batches)
    assert sum(r["redelivered"] + r["duplicate_batches"] for r in reports) == 0, reports
    assert store_rows(
        lake, "SELECT count(*), count(DISTINCT (host, epoch, seq)) FROM transport_batches"
    ) == [(len(batches), len(batches))]
