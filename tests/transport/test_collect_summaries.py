"""The collector's summary path on one group of messages (no server): what
a group holds twice or overlapping is found within the group as well as
against the store, the job-wide summaries (merged when read) stay equal to
the raw truth, and on a lake nothing is ever deleted or updated."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pytest
from transport_batches import Batch, partial_message, raw_message, synthetic_batch

from hushmon.digest.summary_sensors import merged_sketches
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_store import CollectorStore, Message
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.rawsummary import summaries_from_store
from hushmon.transport.summary import Summary

T0 = 1_795_000_000_000_000_000
HOSTS = {"n1": "r1", "n2": "r1", "n3": "r2"}


@pytest.fixture
def store(tmp_path: Path) -> CollectorStore:
    s = CollectorStore(tmp_path / "s.duckdb")
    batches = [
        synthetic_batch(h, i + 1, T0 + i * 10**9, rack=r, value=2.0 * i + int(h[1]))
        for i in range(3)
        for h, r in HOSTS.items()
    ]
    s.write_raw([raw_message(b, n) for n, b in enumerate(batches, 1)])
    s.batches = batches  # type: ignore[attr-defined]
    return s


def _of(store: CollectorStore, rack: str, i: int) -> list[Batch]:
    return [b for b in store.batches if b.rack == rack and b.seq == i + 1]  # type: ignore[attr-defined]


def _check_truth(con: duckdb.DuckDBPyConnection, periods: int) -> None:
    for i in range(periods):
        t = T0 + i * 10**9
        stored, truth = read_job_summaries(con, "j1", t), summaries_from_store(con, "j1", t)
        assert set(stored) == set(truth) and len(truth) == 3
        for key, s in truth.items():
            got = stored[key]
            assert (got.count, got.min, got.max) == (s.count, s.min, s.max) == (3, s.min, s.max)
            assert math.isclose(got.sum, s.sum) and math.isclose(got.m2, s.m2, abs_tol=1e-9)


def test_one_group_with_a_duplicate_and_an_overlap_inside_it(store: CollectorStore) -> None:
    r1_0 = partial_message(_of(store, "r1", 0), "r1", T0, "r1:0", 1)
    group = [
        r1_0,
        partial_message(_of(store, "r2", 0), "r2", T0, "r2:0", 2),
        r1_0,  # the same message again (a redelivery)
        partial_message(_of(store, "r1", 0), "r1", T0, "r1:0:twin", 3),  # its twin, a new id
        *(
            partial_message(_of(store, r, i), r, T0 + i * 10**9, f"{r}:{i}", 4 + i)
            for i in (1, 2)
            for r in ("r1", "r2")
        ),
    ]
    store.write_summaries(group)
    st = store.stats
    assert (st.summary_messages, st.summaries_stored, st.summary_duplicates) == (8, 7, 1)
    assert (st.summary_overlaps, st.summaries_rebuilt) == (1, 1)
    _check_truth(store.con, 3)
    origins = store.con.execute(
        "SELECT time_ns, min(origin), max(origin) FROM merged_summaries GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert [o[1:] for o in origins] == [("raw", "raw"), ("merged", "merged"), ("merged", "merged")]
    overlapped = store.con.execute(
        "SELECT msg_id FROM summary_messages WHERE overlapped"
    ).fetchall()
    assert overlapped == [("r1:0:twin",)]
    kinds = store.con.execute(
        "SELECT kind, count(*) FROM transport_events GROUP BY ALL ORDER BY ALL"
    ).fetchall()
    assert kinds == [("summary_duplicate", 1), ("summary_overlap", 1)]


def test_later_groups_see_the_store(store: CollectorStore) -> None:
    first = [
        partial_message(_of(store, r, 0), r, T0, f"{r}:0", n) for n, r in enumerate(("r1", "r2"))
    ]
    store.write_summaries(first)
    # next group: r1:0 again (duplicate by id), then an overlapping twin
    store.write_summaries([first[0], partial_message(_of(store, "r1", 0), "r1", T0, "again", 9)])
    # and a late partial of the same period after the rebuild stays raw
    store.write_summaries([partial_message(_of(store, "r2", 0), "r2", T0, "late", 10)])
    st = store.stats
    assert (st.summaries_stored, st.summary_duplicates, st.summary_overlaps) == (4, 1, 2)
    assert st.summaries_rebuilt == 2
    _check_truth(store.con, 1)


class CountingConnection:
    """A DuckDB connection that notes every statement it runs."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.statements: list[str] = []

    def execute(self, sql: str, params: object = None) -> duckdb.DuckDBPyConnection:
        self.statements.append(sql)
        return self.con.execute(sql, params)

    def __getattr__(self, name: str) -> object:
        return getattr(self.con, name)


def test_a_group_costs_the_same_few_statements_as_one_message(store: CollectorStore) -> None:
    # 3 periods x 2 racks in one group: every statement is per group (the
    # old path ran about 10 per message, and fell behind at a 100 ms period)
    group = [
        partial_message(_of(store, r, i), r, T0 + i * 10**9, f"{r}:{i}", 1 + 2 * i + k)
        for i in range(3)
        for k, r in enumerate(("r1", "r2"))
    ]
    real = store.con
    counting = CountingConnection(real)
    store.con = counting  # type: ignore[assignment]
    try:
        store.write_summaries(group)
    finally:
        store.con = real
    work = [s for s in counting.statements if s not in ("BEGIN TRANSACTION", "COMMIT")]
    assert len(work) <= 8, work
    _check_truth(store.con, 3)


def test_on_a_lake_an_overlapping_partial_is_counted_once_and_nothing_is_deleted(
    tmp_path: Path,
) -> None:
    store = LakeCollectorStore(tmp_path / "s.lake")
    try:
        batches = [
            synthetic_batch(h, i + 1, T0 + i * 10**9, rack=r, value=2.0 * i + int(h[1]))
            for i in range(2)
            for h, r in HOSTS.items()
        ]
        store.write_raw([raw_message(b, n) for n, b in enumerate(batches, 1)])
        of = {
            (r, i): [b for b in batches if b.rack == r and b.seq == i + 1]
            for r in ("r1", "r2")
            for i in range(2)
        }
        real = store.writer.con
        counting = CountingConnection(real)
        store.writer.con = counting  # type: ignore[assignment]
        try:
            store.write_summaries(
                [partial_message(of[(r, i)], r, T0 + i * 10**9, f"{r}:{i}", n)
                 for n, (r, i) in enumerate(of, 1)]
            )  # fmt: skip
            # r1's twin publishes period 0 again under a new id, in a later group
            store.write_summaries([partial_message(of[("r1", 0)], "r1", T0, "r1:0:twin", 9)])
        finally:
            store.writer.con = real
        written = [s.split()[0].upper() for s in counting.statements]
        assert "DELETE" not in written and "UPDATE" not in written, written
        st = store.stats
        assert (st.summaries_stored, st.summary_overlaps, st.summaries_rebuilt) == (5, 1, 1)
        _check_truth(real, 2)  # 3 nodes each period, not 5 in period 0
        origins = real.execute(
            "SELECT time_ns, min(origin) FROM merged_summaries GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert [o for _t, o in origins] == ["raw", "merged"]
    finally:
        store.close()


def test_an_overlap_without_raw_data_yet_shows_nothing_rather_than_double(
    tmp_path: Path,
) -> None:
    store = CollectorStore(tmp_path / "s.duckdb")
    try:
        batches = [synthetic_batch(h, 1, T0, rack=r) for h, r in HOSTS.items()]
        mine = [b for b in batches if b.rack == "r1"]  # no raw stored at all
        store.write_summaries([partial_message(mine, "r1", T0, "a", 1)])
        assert len(read_job_summaries(store.con, "j1", T0)) == 3
        store.write_summaries([partial_message(mine, "r1", T0, "a:twin", 2)])
        assert read_job_summaries(store.con, "j1", T0) == {}
        # once the raw data is there, the next partial of the period rebuilds it
        store.write_raw([raw_message(b, n) for n, b in enumerate(batches, 1)])
        store.write_summaries([partial_message([batches[2]], "r2", T0, "b", 3)])
        _check_truth(store.con, 1)
        assert store.stats.summaries_rebuilt == 2
    finally:
        store.close()


def test_the_whole_jobs_sketch_merged_in_sql_equals_merging_in_python(tmp_path: Path) -> None:
    store = CollectorStore(tmp_path / "s.duckdb")
    try:
        values = {("r1", 0): [-2.5, 0.0, 3.0], ("r2", 0): [-0.001, 7.0], ("r1", 1): [0.0, -40.0]}
        group = []
        for n, ((rack, i), vs) in enumerate(values.items(), 1):
            payload = {
                "v": 1,
                "level": "rack",
                "rack": rack,
                "job": "j1",
                "time_ns": T0 + i,
                "sources": [[f"{rack}n{n}", 1, 1]],
                "sensors": {"mem used_pct": Summary.of(vs).to_json()},
            }
            data = json.dumps(payload).encode()
            group.append(Message(f"hm.sum.rack.{rack}", {"Nats-Msg-Id": str(n)}, data, n))
        store.write_summaries(group)
        got = merged_sketches(store.con, "merged_summaries", "j1")[("mem", "", "used_pct")]
        want = Summary.of([v for vs in values.values() for v in vs]).sketch
        assert (got.zero, got.pos, got.neg) == (want.zero, want.pos, want.neg)
        assert want.zero == 2 and want.neg and want.pos
    finally:
        store.close()
