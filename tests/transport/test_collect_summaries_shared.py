"""Several `hushmon collect --summaries-only` share collect-sum, work-queue
style, and the summaries stay exact: each message stored once across a
collector killed between its commit and its ack, and a reducer twin's
overlapping partial found however the two partials were split between the
collectors (each group's lookup and insert run under the lake's commit
lock, so the later transaction sees the earlier one's partial)."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import nats
from transport_batches import (
    publish,
    publish_raw_messages,
    rack_batches,
    rack_partial,
    store_rows,
)

from hushmon.store.schema import open_store_readonly
from hushmon.transport.collect_summaries import read_job_summaries
from hushmon.transport.lake_writer import FAULT_ENV, FAULT_EXIT_CODE
from hushmon.transport.natsserver import LocalNatsServer
from hushmon.transport.rawsummary import summaries_from_store

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
RACKS = {"r1": ("n1", "n2", "n3"), "r2": ("n4", "n5")}
PERIODS = 16
# periods where r1's reducer twin publishes its own partial of the same
# batches after the first one (a reducer that crashed between publishing
# and acking): the twin names 2 of r1's 3 batches
TWIN_PERIODS = (2, 5, 9, 13)
ACK_WAIT_S = 2.0


async def _set_ack_wait(url: str, seconds: float) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        config = (await js.consumer_info("HM_SUM", "collect-sum")).config
        config.ack_wait = seconds
        await js.add_consumer("HM_SUM", config)
    finally:
        await nc.close()


def _argv(url: str, lake: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--db", str(lake), *extra]


def _env(fault: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    if fault:
        env[FAULT_ENV] = fault
    return env


def test_two_summary_collectors_share_the_stream_exactly_once(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    url, lake = nats_server.url, tmp_path / "s.lake"
    raw = rack_batches(RACKS, PERIODS, T0, S)
    publish(url, [b for bs in raw.values() for b in bs])
    # the raw data first, so that a rebuild of an overlapped period is whole
    r = subprocess.run(
        _argv(url, lake, "--raw-only", "--once", "--json", "-"),
        capture_output=True, text=True, timeout=120, env=_env(), check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr

    partials = []
    for i in range(PERIODS):
        for rack in RACKS:
            bs = raw[(rack, i)]
            partials.append(
                (f"hm.sum.rack.{rack}", rack_partial(bs, rack, "j1", T0 + i * S),
                 {"Nats-Msg-Id": f"{rack}:j1:{i}"})
            )  # fmt: skip
            if rack == "r1" and i in TWIN_PERIODS:
                partials.append(
                    (f"hm.sum.rack.{rack}", rack_partial(bs[:2], rack, "j1", T0 + i * S),
                     {"Nats-Msg-Id": f"{rack}-twin:j1:{i}"})
                )  # fmt: skip
    publish_raw_messages(url, partials)
    asyncio.run(_set_ack_wait(url, ACK_WAIT_S))

    # dies right after committing its 2nd group of summaries, before acking it
    a = subprocess.run(
        _argv(url, lake, "--summaries-only", "--fetch-batch", "2"),
        capture_output=True, text=True, timeout=120,
        env=_env("exit-after-commit:2"), check=False,
    )  # fmt: skip
    assert a.returncode == FAULT_EXIT_CODE, a.stderr
    assert store_rows(lake, "SELECT count(*) FROM summary_messages") == [(4,)]

    # two collectors share collect-sum until it is drained (their --once
    # waits for the dead one's messages to come back after AckWait)
    procs = [
        subprocess.Popen(
            _argv(url, lake, "--summaries-only", "--fetch-batch", "1", "--once", "--json", "-"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for _ in range(2)
    ]
    reports = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        reports.append(json.loads(out))
    print("stored per collector:", [r["summaries_stored"] for r in reports])

    n = len(partials)
    # every message once, by id; the dead collector's committed group was
    # found stored when it came back (duplicates), not stored again
    assert store_rows(lake, "SELECT count(*), count(DISTINCT msg_id) FROM summary_messages") == [
        (n, n)
    ]
    assert sum(r["summaries_stored"] for r in reports) == n - 4
    assert sum(r["summary_duplicates"] for r in reports) == 2
    # each twin found overlapping exactly once, whichever collector stored
    # which partial, and only its period rebuilt
    assert sum(r["summary_overlaps"] for r in reports) == len(TWIN_PERIODS)
    rebuilt = store_rows(lake, "SELECT DISTINCT time_ns FROM summary_rebuilt ORDER BY 1")
    assert [int(t) for (t,) in rebuilt] == [T0 + i * S for i in TWIN_PERIODS]
    # the summaries, merged when read, are the raw truth in every period
    con = open_store_readonly(lake)
    try:
        for i in range(PERIODS):
            stored = read_job_summaries(con, "j1", T0 + i * S)
            truth = summaries_from_store(con, "j1", T0 + i * S)
            assert set(stored) == set(truth) and len(truth) == 3, i
            for key, s in truth.items():
                assert stored[key].count == s.count == 5, (i, key)
                assert math.isclose(stored[key].sum, s.sum), (i, key)
    finally:
        con.close()
