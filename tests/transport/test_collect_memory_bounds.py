"""What keeps a long-running collector's memory from growing
(docs/transport.md, "Memory over time"): every store call runs on one
thread of its own (asyncio's default pool spreads successive calls over
several threads, each with a glibc arena and an Arrow heap that keep their
high-water mark), and the lake connection's buffer manager has a bound,
kept across the writer's reopens."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from transport_batches import partial_message, publish, publish_raw_messages, rack_partial
from transport_batches import synthetic_batch as batch

from hushmon.transport import lake_writer
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collector import CollectOptions, collect_async
from hushmon.transport.natsserver import LocalNatsServer

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
PERIODS = 6


# per raw path, the store's calls it makes (the C path reads the newest
# seqs once, then stores the groups its C source parsed)
STORE_CALLS = {
    "python": (("__init__", "write_raw", "write_summaries", "close"), ()),
    "c": (("__init__", "write_group", "write_summaries", "close"), ("newest_seqs",)),
}


@pytest.mark.parametrize("engine", sorted(STORE_CALLS))
def test_every_store_call_runs_on_the_one_store_thread(
    nats_server: LocalNatsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    url = nats_server.url
    threads: list[str] = []
    store_calls, writer_calls = STORE_CALLS[engine]
    for owner, names in (
        (LakeCollectorStore, store_calls),
        (lake_writer.LakeWriter, writer_calls),
    ):
        for name in names:
            real = getattr(owner, name)

            def noted(self: Any, *args: Any, _real: Any = real, _name: str = name) -> Any:
                threads.append(f"{_name}@{threading.current_thread().name}")
                return _real(self, *args)

            monkeypatch.setattr(owner, name, noted)
    stored = 0
    for i in range(PERIODS):  # a group per period: several calls of each kind
        raw = [batch(h, i + 1, T0 + i * S, rack="r1", value=i) for h in ("n1", "n2")]
        publish(url, raw)
        msg = ("hm.sum.rack.r1", rack_partial(raw, "r1", "j1", T0 + i * S), {"Nats-Msg-Id": f"{i}"})
        publish_raw_messages(url, [msg])
        opts = CollectOptions(url=url, db=tmp_path / "s.lake", once=True, engine=engine)
        report = asyncio.run(collect_async(opts, asyncio.Event()))
        stored += report.stats.summaries_stored
    assert stored == PERIODS
    assert len(threads) >= 4 * PERIODS, threads
    assert {t.split("@")[1] for t in threads} == {"hm-store_0"}, threads
    # every kind of call was made (and so checked)
    assert {t.split("@")[0] for t in threads} == {*store_calls, *writer_calls}, threads


def test_the_lake_connection_has_a_memory_limit_across_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lake_writer, "REOPEN_EVERY_COMMITS", 2)
    store = LakeCollectorStore(tmp_path / "s.lake")
    try:

        def limit() -> str:
            row = store.writer.con.execute("SELECT current_setting('memory_limit')").fetchone()
            return "" if row is None else str(row[0])

        bound = f"{lake_writer.LAKE_MEMORY_MIB:.1f} MiB"  # DuckDB's own default: 80 % of RAM
        assert limit() == bound
        for i in range(3):
            raw = [batch("n1", i + 1, T0 + i * S, rack="r1", value=i)]
            store.write_summaries([partial_message(raw, "r1", T0 + i * S, f"r1:{i}")])
        assert store.writer.reopens == 1
        assert limit() == bound
    finally:
        store.close()
