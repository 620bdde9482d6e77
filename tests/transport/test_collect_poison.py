"""The collector survives any message: poison is validated, counted with its
sender, acknowledged, and never holds back the valid messages fetched with
it (issue 19; docs/security.md, "The collector and the wire")."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from transport_batches import hushmon, publish, publish_raw_messages, store_rows, synthetic_batch

from hushmon.errors import HushmonError
from hushmon.transport.collect_store import CollectorStore
from hushmon.transport.fuzz import fuzz_collector, valid_batch, valid_summary
from hushmon.transport.natsserver import LocalNatsServer
from hushmon.transport.summary import Summary
from hushmon.transport.wire import batch_headers

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000


def _summary(**change: object) -> bytes:
    payload: dict[str, object] = {
        "v": 1,
        "level": "rack",
        "rack": "r1",
        "job": "j1",
        "time_ns": T0,
        "sources": [["n1", 1, 1]],
        "sensors": {"mem used_pct": Summary.of([1.0]).to_json()},
    }
    payload.update(change)
    return json.dumps(payload).encode()


@pytest.mark.parametrize("store", ["c.lake", "c.duckdb"])
def test_poison_is_acked_counted_by_sender_and_the_rest_stored(
    nats_server: LocalNatsServer, tmp_path: Path, store: str
) -> None:
    db = tmp_path / store
    good = [synthetic_batch("n1", i, T0 + i * S) for i in (1, 2, 3)]
    # The messages of issue 19 that stopped hushmon collect for good.
    line = b"mem,host=n2 used_pct=1 1\n"
    poison = [
        ("hm.raw.r1.n2", line, batch_headers("n2", 1, 2**64, 1)),
        ("hm.raw.r1.n2", line, batch_headers("n2", 10**30, 1, 1)),
        ("hm.raw.r1.n2", line, batch_headers("n2", 1, 2, 1, dropped=2**63)),
        ("hm.raw.r1.n2", line, {**batch_headers("n2", 1, 3, 1), "Hm-Seq": "\u0663"}),
        (
            "hm.raw.r1.n2",
            b"mem,host=n2 used_pct=1 99999999999999999999999\n",
            batch_headers("n2", 1, 4, 1),
        ),
        ("hm.sum.rack.r1", _summary(sources="n1"), {"Nats-Msg-Id": "p1"}),
        ("hm.sum.rack.r1", _summary(time_ns=10**30), {"Nats-Msg-Id": "p2"}),
        ("hm.sum.rack.r1", b"[" * 100_000 + b"]" * 100_000, {"Nats-Msg-Id": "p3"}),
    ]
    publish_raw_messages(nats_server.url, poison[:3])
    publish(nats_server.url, good[:2])
    publish_raw_messages(nats_server.url, poison[3:])
    publish(nats_server.url, good[2:])

    first = hushmon("collect", "--url", nats_server.url, "--db", str(db), "--once", "--json", "-")
    assert first.returncode == 0, first.stderr
    assert "Traceback" not in first.stderr
    report = json.loads(first.stdout)
    # the batch whose one line has a bad timestamp is recorded (its seq is
    # not missing), the line counted as malformed
    assert report["batches_stored"] == 4
    assert report["rejected_batches"] == 4
    assert report["malformed_lines"] == 1
    assert report["rejected_summaries"] == 3
    assert store_rows(db, "SELECT count(*) FROM transport_batches WHERE host = 'n1'") == [(3,)]

    # acked: a second collector finds nothing left, and stores nothing twice
    again = hushmon("collect", "--url", nats_server.url, "--db", str(db), "--once", "--json", "-")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["raw_messages"] == 0
    assert json.loads(again.stdout)["summary_messages"] == 0

    st = hushmon("transport", "status", "--db", str(db), "--json", "-")
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    n2 = {n["host"]: n for n in status["nodes"]}["n2"]
    assert n2["rejected"] == 4 and n2["malformed_lines"] == 1
    assert any("Hm-Seq" in r and "2^63" in r for r in n2["reasons"])
    senders = status["summaries"]["rejected_by_sender"]
    assert senders[0]["subject"] == "hm.sum.rack.r1" and senders[0]["rejected"] == 3


class _BrokenOnMarker(CollectorStore):
    """A store whose raw path fails on one batch the way an unknown bug
    would (checks passed, storing raised)."""

    def _drop_liars(self, fresh, events):  # type: ignore[no-untyped-def]
        if any(b"POISON" in a.file.data for a in fresh):
            raise ValueError("a bug triggered by this message")
        return super()._drop_liars(fresh, events)


def test_a_message_that_breaks_the_group_is_set_aside_alone(tmp_path: Path) -> None:
    store = _BrokenOnMarker(tmp_path / "c.duckdb")
    try:
        batches = [valid_batch(f"n{i}", 1) for i in range(5)]
        batches[2].data += b"mem,host=n2,x=POISON used_pct=1 1\n"
        stored = store.write_raw(batches)
        assert len(stored) == 4
        assert store.stats.batches_stored == 4 and store.stats.rejected_batches == 1
        rows = store.con.execute(
            "SELECT host, reason FROM transport_events WHERE kind = 'rejected'"
        ).fetchall()
        assert len(rows) == 1 and rows[0][0] == "n2"
        assert "ValueError: a bug triggered by this message" in rows[0][1]
        hosts = store.con.execute("SELECT host FROM transport_batches ORDER BY host").fetchall()
        assert [h for (h,) in hosts] == ["n0", "n1", "n3", "n4"]
    finally:
        store.close()


class _DiskFull(CollectorStore):
    def _ingest(self, fresh, events):  # type: ignore[no-untyped-def]
        raise duckdb.IOException("could not write: No space left on device")


def test_a_failing_store_stops_the_call_and_sets_nothing_aside(tmp_path: Path) -> None:
    store = _DiskFull(tmp_path / "c.duckdb")
    try:
        with pytest.raises(HushmonError, match="No space left"):
            store.write_raw([valid_batch("n1", 1), valid_batch("n2", 1)])
        assert store.stats.rejected_batches == 0
        assert store.con.execute("SELECT count(*) FROM transport_events").fetchall() == [(0,)]
    finally:
        store.close()


def test_summary_poison_is_set_aside_and_the_group_stored(tmp_path: Path) -> None:
    store = CollectorStore(tmp_path / "c.duckdb")
    try:
        sums = [valid_summary("r1", "j1", seq, [f"n{seq}"]) for seq in (1, 2, 3)]
        sums[1].data = _summary(sources=[["n1", 2**64, 1]])
        store.write_summaries(sums)
        assert store.stats.summaries_stored == 2 and store.stats.rejected_summaries == 1
        senders = store.con.execute(
            "SELECT host, reason FROM transport_events WHERE kind = 'summary_rejected'"
        ).fetchall()
        assert senders == [("r1", "source epoch=18446744073709551616 outside [0, 2^63-1]")]
    finally:
        store.close()


def test_fuzz_short(tmp_path: Path) -> None:
    """bench/bench_collect_fuzz.py's run, short: no exception escapes the
    collector's write calls and every valid batch is stored whole."""
    report = fuzz_collector(tmp_path / "f.duckdb", 3000, seed=19)
    assert report.escaped == []
    assert report.valid_batches > 100 and report.valid_batches_stored == report.valid_batches
    assert report.valid_lines_stored == report.valid_lines_expected
    # the mutations reached every kind of refusal
    assert report.rejected_batches > 500 and report.rejected_summaries > 500
    assert report.malformed_lines > 0
