"""hushmon transport status: a gap, a replay, a duplicate and agent drops
are shown per node, in the table and in --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transport_batches import Batch, hushmon, publish, synthetic_batch

from hushmon.transport.natsserver import LocalNatsServer

T0 = 1_795_000_000_000_000_000


@pytest.mark.parametrize("store", ["c.lake", "c.duckdb"])
def test_status_shows_gap_replay_duplicate_and_drops(
    nats_server: LocalNatsServer, tmp_path: Path, store: str
) -> None:
    db = tmp_path / store
    n1 = [synthetic_batch("n1", s, T0 + s * 10**9) for s in (1, 2, 4, 5, 6, 9)]
    for b in n1:
        if b.seq >= 4:
            b.replay = True  # sent from the spool after a disconnection
    n1[-1].dropped = 2  # the agent dropped seq 7 and 8 at its spool bound
    n2 = [synthetic_batch("n2", s, T0 + s * 10**9) for s in (1, 2, 3)]
    dup = Batch("n2", "r1", n2[1].epoch, 2, n2[1].data, msg_id="late-replay")
    publish(nats_server.url, [*n1, *n2, dup])
    r = hushmon("collect", "--url", nats_server.url, "--db", str(db), "--once")
    assert r.returncode == 0, r.stderr
    r = hushmon("transport", "status", "--url", nats_server.url, "--db", str(db), "--json", "-")
    assert r.returncode == 0, r.stderr
    status = json.loads(r.stdout)
    nodes = {n["host"]: n for n in status["nodes"]}
    a, b = nodes["n1"], nodes["n2"]
    assert (a["batches"], a["replayed"], a["dropped_by_agent"], a["missing"]) == (6, 4, 2, 3)
    assert [(g["first"], g["last"]) for g in a["gaps"]] == [(3, 3), (7, 8)]
    assert (b["batches"], b["duplicates_store"], b["missing"]) == (3, 1, 0)
    assert a["lag_s"] > 0 and a["age_s"] >= 0
    assert status["server"]["consumers"]["collect-raw"]["pending"] == 0
    # the table for people went to stderr
    table = r.stderr.splitlines()
    row = next(line.split() for line in table if line.startswith("n1 "))
    assert row[5:10] == ["6", "4", "2", "3", "3,7-8"]  # batches replayed dropped missing gaps
