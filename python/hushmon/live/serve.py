"""``hushmon serve``: a small HTTP server (stdlib asyncio) with three paths:

- ``/``: the page (page.py);
- ``/events``: server-sent events, one snapshot a second while the page is
  open (``?max=N``: N of them, then an ``end`` event and the stream closes);
- ``/state``: the current snapshot as JSON (scripts, tests);
- ``/history``: per job the kept periods' plotted values (the page reads it
  once when it opens, so its plots start filled).

Read-only, no state of its own beyond the live summaries; binds to
127.0.0.1 unless told otherwise (reach it through an SSH tunnel)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from hushmon.errors import HushmonError
from hushmon.live.feed import connect, subscribe
from hushmon.live.page import page
from hushmon.live.sensors import KEY_SENSORS
from hushmon.live.state import LiveState

MAX_REQUEST_BYTES = 8192


def snapshot_json(state: LiveState, stale_s: float) -> str:
    snap = state.snapshot(time.time_ns(), stale_s)
    snap["labels"] = [k.label for k in KEY_SENSORS]
    snap["units"] = [k.unit for k in KEY_SENSORS]
    return json.dumps(snap, separators=(",", ":"))


def _max_events(query: str) -> int | None:
    """``max=N`` from the query (unbounded without it), None when it is bad."""
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key == "max":
            return int(value) if value.isdigit() and int(value) >= 1 else None
    return sys.maxsize


def _response(status: str, ctype: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


class LiveServer:
    def __init__(self, url: str, state: LiveState, stale_s: float, interval_s: float) -> None:
        self.url = url
        self.state = state
        self.stale_s = stale_s
        self.interval_s = interval_s
        self.nc: Any = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            writer.close()
            return
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        path, _, query = parts[1].partition("?") if len(parts) >= 2 else ("", "", "")
        try:
            if len(parts) < 2 or parts[0] != "GET":
                writer.write(_response("405 Method Not Allowed", "text/plain", b"GET only\n"))
            elif path in ("/", "/index.html"):
                body = page(self.url).encode()
                writer.write(_response("200 OK", "text/html; charset=utf-8", body))
            elif path == "/history":
                body = json.dumps(self.state.history(), separators=(",", ":")).encode()
                writer.write(_response("200 OK", "application/json", body))
            elif path == "/state":
                body = snapshot_json(self.state, self.stale_s).encode()
                writer.write(_response("200 OK", "application/json", body))
            elif path == "/events":
                limit = _max_events(query)
                if limit is None:
                    writer.write(_response("400 Bad Request", "text/plain", b"max=N, N >= 1\n"))
                else:
                    await self.events(writer, limit)
            else:
                writer.write(_response("404 Not Found", "text/plain", b"not found\n"))
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the browser went away
        finally:
            writer.close()

    async def events(self, writer: asyncio.StreamWriter, limit: int) -> None:
        """A snapshot every interval, ``limit`` times (then an ``end`` event)."""
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
            b"Connection: close\r\n\r\nretry: 2000\n\n"
        )
        sent = 0
        while sent < limit:
            if sent:
                await asyncio.sleep(self.interval_s)
            data = snapshot_json(self.state, self.stale_s)
            writer.write(f"data: {data}\n\n".encode())
            await writer.drain()
            sent += 1
        writer.write(b"event: end\ndata: {}\n\n")


async def run_serve(
    url: str, host: str, port: int, stale_s: float, history_s: float, interval_s: float = 1.0
) -> int:
    state = LiveState()
    nc = await connect(url)
    try:
        await subscribe(nc, state, history_s)
        srv = LiveServer(url, state, stale_s, interval_s)
        try:
            server = await asyncio.start_server(srv.handle, host, port, limit=MAX_REQUEST_BYTES)
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise HushmonError(f"cannot listen on {host}:{port}: {why}") from exc
        bound = server.sockets[0].getsockname()
        print(f"hushmon serve: http://{bound[0]}:{bound[1]}/ (summaries from {url})",
              file=sys.stderr, flush=True)  # fmt: skip
        async with server:
            await server.serve_forever()
    finally:
        await nc.close()
    return 0


def serve(url: str, host: str, port: int, stale_s: float, history_s: float) -> int:
    try:
        return asyncio.run(run_serve(url, host, port, stale_s, history_s))
    except KeyboardInterrupt:
        return 0
