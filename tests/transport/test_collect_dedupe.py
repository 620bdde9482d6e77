"""The collector's dedupe by (host, epoch, seq) without a look at the table
for batches above the newest seq stored: exact after a restart, for replays
below it (stored or gaps), for a new epoch and within one group
(docs/transport.md, "Collector")."""

from __future__ import annotations

from pathlib import Path

from hushmon.transport.collect_store import CollectorStore
from hushmon.transport.fuzz import VALID_EPOCH, valid_batch
from hushmon.transport.wire import H_EPOCH, H_MSG_ID


def _in_epoch(host: str, seq: int, epoch: int) -> object:
    m = valid_batch(host, seq)
    assert m.headers is not None
    m.headers[H_EPOCH] = str(epoch)
    m.headers[H_MSG_ID] = f"{host}:{epoch}:{seq}"
    return m


def _stored(store: CollectorStore) -> list[tuple[str, int, int]]:
    rows = store.con.execute(
        "SELECT host, epoch, seq FROM transport_batches ORDER BY host, epoch, seq"
    ).fetchall()
    return [(h, int(e), int(s)) for h, e, s in rows]


def test_dedupe_holds_across_restarts_gaps_and_epochs(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    store = CollectorStore(db)
    try:
        # n1 seq 1, 2, 4, 5 (3 is late); n2 seq 1; twice in one group
        first = [valid_batch("n1", s) for s in (1, 2, 4, 5)] + [valid_batch("n2", 1)]
        assert len(store.write_raw([*first, valid_batch("n1", 4)])) == 5
        assert store.stats.duplicate_batches == 1
    finally:
        store.close()

    # a restart: the newest seqs come from the store (a shortcut starting
    # empty would take n1:5 and n2:1 for new)
    store = CollectorStore(db)
    try:
        again = [
            valid_batch("n1", 5),  # the newest stored: a duplicate
            valid_batch("n1", 1),  # below it, stored: a duplicate
            valid_batch("n1", 3),  # below it, a gap: stored now
            valid_batch("n1", 6),  # above it: new
            valid_batch("n2", 1),  # another host's newest: a duplicate
            _in_epoch("n1", 1, VALID_EPOCH + 1),  # the agent restarted: a new epoch, new
        ]
        stored = store.write_raw(again)  # type: ignore[arg-type]
        assert len(stored) == 3
        assert store.stats.duplicate_batches == 3
        # raised after each commit: the same group again is all duplicates (a
        # shortcut left at seq 5 would take n1:6 for new, and the store's key
        # would refuse it)
        assert store.write_raw(again) == []  # type: ignore[arg-type]
        assert store.stats.duplicate_batches == 9
        e = VALID_EPOCH
        assert _stored(store) == [
            *(("n1", e, s) for s in range(1, 7)),
            ("n1", e + 1, 1),
            ("n2", e, 1),
        ]
        dup_events = store.con.execute(
            "SELECT count(*) FROM transport_events WHERE kind = 'duplicate'"
        ).fetchall()
        assert dup_events == [(1 + 3 + 6,)]
    finally:
        store.close()
