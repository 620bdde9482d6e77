"""A summary message's sources as stored hashes (source_hashes.py): the hash
never changes (stored lakes compare against it), a name's hash does not
depend on the names beside it, and a partial stored before schema 4 (its
sources as a list of structs) is still found when a twin overlaps it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from transport_batches import EPOCH, rack_partial, synthetic_batch

from hushmon.transport.collect_store import CollectorStore, Message
from hushmon.transport.source_hashes import overlap, source_hashes

T0 = 1_795_000_000_000_000_000


def test_the_hash_is_fixed_and_independent_of_the_other_names() -> None:
    # stored in every lake since schema 4: a change here breaks the overlap
    # check against what is stored (the value is this module's own hash)
    assert source_hashes(["n1"], [1], [5]).tolist() == [759045558517484464]
    short = source_hashes(["ab"], [1], [2])
    mixed = source_hashes(["ab", "a-much-longer-host-name_17", "ab"], [1, 1, 1], [2, 2, 2])
    assert len(mixed) == 2 and overlap(short, mixed) == 1  # sorted, unique
    # epoch and seq count: the same host's next batch is another source
    assert overlap(short, source_hashes(["ab", "ab"], [2, 1], [2, 3])) == 0
    hosts = [f"node{i:05d}" for i in range(1750)]
    every = source_hashes(hosts, [1] * 1750, [9] * 1750)
    assert len(every) == 1750 and np.all(np.diff(every.astype(np.float64)) >= 0)
    assert overlap(source_hashes(hosts[1000:1010], [1] * 10, [9] * 10), every) == 10


def test_a_partial_stored_as_a_source_list_still_overlaps(tmp_path: Path) -> None:
    store = CollectorStore(tmp_path / "s.duckdb")
    try:
        batches = [synthetic_batch(h, 1, T0, value=k) for k, h in enumerate(("n1", "n2"))]
        payload = rack_partial(batches, "r1", "j1", T0)
        store.write_summaries([Message("hm.sum.rack.r1", {"Nats-Msg-Id": "a"}, payload, 1)])
        # what a collector before schema 4 stored: the list, no hashes
        store.con.execute(
            """UPDATE summary_messages SET source_hashes = NULL,
               source_list = [{'host': 'n1', 'epoch': $e, 'seq': 1},
                              {'host': 'n2', 'epoch': $e, 'seq': 1}]""",
            {"e": EPOCH},
        )
        twin = rack_partial(batches[1:], "r1", "j1", T0)
        store.write_summaries([Message("hm.sum.rack.r1", {"Nats-Msg-Id": "b"}, twin, 2)])
        st = store.stats
        assert (st.summaries_stored, st.summary_overlaps, st.summaries_rebuilt) == (2, 1, 1)
        rows = store.con.execute(
            "SELECT msg_id, overlapped, octet_length(source_hashes) FROM summary_messages "
            "ORDER BY msg_id"
        ).fetchall()
        assert rows == [("a", False, None), ("b", True, 8)]
    finally:
        store.close()
