"""hushmon collect --summaries-only: a collector that takes the reducers'
summaries (collect-sum) and leaves every raw batch on HM_RAW for the
--raw-only collectors of the same lake; the two together store what one
collector taking both would."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import nats
import pytest
from transport_batches import (
    hushmon,
    publish,
    publish_raw_messages,
    rack_batches,
    rack_partial,
    store_rows,
)

from hushmon.cli import main
from hushmon.store.schema import open_store_readonly
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.natsserver import LocalNatsServer
from hushmon.transport.rawsummary import summaries_from_store

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
RACKS = {"r1": ("n1", "n2"), "r2": ("n3",)}
PERIODS = 3


async def _pending(url: str, stream: str, durable: str) -> int:
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info(stream, durable)
        return int(info.num_pending) + int(info.num_ack_pending)
    finally:
        await nc.close()


def _collect(url: str, lake: Path, *extra: str) -> dict[str, int]:
    r = hushmon("collect", "--url", url, "--db", str(lake), "--once", "--json", "-", *extra)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_summaries_only_leaves_the_raw_batches_to_a_raw_only_collector(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    url, lake = nats_server.url, tmp_path / "s.lake"
    raw = rack_batches(RACKS, PERIODS, T0, S)
    publish(url, [b for bs in raw.values() for b in bs])
    partials = [
        (f"hm.sum.rack.{rack}", rack_partial(bs, rack, "j1", T0 + i * S),
         {"Nats-Msg-Id": f"{rack}:j1:{i}"})
        for (rack, i), bs in raw.items()
    ]  # fmt: skip
    publish_raw_messages(url, partials)
    n_raw = sum(len(bs) for bs in raw.values())

    got = _collect(url, lake, "--summaries-only")
    assert (got["summaries_stored"], got["batches_stored"]) == (len(partials), 0)
    assert asyncio.run(_pending(url, "HM_RAW", "collect-raw")) == n_raw
    assert asyncio.run(_pending(url, "HM_SUM", "collect-sum")) == 0
    assert store_rows(lake, "SELECT count(*) FROM transport_batches") == [(0,)]

    got = _collect(url, lake, "--raw-only")
    assert (got["summaries_stored"], got["batches_stored"]) == (0, n_raw)
    assert asyncio.run(_pending(url, "HM_RAW", "collect-raw")) == 0
    # the partials, merged when read, agree with the raw batches stored apart
    con = open_store_readonly(lake)
    try:
        for i in range(PERIODS):
            stored = read_job_summaries(con, "j1", T0 + i * S)
            truth = summaries_from_store(con, "j1", T0 + i * S)
            assert set(stored) == set(truth) and len(truth) == 3
            for key, s in truth.items():
                assert stored[key].count == s.count == len(RACKS["r1"]) + len(RACKS["r2"])
                assert math.isclose(stored[key].sum, s.sum)
    finally:
        con.close()


def test_summaries_only_refuses_what_it_would_not_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "nats://127.0.0.1:1"  # never reached: the options are refused first
    for extra, why in (
        (("--raw-only",), "exclude each other"),
        (("--engine", "c"), "raw path's"),
        (("--db", str(tmp_path / "x.duckdb")), "writes a lake"),
    ):
        db = () if "--db" in extra else ("--db", str(tmp_path / "x.lake"))
        code = main(["collect", "--url", url, *db, "--summaries-only", *extra])
        err = capsys.readouterr().err
        assert code != 0 and why in err and len(err.strip().splitlines()) == 1, err
