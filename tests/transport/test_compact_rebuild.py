"""`store compact` rebuilds an overlapped period from raw data once more
when it closes it: a summaries-only collector may have rebuilt the period
before the raw-only collectors stored all of it (docs/transport.md, "One
collector for the summaries"), and no raw batch arriving later rebuilds it."""

from __future__ import annotations

from pathlib import Path

import duckdb
from transport_batches import partial_message, raw_message, synthetic_batch

from hushmon.store import raw_summaries
from hushmon.store.lake import open_lake
from hushmon.store.lake_compact import compact
from hushmon.transport import wire
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.rawsummary import summaries_from_store

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
CLOSE_S = 3600
HOSTS = {"n1": "r1", "n2": "r1", "n3": "r2"}


def _counts(con: duckdb.DuckDBPyConnection) -> tuple[set[int], set[int]]:
    """The stored job-wide counts per sensor of period 0, and the raw truth's."""
    stored = read_job_summaries(con, "j1", T0)
    truth = summaries_from_store(con, "j1", T0)
    return {s.count for s in stored.values()}, {s.count for s in truth.values()}


def _overlapped(lake: Path) -> LakeCollectorStore:
    """Period 0 of 3 nodes: n3's raw batch is not stored yet (a raw-only
    collector's lag) when rack r1's twin partial overlaps and the summary
    path rebuilds the period from the 2 nodes stored; then n3's comes."""
    batches = [synthetic_batch(h, 1, T0, rack=r, value=1.5 + int(h[1])) for h, r in HOSTS.items()]
    store = LakeCollectorStore(lake)
    store.write_raw([raw_message(b, n) for n, b in enumerate(batches[:2], 1)])
    r1 = batches[:2]
    store.write_summaries(
        [
            partial_message(r1, "r1", T0, "r1:0", 1),
            partial_message([batches[2]], "r2", T0, "r2:0", 2),
        ]
    )
    store.write_summaries([partial_message(r1, "r1", T0, "r1:0:twin", 3)])  # overlaps: rebuilt
    assert store.stats.summaries_rebuilt == 1
    store.write_raw([raw_message(batches[2], 3)])
    return store


def _compact(lake: Path) -> int:
    """Compacts with period 0 closed; how many periods it rebuilt."""
    report = compact(lake, now_ns=T0 + (CLOSE_S + 1) * S, grace_s=0, summary_close_s=CLOSE_S)
    assert report.summary_periods_stored == 1
    return report.summary_periods_rebuilt


def test_compaction_rebuilds_an_overlapped_period_with_the_raw_data_stored_after(
    tmp_path: Path,
) -> None:
    lake = tmp_path / "s.lake"
    store = _overlapped(lake)
    try:  # the race: the raw data holds 3 nodes, the rebuilt summaries 2
        assert _counts(store.writer.con) == ({2}, {3})
    finally:
        store.close()

    assert _compact(lake) == 1

    con = open_lake(lake, create=False)
    try:
        assert _counts(con) == ({3}, {3})
        # moments and sketches, as the raw data gives them
        assert read_job_summaries(con, "j1", T0) == summaries_from_store(con, "j1", T0)
        origins = con.execute("SELECT DISTINCT origin FROM job_summaries").fetchall()
        assert origins == [("raw",)]
    finally:
        con.close()


def test_a_rebuild_is_not_replaced_by_one_from_fewer_samples(tmp_path: Path) -> None:
    """Raw rows deleted (retention) must not shrink a rebuilt period."""
    lake = tmp_path / "s.lake"
    store = _overlapped(lake)
    try:  # a later partial of the period rebuilds it again, from all 3 nodes
        store.write_summaries([partial_message([], "r2", T0, "r2:0:late", 4)])
        assert _counts(store.writer.con) == ({3}, {3})
        store.writer.con.execute(f"DELETE FROM samples WHERE time_ns = {T0}")
    finally:
        store.close()

    assert _compact(lake) == 0

    con = open_lake(lake, create=False)
    try:
        assert _counts(con) == ({3}, set())
    finally:
        con.close()


def test_the_store_and_the_wire_name_the_jobless_nodes_alike() -> None:
    assert raw_summaries.NO_JOB == wire.NO_JOB
