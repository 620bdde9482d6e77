"""Forwarding raw batches' line protocol to VictoriaMetrics (or any
InfluxDB-compatible ``/write``), for sites that use Grafana.

It never blocks the store path: the collector offers each stored batch to a
queue bounded by bytes (a batch may be up to the server's max payload, so a
count alone could hold gigabytes while the forward target is slow) and by
count, and goes on; when either is reached the batch is dropped for
forwarding only (it is in the store) and counted. A thread posts what is
queued in bodies of up to ``max_body_bytes``, retrying a failed post with
back-off before counting it as failed.
"""

from __future__ import annotations

import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

QUEUE_BATCHES = 10_000
QUEUE_BYTES = 64 << 20
MAX_BODY_BYTES = 4 << 20
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0)
POST_TIMEOUT_S = 10.0


@dataclass
class ForwardStats:
    url: str
    queued: int = 0
    dropped_queue_full: int = 0  # by count or by bytes
    dropped_bytes: int = 0
    posted_batches: int = 0
    posted_bytes: int = 0
    posts: int = 0
    retries: int = 0
    failed_batches: int = 0
    last_error: str = ""


class LineForwarder:
    """A bounded queue and one posting thread."""

    def __init__(
        self,
        base_url: str,
        queue_batches: int = QUEUE_BATCHES,
        queue_bytes: int = QUEUE_BYTES,
        max_body_bytes: int = MAX_BODY_BYTES,
        retry_delays_s: tuple[float, ...] = RETRY_DELAYS_S,
    ) -> None:
        self.write_url = base_url.rstrip("/") + "/write"
        self.stats = ForwardStats(self.write_url)
        self.max_body_bytes = max_body_bytes
        self.queue_bytes = queue_bytes
        self.retry_delays_s = retry_delays_s
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=queue_batches)
        self._stats_lock = threading.Lock()
        self._queued_bytes = 0  # of the batches in _queue; under _stats_lock
        self._thread = threading.Thread(target=self._run, name="hushmon-forward", daemon=True)
        self._thread.start()

    def offer(self, batch: bytes) -> None:
        """Queues a batch without waiting; a full queue drops it (counted)."""
        with self._stats_lock:
            fits = self._queued_bytes + len(batch) <= self.queue_bytes
            if fits:
                try:
                    self._queue.put_nowait(batch)
                except queue.Full:
                    fits = False
            if not fits:
                self.stats.dropped_queue_full += 1
                self.stats.dropped_bytes += len(batch)
                return
            self._queued_bytes += len(batch)
            self.stats.queued += 1

    def queued_bytes(self) -> int:
        with self._stats_lock:
            return self._queued_bytes

    def _taken(self, batch: bytes) -> None:
        with self._stats_lock:
            self._queued_bytes -= len(batch)

    def close(self, timeout_s: float = 30.0) -> ForwardStats:
        """Posts what is queued (up to ``timeout_s``) and stops the thread."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self._queue.put(None, timeout=0.1)
                break
            except queue.Full:
                continue
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return self.stats

    def _run(self) -> None:
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                return
            self._taken(item)
            body, count = [item], 1
            size = len(item)
            # take what else is queued, up to one body
            while size < self.max_body_bytes:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                self._taken(nxt)
                body.append(nxt)
                size += len(nxt)
                count += 1
            self._post(b"".join(b if b.endswith(b"\n") else b + b"\n" for b in body), count)

    def _post(self, body: bytes, batches: int) -> None:
        for attempt in range(len(self.retry_delays_s) + 1):
            request = urllib.request.Request(self.write_url, data=body, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as response:
                    response.read()
                with self._stats_lock:
                    self.stats.posts += 1
                    self.stats.posted_batches += batches
                    self.stats.posted_bytes += len(body)
                return
            except (urllib.error.URLError, OSError) as exc:
                with self._stats_lock:
                    self.stats.last_error = str(getattr(exc, "reason", exc))
                if attempt < len(self.retry_delays_s):
                    with self._stats_lock:
                        self.stats.retries += 1
                    time.sleep(self.retry_delays_s[attempt])
        with self._stats_lock:
            self.stats.failed_batches += batches
