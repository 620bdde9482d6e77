"""The lake writer opens its connection again every few commits (DuckLake's
per-connection stats cache grows with every data file a transaction sees:
lake_writer.py's module doc); what a collector decides from the store
(a summary stored before, an overlapping partial, a raw batch stored
before) must hold across the reopen."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from transport_batches import partial_message, raw_message, synthetic_batch

from hushmon.transport import lake_writer
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_summaries import read_job_summaries

T0 = 1_795_000_000_000_000_000
HOSTS = {"n1": "r1", "n2": "r1", "n3": "r2"}


def test_decisions_from_the_store_hold_across_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lake_writer, "REOPEN_EVERY_COMMITS", 2)
    store = LakeCollectorStore(tmp_path / "s.lake")
    try:
        batches = [
            synthetic_batch(h, i + 1, T0 + i * 10**9, rack=r, value=float(i))
            for i in range(3)
            for h, r in HOSTS.items()
        ]
        for i in range(3):  # a commit per period: reopened after the second
            store.write_raw([raw_message(b, n) for n, b in enumerate(batches) if b.seq == i + 1])
        first_con = store.writer.con
        assert store.writer.reopens == 1
        of = {r: [b for b in batches if b.rack == r and b.seq == 1] for r in ("r1", "r2")}
        store.write_summaries([partial_message(of[r], r, T0, f"{r}:0") for r in ("r1", "r2")])
        store.write_summaries([partial_message(of["r1"], "r1", T0, "r1:0")])  # the same id
        store.write_summaries([partial_message(of["r1"], "r1", T0, "r1:0:twin")])  # overlaps
        store.write_raw([raw_message(batches[0], 99)])  # stored before a reopen
        st = store.stats
        assert store.writer.con is not first_con
        assert (st.summaries_stored, st.summary_duplicates) == (3, 1)
        assert (st.summary_overlaps, st.summaries_rebuilt) == (1, 1)
        assert (st.batches_stored, st.duplicate_batches) == (len(batches), 1)
        # the rebuilt period holds each of the 3 nodes once (not 5)
        summaries = read_job_summaries(store.writer.con, "j1", T0)
        assert summaries and {s.count for s in summaries.values()} == {3}
        with pytest.raises(duckdb.ConnectionException):
            first_con.execute("SELECT 1")  # the old connection was closed
    finally:
        store.close()
