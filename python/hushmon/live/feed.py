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
from datetime import UTC, datetime
from typing import Any

from hushmon.errors import HushmonError
from hushmon.live.state import LiveState
from hushmon.transport.connect import reachable
from hushmon.transport.natsserver import SUM_STREAM
from hushmon.transport.natsusers import connect_logged_in

SUBJECTS = "hm.sum.>"
JOB_SUBJECTS = "hm.sum.job.>"
CONNECT_TIMEOUT_S = 2.0
CATCH_UP_IDLE_S = 1.0


async def connect(url: str) -> Any:
    """A connection that reconnects on its own; a server that is down at
    the start is one line (nats-py would retry with tracebacks). ``url``
    may list several servers of one cluster, comma-separated (as `hushmon
    ctl --url` and `hushmon testbed status` give the bed's hub): one that
    answers is enough."""

    servers = [u.strip() for u in url.split(",") if u.strip()]
    why = ""
    for server in servers:
        why = reachable(server, CONNECT_TIMEOUT_S)
        if not why:
            break
    if why or not servers:
        raise HushmonError(f"cannot reach the NATS server at {url}: {why or 'no URL'}", exit_code=1)

    async def quiet(_exc: Exception) -> None:
        return None

    try:
        return await connect_logged_in(
            servers,
            quiet,
            connect_timeout=CONNECT_TIMEOUT_S,
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
        )
    except HushmonError:
        raise
    except Exception as exc:  # nats-py raises several unrelated types here
        raise HushmonError(
            f"cannot connect to the NATS server at {url}: {exc}", exit_code=1
        ) from exc


async def _read_to_end(js: Any, state: LiveState, subjects: str, **config: Any) -> None:
    """An ephemeral ordered consumer read until nothing is pending, then dropped."""
    from nats.errors import TimeoutError as NatsTimeout

    sub = await js.subscribe(subjects, ordered_consumer=True, **config)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=CATCH_UP_IDLE_S)
            except (TimeoutError, NatsTimeout):
                break
            state.add(msg.subject, msg.data, time.time_ns())
            if msg.metadata.num_pending == 0:
                break
    finally:
        await sub.unsubscribe()


async def subscribe(nc: Any, state: LiveState, history_s: float = 0.0) -> bool:
    """Feeds ``state``: with ``history_s``, first the job summaries of that
    many seconds back from ``HM_SUM`` in order (the page's plots start
    filled); then a core subscription for what comes; then the stream's
    newest message of every subject for what is there already (one seen
    twice is a duplicate to the state). False when the server has no
    ``HM_SUM`` stream to read from."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import ConsumerConfig, DeliverPolicy
    from nats.js.errors import NotFoundError

    async def on_msg(msg: Any) -> None:
        state.add(msg.subject, msg.data, time.time_ns())

    js = nc.jetstream()
    try:
        info = await js.stream_info(SUM_STREAM)
    except (NotFoundError, NoRespondersError, TimeoutError, NatsTimeout):
        await nc.subscribe(SUBJECTS, cb=on_msg)
        return False  # core NATS only, or no stream: from now on
    if info.state.messages and history_s > 0:
        since = datetime.fromtimestamp(time.time() - history_s, UTC)
        config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)
        await _read_to_end(js, state, JOB_SUBJECTS, config=config)
    await nc.subscribe(SUBJECTS, cb=on_msg)
    if info.state.messages:
        # read to the end and dropped: the core subscription carries the flow
        await _read_to_end(js, state, SUBJECTS, deliver_policy=DeliverPolicy.LAST_PER_SUBJECT)
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
