"""The summaries from NATS into a :class:`~hushmon.live.state.LiveState`.

A core subscription to ``hm.sum.>`` for what comes, and at the start the
newest message of every subject (``hm.sum.job.<job>``, ``hm.sum.rack.<rack>``)
from the ``HM_SUM`` stream (an ephemeral ordered consumer, read to its end),
so a view shows the current picture at once instead of after the next
period. Nothing durable is created: nothing to clean up. A server without
the stream (only core NATS) is followed from now on.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from hushmon.errors import HushmonError
from hushmon.live.state import LiveState
from hushmon.transport.connect import reachable
from hushmon.transport.natsserver import SUM_STREAM

SUBJECTS = "hm.sum.>"
CONNECT_TIMEOUT_S = 2.0
CATCH_UP_IDLE_S = 1.0


async def connect(url: str) -> Any:
    """A connection that reconnects on its own; a server that is down at
    the start is one line (nats-py would retry with tracebacks)."""
    import nats

    why = reachable(url, CONNECT_TIMEOUT_S)
    if why:
        raise HushmonError(f"cannot reach the NATS server at {url}: {why}", exit_code=1)

    async def quiet(_exc: Exception) -> None:
        return None

    try:
        return await nats.connect(
            url,
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            error_cb=quiet,
        )
    except Exception as exc:  # nats-py raises several unrelated types here
        raise HushmonError(
            f"cannot connect to the NATS server at {url}: {exc}", exit_code=1
        ) from exc


async def subscribe(nc: Any, state: LiveState) -> bool:
    """Feeds ``state`` from now on: a core subscription for what comes, then
    the stream's newest message of every subject for what is there already
    (a message seen both ways is a duplicate to the state). False when the
    server has no ``HM_SUM`` stream to catch up from."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import DeliverPolicy
    from nats.js.errors import NotFoundError

    async def on_msg(msg: Any) -> None:
        state.add(msg.subject, msg.data, time.time_ns())

    await nc.subscribe(SUBJECTS, cb=on_msg)
    js = nc.jetstream()
    try:
        info = await js.stream_info(SUM_STREAM)
    except (NotFoundError, NoRespondersError, TimeoutError, NatsTimeout):
        return False  # core NATS only, or no stream: from now on
    if not info.state.messages:
        return True
    # An ordered consumer read to its end and dropped: a long-lived one
    # stalled here when the stream was empty at its start (nats-py 2.16).
    catch_up = await js.subscribe(
        SUBJECTS, ordered_consumer=True, deliver_policy=DeliverPolicy.LAST_PER_SUBJECT
    )
    try:
        while True:
            try:
                msg = await catch_up.next_msg(timeout=CATCH_UP_IDLE_S)
            except (TimeoutError, NatsTimeout):
                break
            state.add(msg.subject, msg.data, time.time_ns())
            if msg.metadata.num_pending == 0:
                break
    finally:
        await catch_up.unsubscribe()
    return True


async def settle(state: LiveState, quiet_s: float = 0.3, max_s: float = 3.0) -> None:
    """Waits until no message came for ``quiet_s`` (the stream's newest
    messages have arrived), at most ``max_s``."""
    deadline = time.monotonic() + max_s
    seen = -1
    while time.monotonic() < deadline:
        if state.messages == seen and seen > 0:
            return
        seen = state.messages
        await asyncio.sleep(quiet_s)
