"""The summaries from NATS into a :class:`~hushmon.live.state.LiveState`.

A core subscription to ``hm.sum.>`` for what comes, and at the start the
newest message of every subject (``hm.sum.job.<job>``, ``hm.sum.rack.<rack>``)
from the ``HM_SUM`` stream, so a view shows the current picture at once
instead of after the next period. The stream is read by direct get
(``$JS.API.DIRECT.GET.HM_SUM``, the stream's ``allow_direct``): a viewer
creates no consumer (its login may not: a consumer's creator chooses where
it delivers, docs/security.md). A server without the stream (only core
NATS) is followed from now on.
"""

from __future__ import annotations

import asyncio
import json
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


# Direct gets in flight at once (each a request and its answer).
DIRECT_GETS_IN_FLIGHT = 64
_HDR_SUBJECT, _HDR_SEQ, _HDR_TIME = "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp"


async def _direct_get(nc: Any, request: dict[str, Any]) -> Any | None:
    """One message of HM_SUM by direct get, or None when there is none
    (404: no such message, or none at or after the sequence asked)."""
    reply = await nc.request(
        f"$JS.API.DIRECT.GET.{SUM_STREAM}", json.dumps(request).encode(), timeout=CONNECT_TIMEOUT_S
    )
    headers = reply.headers or {}
    if _HDR_SUBJECT not in headers or _HDR_SEQ not in headers:
        return None  # a status reply: 404 (none), 408 (gone meanwhile)
    return reply


def _stamp_ns(msg: Any) -> int:
    """The time the stream stored msg (RFC 3339 with nanoseconds, UTC)."""
    text = str(msg.headers.get(_HDR_TIME, ""))
    head, _, frac = text.rstrip("Z").partition(".")
    try:
        whole = datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return 0
    return int(whole.timestamp()) * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


async def _first_seq_since(nc: Any, first: int, last: int, since_ns: int) -> int:
    """The first sequence stored at or after since_ns (last + 1: none), by
    bisection over sequences (the stream's times only grow)."""
    lo, hi = first, last + 1
    while lo < hi:
        mid = (lo + hi) // 2
        msg = await _direct_get(nc, {"seq": mid, "next_by_subj": SUBJECTS})
        if msg is None:
            hi = mid
            continue
        seq = int(msg.headers[_HDR_SEQ])
        if _stamp_ns(msg) >= since_ns:
            hi = mid
        else:
            lo = seq + 1
    return lo


async def _read_subject(nc: Any, state: LiveState, subject: str, start: int, last: int) -> None:
    """subject's messages from sequence start to last, in order."""
    seq = start
    while seq <= last:
        msg = await _direct_get(nc, {"seq": seq, "next_by_subj": subject})
        if msg is None:
            return
        state.add(subject, msg.data, time.time_ns())
        seq = int(msg.headers[_HDR_SEQ]) + 1


async def _in_flight(jobs: list[Any]) -> None:
    """Awaits the coroutines, DIRECT_GETS_IN_FLIGHT at a time."""
    gate = asyncio.Semaphore(DIRECT_GETS_IN_FLIGHT)

    async def one(job: Any) -> None:
        async with gate:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


async def _read_newest(nc: Any, state: LiveState, subjects: list[str]) -> None:
    """The stream's newest message of each subject."""

    async def newest(subject: str) -> None:
        msg = await _direct_get(nc, {"last_by_subj": subject})
        if msg is not None:
            state.add(subject, msg.data, time.time_ns())

    await _in_flight([newest(s) for s in subjects])


async def subscribe(
    nc: Any, state: LiveState, history_s: float = 0.0, subjects_filter: str = SUBJECTS
) -> bool:
    """Feeds ``state``: with ``history_s``, first the job summaries of that
    many seconds back from ``HM_SUM`` in order, each job's own (the page's
    plots start filled); then a core subscription for what comes; then the
    stream's newest message of every subject for what is there already (one
    seen twice is a duplicate to the state). False when the server has no
    ``HM_SUM`` stream to read from. ``subjects_filter``: ``hm.sum.job.>``
    for a reader that needs no rack rows (hushmon metrics: half the messages)."""
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.errors import NotFoundError

    async def on_msg(msg: Any) -> None:
        state.add(msg.subject, msg.data, time.time_ns())

    js = nc.jetstream()
    try:
        info = await js.stream_info(SUM_STREAM, subjects_filter=subjects_filter)
    except (NotFoundError, NoRespondersError, TimeoutError, NatsTimeout):
        await nc.subscribe(subjects_filter, cb=on_msg)
        return False  # core NATS only, or no stream: from now on
    subjects = sorted(info.state.subjects or {})
    first, last = int(info.state.first_seq), int(info.state.last_seq)
    if info.state.messages and history_s > 0:
        since_ns = time.time_ns() - int(history_s * 1e9)
        start = await _first_seq_since(nc, first, last, since_ns)
        jobs = [s for s in subjects if s.startswith(JOB_SUBJECTS[:-1])]
        await _in_flight([_read_subject(nc, state, s, start, last) for s in jobs])
    await nc.subscribe(subjects_filter, cb=on_msg)
    if info.state.messages:
        # the core subscription carries the flow from here
        await _read_newest(nc, state, subjects)
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
