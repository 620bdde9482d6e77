"""``hushmon metrics``: the Prometheus / OpenMetrics endpoint.

One process, stdlib asyncio HTTP: ``GET /metrics`` answers with the series
of families.py in the format the Accept header asks for (OpenMetrics for
Prometheus, text 0.0.4 otherwise). It reads NATS as the live views do
(python/hushmon/live/feed.py: the HM_SUM stream's newest job summaries at
the start, then a core subscription to ``hm.sum.job.>``), and with node costs on,
a core subscription to ``hm.raw.>`` of which only each batch's headers and
``hushmon_agent`` line are read; and the live alerts of ``hushmon alert``
(``hm.alert.>``, alerts.py). Every answer is built from memory at the
scrape: no NATS request is made while Prometheus waits.

Jobs whose newest summary is older than ``keep_s`` and nodes not heard
from for as long are dropped (from the answer and from memory): an ended
job's series go stale in Prometheus then, as a finished target's do.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.display import printable, without_credentials
from hushmon.errors import HushmonError
from hushmon.live.feed import JOB_SUBJECTS, connect, settle, subscribe
from hushmon.live.serve import Access, read_token_file
from hushmon.metrics.alerts import ALERT_SUBJECTS, Alerts
from hushmon.metrics.deferred import DeferredState
from hushmon.metrics.exposition import OPENMETRICS_TYPE, TEXT_TYPE, render, wants_openmetrics
from hushmon.metrics.families import (
    alert_counts,
    alert_families,
    job_families,
    node_families,
    own_families,
    served,
)
from hushmon.metrics.nodecost import NodeCosts
from hushmon.metrics.users import JobUsers
from hushmon.transport.slurmjob import squeue_users

RAW_SUBJECTS = "hm.raw.>"
MAX_REQUEST_BYTES = 8192


@dataclass
class MetricsOptions:
    url: str
    host: str = "127.0.0.1"
    port: int = 9877
    keep_s: float = 300.0
    node_cost: bool = True
    token_file: Path | None = None
    once: bool = False


class Exporter:
    """The state the answers are built from, and building them."""

    def __init__(self, keep_s: float, node_cost: bool) -> None:
        self.keep_s = keep_s
        # parsed at each answer, only the newest period of each job (deferred.py)
        self.state = DeferredState(keep=served)
        self.costs: NodeCosts | None = NodeCosts.empty() if node_cost else None
        self.users = JobUsers()
        self.alerts = Alerts()
        self.render_s = 0.0

    def on_raw(self, subject: str, headers: dict[str, str] | None, data: bytes) -> None:
        if self.costs is not None:
            self.costs.add(subject, headers, data, time.time_ns())

    def prune(self, now_ns: int) -> None:
        """Jobs and nodes older than keep_s leave memory too."""
        for job in list(self.state.jobs):
            j = self.state.jobs[job]
            newest = max(
                [p.time_ns for p in (j.whole, *j.racks.values()) if p is not None], default=0
            )
            if (now_ns - newest) / 1e9 > self.keep_s:
                del self.state.jobs[job]
        old = {s for s, k in self.state.kept.items() if (now_ns - k.time_ns) / 1e9 > self.keep_s}
        self.state.forget(old)
        if self.costs is not None:
            self.costs.prune(now_ns, self.keep_s)

    def body(self, openmetrics: bool) -> bytes:
        t0 = time.perf_counter()
        self.state.flush()
        now_ns = time.time_ns()
        self.prune(now_ns)
        snap = self.state.snapshot(now_ns, self.keep_s)
        served_jobs = {j["job"] for j in snap["jobs"]}
        self.users.forget(served_jobs)
        self.alerts.forget_jobs_but(served_jobs)
        jobs, left_out = job_families(snap, self.users.users)
        jobs.append(alert_families(self.alerts, self.users.users))
        nodes = node_families(self.costs) if self.costs is not None else []
        own = own_families(snap, self.state.superseded, self.costs, left_out, self.render_s)
        own.append(alert_counts(self.alerts))
        out = render([*jobs, *nodes, *own], openmetrics)
        self.render_s = time.perf_counter() - t0
        return out

    async def refresh_users(self) -> None:
        """Asks Slurm for the users of jobs not known yet (at most once a
        minute), off the event loop."""
        jobs = list(self.state.jobs)
        if self.users.refresh_due(jobs):
            self.users.update(await asyncio.to_thread(squeue_users))


def _response(status: str, ctype: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            out[name.strip().lower()] = value.strip()
    return out


class MetricsServer:
    def __init__(self, exporter: Exporter, access: Access | None) -> None:
        self.exporter = exporter
        self.access = access

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            writer.close()
            return
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        path = parts[1].partition("?")[0] if len(parts) >= 2 else ""
        headers = _headers(head)
        try:
            why = self.access.check(headers, {})[0] if self.access is not None else ""
            if why and self.access is not None:
                peer = writer.get_extra_info("peername")
                self.access.refused += 1
                who = f"{peer[0]}:{peer[1]}" if peer else "?"
                line = printable(request_line[:200])
                n = self.access.refused
                msg = f"hushmon metrics: refused {line} from {who}: {why} ({n} refused so far)"
                print(msg, file=sys.stderr, flush=True)
                body = f"{why}: send 'Authorization: Bearer TOKEN'\n".encode()
                writer.write(_response("401 Unauthorized", "text/plain", body))
            elif len(parts) < 2 or parts[0] != "GET":
                writer.write(_response("405 Method Not Allowed", "text/plain", b"GET only\n"))
            elif path == "/metrics":
                await self.exporter.refresh_users()
                om = wants_openmetrics(headers.get("accept", ""))
                body = self.exporter.body(om)
                writer.write(_response("200 OK", OPENMETRICS_TYPE if om else TEXT_TYPE, body))
            elif path == "/":
                writer.write(_response("200 OK", "text/plain", b"hushmon metrics: GET /metrics\n"))
            else:
                writer.write(_response("404 Not Found", "text/plain", b"not found\n"))
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the scraper went away
        finally:
            writer.close()


async def _feed(nc: Any, exporter: Exporter) -> None:
    # job summaries only: the rack partials are not served
    await subscribe(nc, exporter.state, subjects_filter=JOB_SUBJECTS)

    async def on_alert(msg: Any) -> None:
        exporter.alerts.add(msg.data)

    await nc.subscribe(ALERT_SUBJECTS, cb=on_alert)
    if exporter.costs is not None:

        async def on_raw(msg: Any) -> None:
            exporter.on_raw(msg.subject, msg.headers, msg.data)

        await nc.subscribe(RAW_SUBJECTS, cb=on_raw)


async def run_metrics(opts: MetricsOptions) -> int:
    access = None
    if opts.token_file is not None:
        # any Host: Prometheus names the target as its config does
        access = Access.for_bind(read_token_file(opts.token_file), "0.0.0.0", [])
    exporter = Exporter(opts.keep_s, opts.node_cost)
    nc = await connect(opts.url)
    try:
        await _feed(nc, exporter)
        if opts.once:
            await settle(exporter.state)
            if exporter.costs is not None:
                await asyncio.sleep(1.0)  # a period of the agents' batches
            await exporter.refresh_users()
            sys.stdout.buffer.write(exporter.body(openmetrics=False))
            sys.stdout.flush()
            return 0
        srv = MetricsServer(exporter, access)
        try:
            server = await asyncio.start_server(
                srv.handle, opts.host, opts.port, limit=MAX_REQUEST_BYTES
            )
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise HushmonError(f"cannot listen on {opts.host}:{opts.port}: {why}") from exc
        bound = server.sockets[0].getsockname()
        where = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        print(f"hushmon metrics: http://{where}:{bound[1]}/metrics (summaries from "
              f"{without_credentials(opts.url)})", file=sys.stderr, flush=True)  # fmt: skip
        async with server:
            await server.serve_forever()
    finally:
        await nc.close()
    return 0


def metrics(opts: MetricsOptions) -> int:
    try:
        return asyncio.run(run_metrics(opts))
    except KeyboardInterrupt:
        return 0
