"""The nats-server helper: a server starts, the streams exist with the
contract's settings, and JetStream drops a batch published twice."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import nats
import pytest

from hushmon.errors import HushmonError
from hushmon.transport.natsserver import (
    DUPLICATE_WINDOW_S,
    RAW_MAX_AGE_S,
    RAW_MAX_BYTES,
    RAW_STREAM,
    SUM_MAX_AGE_S,
    SUM_STREAM,
    LocalNatsServer,
    StreamLimits,
    ensure_streams,
)


def test_streams_follow_the_contract_and_drop_duplicates(nats_server: LocalNatsServer) -> None:
    async def check() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        raw = await js.stream_info(RAW_STREAM)
        assert raw.config.subjects == ["hm.raw.>"]
        assert raw.config.duplicate_window == DUPLICATE_WINDOW_S
        # bounded: a buffer in front of the store, not a second store
        assert raw.config.max_age == RAW_MAX_AGE_S and raw.config.max_bytes == RAW_MAX_BYTES
        assert (await js.stream_info(SUM_STREAM)).config.max_age == SUM_MAX_AGE_S
        assert (await js.stream_info(SUM_STREAM)).config.subjects == ["hm.sum.>"]
        headers = {"Nats-Msg-Id": "n1:1:1"}
        first = await js.publish("hm.raw.r1.n1", b"cpu,host=n1 x=1 1\n", headers=headers)
        again = await js.publish("hm.raw.r1.n1", b"cpu,host=n1 x=1 1\n", headers=headers)
        assert not first.duplicate and again.duplicate and again.seq == first.seq
        await nc.close()

    asyncio.run(check())
    ensure_streams(nats_server.url)  # declaring again keeps the stream and its data
    asyncio.run(_expect_messages(nats_server.url, 1))


async def _expect_messages(url: str, count: int) -> None:
    nc = await nats.connect(url)
    assert (await nc.jetstream().stream_info(RAW_STREAM)).state.messages == count
    await nc.close()


def test_limits_are_updated_in_place_and_checked(nats_server: LocalNatsServer) -> None:
    ensure_streams(nats_server.url, limits=StreamLimits(raw_max_age_s=3600, raw_max_bytes=1 << 30))

    async def raw_limits() -> tuple[float, int]:
        nc = await nats.connect(nats_server.url)
        cfg = (await nc.jetstream().stream_info(RAW_STREAM)).config
        await nc.close()
        return float(cfg.max_age or 0), int(cfg.max_bytes or 0)

    assert asyncio.run(raw_limits()) == (3600.0, 1 << 30)
    # shorter than the duplicate window would let a late replay in twice
    with pytest.raises(HushmonError, match="duplicate window"):
        ensure_streams(nats_server.url, limits=StreamLimits(raw_max_age_s=60))
    assert asyncio.run(raw_limits()) == (3600.0, 1 << 30)
    # a window shorter than the agents' 5 s resends would let a resent copy in
    with pytest.raises(HushmonError, match="duplicate window 5 s"):
        ensure_streams(nats_server.url, limits=StreamLimits(duplicate_window_s=5))
    # one past half the store's closing of summaries would let a replay in
    # after the period's last rebuild from raw data
    with pytest.raises(HushmonError, match=r"use 10 \.\. 1800"):
        ensure_streams(
            nats_server.url,
            limits=StreamLimits(duplicate_window_s=1801, raw_max_age_s=7200, sum_max_age_s=7200),
        )


def test_a_site_sets_the_duplicate_window_that_sizes_the_hub(nats_server: LocalNatsServer) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hushmon.transport.deploy", "streams", nats_server.url,
         "--replicas", "1", "--racks", "r1", "--dup-window-s", "300"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr

    async def windows() -> tuple[float, float]:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        raw = (await js.stream_info(RAW_STREAM)).config.duplicate_window
        summ = (await js.stream_info(SUM_STREAM)).config.duplicate_window
        await nc.close()
        return float(raw or 0), float(summ or 0)

    assert asyncio.run(windows()) == (300.0, 300.0)


def test_deploy_streams_rejects_a_bad_limit_in_one_line(nats_server: LocalNatsServer) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "hushmon.transport.deploy",
            "streams",
            nats_server.url,
            "--replicas",
            "1",
            "--raw-max-gib",
            "0.01",
            "--racks",
            "r1",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "max bytes" in r.stderr and "Traceback" not in r.stderr


def deploy_streams(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "hushmon.transport.deploy", "streams", url, "--replicas", "1"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, check=False)


def test_deploy_streams_declares_every_consumer(nats_server: LocalNatsServer) -> None:
    """The admin step makes the collector's, the top reducer's and each
    rack's consumer, with the reducers' AckWait given; a rack name that is
    no subject token (or would be the top reducer's) is one line."""
    r = deploy_streams(nats_server.url, "--racks", "r1,r7", "--reduce-ack-wait-s", "90")
    assert r.returncode == 0, r.stderr

    async def consumers() -> dict[str, float]:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        out = {}
        for stream in ("HM_RAW", "HM_SUM"):
            for c in await js.consumers_info(stream):
                out[f"{stream}/{c.name}"] = float(c.config.ack_wait or 0)
        await nc.close()
        return out

    got = asyncio.run(consumers())
    assert got["HM_RAW/reduce-r7"] == 90 and got["HM_SUM/reduce-top"] == 90, got
    assert {"HM_RAW/collect-raw", "HM_SUM/collect-sum", "HM_RAW/reduce-r1"} <= set(got)
    for bad in ("a.b", "top"):
        r = deploy_streams(nats_server.url, "--racks", bad)
        assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
        assert f"rack name '{bad}'" in r.stderr and "Traceback" not in r.stderr
