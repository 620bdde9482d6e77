"""``hushmon collect``'s loop: durable pull consumers into the store.

Two durable consumers, ``collect-raw`` on HM_RAW and ``collect-sum`` on
HM_SUM, are fetched in turn; each fetched group is written in one
transaction (a lake: :mod:`hushmon.transport.collect_lake`; the embedded
file: :mod:`hushmon.transport.collect_store`) and acked only after the
commit, so a collector killed at any point loses nothing: what was not
acked is delivered again and the store drops what it already holds.
Several collectors may share ``collect-raw`` (work-queue: each message goes
to one of them) into one lake; one of them takes ``collect-sum``: a
``--raw-only`` collector takes no summaries, a ``--summaries-only`` one no
raw batches (so that no raw group waits unacked behind summary work).
Raw batches are taken before summaries in each round, so a rebuild from raw
data sees the batches fetched so far (a summaries-only collector: what the
raw collectors have committed).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from hushmon.daemon_env import tune_malloc_for_a_daemon
from hushmon.errors import HushmonError
from hushmon.store.lake import is_lake
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_store import (
    COLLECT_MEMORY_MIB,
    CollectorStore,
    CollectStats,
    Message,
)
from hushmon.transport.connect import reachable
from hushmon.transport.forward import ForwardStats, LineForwarder
from hushmon.transport.memdump import (
    MemoryDump,
    arrow_pool_for_a_daemon,
    start_tracing_if_asked,
)
from hushmon.transport.natsserver import (
    COLLECT_ACK_WAIT_S,
    COLLECT_RAW,
    COLLECT_SUM,
    MAX_PAYLOAD_BYTES,
    RAW_STREAM,
    SUM_STREAM,
)
from hushmon.transport.natsusers import connect_logged_in

T = TypeVar("T")
RAW_CONSUMER, SUM_CONSUMER = COLLECT_RAW, COLLECT_SUM
# Each group is one transaction whose fixed cost (commit, the anti-joins)
# was ~30 ms: 2048 batches a group store 1.5-2x more per CPU-second than 512
# (docs/transport.md, "Collector"). The bytes bound keeps a group of large
# batches (the stream takes up to 1 MiB each) from taking gigabytes.
FETCH_BATCH = 2048
FETCH_MAX_BYTES = 64 << 20
# An idle collector waits this long per fetch; while data flows the other
# consumer is only glanced at, so an empty HM_SUM does not slow HM_RAW.
FETCH_TIMEOUT_S = 0.5
BUSY_FETCH_TIMEOUT_S = 0.02
# JetStream's error code for a stream that is not there (a consumer's: 10014).
STREAM_NOT_FOUND = 10059
PROGRESS_EVERY_S = 5.0
PULL_LOST_S = 2.0
# Statuses that end a pull request: no messages (404), its time is up (408),
# a conflict such as a leader change or too many waiting pulls (409).
PULL_ENDS = frozenset(("404", "408", "409"))
CONNECT_TIMEOUT_S = 2.0


@dataclass
class CollectOptions:
    url: str
    db: Path
    once: bool = False
    wait: bool = False
    forward_lp: str | None = None
    fetch_batch: int = FETCH_BATCH
    max_batch_bytes: int = MAX_PAYLOAD_BYTES
    memory_mib: int = COLLECT_MEMORY_MIB
    progress: TextIO | None = None
    # raw batches only: another collector of the same lake takes the summaries
    raw_only: bool = False
    # summaries only: other collectors of the same lake take the raw batches
    summaries_only: bool = False
    # the raw path: "python" (nats-py, collect_raw) or "c" (fastcollect)
    engine: str = "python"


@dataclass
class CollectReport:
    url: str
    db: str
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # the process's, all threads (DuckDB's workers too)
    stats: CollectStats = field(default_factory=CollectStats)
    forward: ForwardStats | None = None

    @property
    def batches_per_s(self) -> float:
        return self.stats.batches_stored / self.seconds if self.seconds > 0 else 0.0

    @property
    def batches_per_cpu_s(self) -> float:
        return self.stats.batches_stored / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def lines_per_s(self) -> float:
        return self.stats.lines_stored / self.seconds if self.seconds > 0 else 0.0

    def summary_lines(self) -> list[str]:
        s = self.stats
        out = [
            f"collected {s.batches_stored} batch(es), {s.lines_stored:,} lines, "
            f"{s.values_stored:,} values from {self.url} into {self.db} in {self.seconds:.1f} s "
            f"({self.batches_per_s:.0f} batches/s, {self.lines_per_s:,.0f} lines/s; "
            f"{self.cpu_seconds:.1f} CPU-s, {self.batches_per_cpu_s:,.0f} batches per CPU-s)",
            f"summaries: {s.summaries_stored} stored, {s.summary_duplicates} duplicate(s), "
            f"{s.summary_overlaps} overlapping (rebuilt from raw: {s.summaries_rebuilt}), "
            f"{s.rejected_summaries} rejected",
        ]
        if s.duplicate_batches or s.redelivered:
            out.append(
                f"duplicates discarded by the store: {s.duplicate_batches}; "
                f"redelivered by the stream: {s.redelivered}"
            )
        if s.rejected_batches or s.malformed_lines:
            out.append(
                f"rejected {s.rejected_batches} batch(es), {s.malformed_lines} malformed line(s):"
            )
        out.extend(f"  {line}" for line in s.log[:20])
        if self.forward is not None:
            f = self.forward
            out.append(
                f"forwarded to {f.url}: {f.posted_batches} batch(es) in {f.posts} post(s), "
                f"{f.dropped_queue_full} dropped (queue full), {f.failed_batches} failed"
                + (f" (last error: {f.last_error})" if f.failed_batches else "")
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "db": self.db,
            "seconds": self.seconds,
            "batches_per_s": self.batches_per_s,
            "cpu_seconds": self.cpu_seconds,
            "batches_per_cpu_s": self.batches_per_cpu_s,
            "lines_per_s": self.lines_per_s,
            **self.stats.to_json(),
            "forward": None if self.forward is None else self.forward.__dict__,
        }


def _message(msg: Any) -> Message:
    meta = msg.metadata
    return Message(
        subject=msg.subject,
        headers=dict(msg.headers) if msg.headers else None,
        data=msg.data,
        stream_seq=int(meta.sequence.stream),
        delivered=int(meta.num_delivered),
    )


async def _connect(opts: CollectOptions, stop: asyncio.Event) -> Any:
    """The connection, or None when stopped while waiting. nats-py's own first
    connect retries without end and prints tracebacks, so reachability is
    checked here first; once connected it reconnects on its own (a server
    restart pauses the collector, it does not end it)."""
    import nats

    async def quiet(exc: Exception) -> None:
        if opts.progress:
            print(f"collect: NATS: {type(exc).__name__}: {exc}", file=opts.progress)

    while True:
        why = await asyncio.to_thread(reachable, opts.url, CONNECT_TIMEOUT_S)
        if not why:
            try:
                return await asyncio.wait_for(
                    connect_logged_in(
                        opts.url,
                        quiet,
                        connect_timeout=CONNECT_TIMEOUT_S,
                        max_reconnect_attempts=-1,
                        reconnect_time_wait=1.0,
                    ),
                    timeout=4 * CONNECT_TIMEOUT_S,
                )
            except (OSError, TimeoutError, nats.errors.Error) as exc:
                why = f"{type(exc).__name__}: {exc}"
        if not opts.wait:
            raise HushmonError(
                f"cannot reach NATS at {opts.url} ({why}); start the server or pass --wait",
                exit_code=1,
            )
        if opts.progress:
            print(f"collect: waiting for NATS at {opts.url} ({why})", file=opts.progress)
        try:
            await asyncio.wait_for(stop.wait(), timeout=1.0)
            return None
        except TimeoutError:
            continue


async def _close_quietly(nc: Any) -> None:
    """Flushes and closes; a server that went first (the bed stops its servers
    before the collector) leaves nothing to flush, which is not an error."""
    import nats

    try:
        if nc.is_connected:
            await nc.flush()
        await nc.close()
    except (OSError, TimeoutError, nats.errors.Error):
        pass


async def _subscribe(js: Any, durable: str, stream: str) -> Any:
    """Binds to a durable consumer the admin step made (`deploy streams`):
    the collector never creates or redefines one (its login may not)."""
    from nats.js.errors import NotFoundError

    try:
        await js.consumer_info(stream, durable)
    except NotFoundError as exc:
        what = f"stream {stream}" if exc.err_code == STREAM_NOT_FOUND else f"consumer {durable}"
        raise HushmonError(
            f"{what} not found on the server: an admin declares the streams and consumers "
            "first (python -m hushmon.transport.deploy streams URL --racks ...; "
            "docs/transport.md)",
            exit_code=1,
        ) from exc
    return await js.pull_subscribe_bind(durable, stream)


class _Puller:
    """Pulls a durable consumer's messages in groups through one inbox.

    nats-py's ``fetch`` waits for each message in a task of its own (60 us of
    CPU a message here, a third of the collector's time); here the messages
    land in a list from the subscription's callback and one event ends the
    group: the count reached, or the server's status (404/408: no more for
    this request). The protocol is JetStream's pull request, as nats-py's:
    first ``no_wait`` (what is there now), and only when nothing was there a
    request that lingers ``timeout_s``. Messages that arrive after a group
    ended (a status lost to a reconnect, a slow server) begin the next one;
    none is acked before it is stored either way."""

    def __init__(self, nc: Any, stream: str, durable: str) -> None:
        from nats.js.api import DEFAULT_PREFIX

        self._nc = nc
        self._next_subject = f"{DEFAULT_PREFIX}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = nc.new_inbox()
        self._msgs: list[Any] = []
        self._want = 0
        self._ended = asyncio.Event()
        self._refused = ""

    async def start(self) -> _Puller:
        await self._nc.subscribe(self._inbox, cb=self._on_message)
        return self

    async def _on_message(self, msg: Any) -> None:
        headers = msg.headers
        if not msg.data and headers and "Status" in headers:
            status = headers["Status"]
            if status == "100":  # an idle heartbeat
                return
            if status not in PULL_ENDS:  # nats-py's fetch raised these too
                self._refused = f"{status} {headers.get('Description', '')}".strip()
            self._ended.set()
            return
        self._msgs.append(msg)
        if len(self._msgs) >= self._want:
            self._ended.set()

    async def fetch(self, batch: int, timeout_s: float) -> list[Any]:
        if not self._msgs:
            await self._pull(batch, None)
        if not self._msgs:
            started = time.monotonic()
            await self._pull(batch, timeout_s)
            if not self._msgs:  # ended early (a 409, say): no busy loop
                await asyncio.sleep(max(0.0, timeout_s - (time.monotonic() - started)))
        group, self._msgs = self._msgs[:batch], self._msgs[batch:]
        return group

    async def _pull(self, batch: int, linger_s: float | None) -> None:
        request: dict[str, Any] = {"batch": batch, "max_bytes": FETCH_MAX_BYTES}
        if linger_s is None:
            request["no_wait"] = True
        else:
            request["expires"] = int(linger_s * 1e9)
        self._want = batch
        self._ended.clear()
        await self._nc.publish(self._next_subject, json.dumps(request).encode(), self._inbox)
        # the server ends a request itself; this bounds a request lost to a reconnect
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ended.wait(), (linger_s or 0.0) + PULL_LOST_S)
        if self._refused:
            raise HushmonError(
                f"NATS refused the pull from {self._next_subject}: {self._refused}", exit_code=1
            )


class _StoreThread:
    """The one thread that runs the store's work (every transaction, every
    Arrow table and DuckDB call of it), instead of asyncio's default pool,
    which hands successive calls to up to cores + 4 threads: glibc gives
    each thread an arena of its own and Arrow's allocator a heap, each
    holding the high-water mark of the groups it ran and fragmenting on its
    own (docs/transport.md, "Memory over time"). One thread is all the store
    needs: its calls are awaited one at a time."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hm-store")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _open_store(opts: CollectOptions) -> CollectorStore | LakeCollectorStore:
    """A lake (a ``*.lake`` folder) or the embedded DuckDB file."""
    if is_lake(opts.db):
        return LakeCollectorStore(opts.db, opts.max_batch_bytes)
    return CollectorStore(opts.db, opts.max_batch_bytes, opts.memory_mib)


async def _in_progress_while(work: Awaitable[T], msgs: list[Any], every_s: float) -> T:
    """Runs ``work`` (a group being stored) and, every ``every_s`` until it
    ends, tells the server the group's messages are in progress (``+WPI``):
    a group slower than the consumer's AckWait (a large backlog, a busy
    lake) is then not delivered to another collector meanwhile."""
    task = asyncio.ensure_future(work)
    while True:
        done, _ = await asyncio.wait({task}, timeout=every_s)
        if done:
            return task.result()
        for m in msgs:
            await m.in_progress()


class _FastRaw:
    """The C raw path (fastcollect.FastSource) in the collector's loop: the
    same fetch, store, in-progress and ack steps as the Python path."""

    def __init__(
        self,
        opts: CollectOptions,
        store: LakeCollectorStore,
        store_thread: _StoreThread,
        newest_seqs: dict[tuple[str, int], int],
    ) -> None:
        """``newest_seqs``: the store's newest seq per (host, epoch), read on
        the store thread (a DuckDB query, not for the event loop's thread)."""
        from hushmon.transport.fastcollect import FastSource

        self.store = store
        self.store_thread = store_thread
        self.source = FastSource(opts.url, max_batch_bytes=opts.max_batch_bytes)
        self.source.note_stored(newest_seqs)

    async def take(self, max_msgs: int, wait_s: float, every_s: float) -> int:
        """Fetches, stores and acks one group; how many messages it held."""
        group = await asyncio.to_thread(self.source.fetch_group, max_msgs, FETCH_MAX_BYTES, wait_s)
        messages = self.source.messages
        if messages:
            work = asyncio.ensure_future(
                self.store_thread.run(self.store.write_group, group, messages)
            )
            while not (await asyncio.wait({work}, timeout=every_s))[0]:
                self.source.in_progress()
            work.result()
            self.source.ack_group()
        return messages

    def close(self) -> None:
        self.source.close()


async def _ack_wait_s(sub: Any) -> float:
    info = await sub.consumer_info()
    wait = info.config.ack_wait
    return float(wait) if wait else COLLECT_ACK_WAIT_S


async def _pending(sub: Any) -> int:
    info = await sub.consumer_info()
    return int(info.num_pending) + int(info.num_ack_pending)


def _containers(
    store: CollectorStore | LakeCollectorStore, nc: Any, pulls: list[_Puller | None]
) -> dict[str, int]:
    """The sizes of what lives as long as the collector (memdump.py)."""
    from hushmon.transport import summary_rows

    sizes = {
        "stats.log": len(store.stats.log),
        "sensor_keys": len(summary_rows._keys),
        "puller_msgs": sum(len(p._msgs) for p in pulls if p is not None),
        "tasks": len(asyncio.all_tasks()),
    }
    if isinstance(store, LakeCollectorStore):
        sizes["known_series"] = len(store.writer.known_series)
        sizes["newest_seq"] = len(store.builder.newest_seq)
        sizes["writer.reopens"] = store.writer.reopens
    if nc is not None:
        subs = list(nc._subs.values())
        sizes["nats.subs"] = len(subs)
        sizes["nats.sub_pending_msgs"] = sum(s._pending_queue.qsize() for s in subs)
        sizes["nats.sub_pending_bytes"] = sum(s._pending_size for s in subs)
        sizes["nats.pending_bytes"] = nc._pending_data_size
        sizes["nats.resp_map"] = len(nc._resp_map)
        sizes["nats.pongs"] = len(nc._pongs)
    return sizes


async def collect_async(
    opts: CollectOptions, stop: asyncio.Event, memdump: MemoryDump | None = None
) -> CollectReport:
    started = time.monotonic()
    cpu_started = time.process_time()
    report = CollectReport(url=opts.url, db=str(opts.db))
    store_thread = _StoreThread()
    try:
        # a bad --db fails before connecting; opened on the store's thread
        # like everything else it allocates
        store = await store_thread.run(_open_store, opts)
    except BaseException:
        store_thread.close()
        raise
    report.stats = store.stats
    forwarder = LineForwarder(opts.forward_lp) if opts.forward_lp else None
    nc = None
    fast: _FastRaw | None = None
    try:
        nc = await _connect(opts, stop)
        if nc is None:
            return report
        js = nc.jetstream()
        raw_sub = None if opts.summaries_only else await _subscribe(js, RAW_CONSUMER, RAW_STREAM)
        sum_sub = None if opts.raw_only else await _subscribe(js, SUM_CONSUMER, SUM_STREAM)
        # in-progress acks three times per AckWait while a group is stored
        progress_every_s = await _ack_wait_s(raw_sub or sum_sub) / 3
        # pulled through _Puller (the subscriptions above: consumer state only)
        raw_pull = None
        if raw_sub is not None:
            raw_pull = await _Puller(nc, RAW_STREAM, RAW_CONSUMER).start()
        if opts.engine == "c" and raw_sub is not None:
            if not isinstance(store, LakeCollectorStore) or forwarder is not None:
                raise HushmonError("--engine c collects into a lake, without --forward-lp")
            seqs = await store_thread.run(store.writer.newest_seqs)
            fast = _FastRaw(opts, store, store_thread, seqs)
        sum_pull = None if opts.raw_only else await _Puller(nc, SUM_STREAM, SUM_CONSUMER).start()
        if memdump is not None:
            memdump.containers = lambda: _containers(store, nc, [raw_pull, sum_pull])
            memdump.connection = lambda: (
                store.writer.con if isinstance(store, LakeCollectorStore) else store.con
            )
        last_progress = time.monotonic()
        busy = False
        while not stop.is_set():
            wait_s = BUSY_FETCH_TIMEOUT_S if busy else FETCH_TIMEOUT_S
            raw = []
            took = 0
            if fast is not None:
                took = await fast.take(opts.fetch_batch, wait_s, progress_every_s)
            elif raw_pull is not None:
                raw = await raw_pull.fetch(opts.fetch_batch, wait_s)
                took = len(raw)
            if raw:
                stored = await _in_progress_while(
                    store_thread.run(store.write_raw, [_message(m) for m in raw]),
                    raw,
                    progress_every_s,
                )
                for m in raw:
                    await m.ack()
                if forwarder is not None:
                    for data in stored:
                        forwarder.offer(data)
            sums = []
            if sum_pull is not None:
                sums = await sum_pull.fetch(
                    opts.fetch_batch, BUSY_FETCH_TIMEOUT_S if took else wait_s
                )
            if sums:
                await _in_progress_while(
                    store_thread.run(store.write_summaries, [_message(m) for m in sums]),
                    sums,
                    progress_every_s,
                )
                for m in sums:
                    await m.ack()
            busy = bool(took or sums)
            if memdump is not None:
                memdump.write_if_requested()  # between groups: no connection in use
            if busy:
                await nc.flush()
            now = time.monotonic()
            if opts.progress and now - last_progress >= PROGRESS_EVERY_S:
                last_progress = now
                report.seconds = now - started
                report.cpu_seconds = time.process_time() - cpu_started
                print(f"collect: {report.summary_lines()[0]}", file=opts.progress)
            idle = opts.once and not took and not sums
            if (
                idle
                and (raw_sub is None or await _pending(raw_sub) == 0)
                and (sum_sub is None or await _pending(sum_sub) == 0)
            ):
                break
    finally:
        if fast is not None:
            fast.close()
        if nc is not None:
            # acks were flushed after each group; draining the pull
            # subscriptions would only wait for fetches nobody reads
            await _close_quietly(nc)
        if forwarder is not None:
            report.forward = forwarder.close()
        await store_thread.run(store.close)
        store_thread.close()
        report.seconds = time.monotonic() - started
        report.cpu_seconds = time.process_time() - cpu_started
    return report


def collect(opts: CollectOptions) -> CollectReport:
    """Runs until SIGTERM/SIGINT (finishing the group in hand) or, with
    ``once``, until both consumers have nothing left. SIGUSR2 writes a
    memory report to the progress stream (memdump.py)."""
    # before the threads start (hushmon.cli set them already; again for a
    # collector started otherwise, and for the report's line)
    malloc_settings: dict[str, int | str] = {
        **tune_malloc_for_a_daemon(),
        **arrow_pool_for_a_daemon(),
    }
    start_tracing_if_asked()
    memdump = MemoryDump(opts.progress or sys.stderr, malloc_settings)

    async def main() -> CollectReport:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGUSR2, memdump.request)
        try:
            return await collect_async(opts, stop, memdump)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
                loop.remove_signal_handler(sig)

    return asyncio.run(main())


def default_progress() -> TextIO:
    return sys.stderr
