"""The nats-server helper: a server starts, the streams exist with the
contract's settings, and JetStream drops a batch published twice."""

from __future__ import annotations

import asyncio

import nats

from hushmon.transport.natsserver import (
    DUPLICATE_WINDOW_S,
    RAW_STREAM,
    SUM_STREAM,
    LocalNatsServer,
    ensure_streams,
)


def test_streams_follow_the_contract_and_drop_duplicates(nats_server: LocalNatsServer) -> None:
    async def check() -> None:
        nc = await nats.connect(nats_server.url)
        js = nc.jetstream()
        raw = await js.stream_info(RAW_STREAM)
        assert raw.config.subjects == ["hm.raw.>"]
        assert raw.config.duplicate_window == DUPLICATE_WINDOW_S
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
