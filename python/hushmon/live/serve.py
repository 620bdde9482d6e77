"""``hushmon serve``: a small HTTP server (stdlib asyncio) with these paths:

- ``/``: the page (page.py);
- ``/events``: server-sent events, one snapshot a second while the page is
  open (``?max=N``: N of them, then an ``end`` event and the stream closes);
- ``/state``: the current snapshot as JSON (scripts, tests);
- ``/history``: per job the kept periods' plotted values (the page reads it
  once when it opens, so its plots start filled);
- ``/jobs``, ``/job/ID``, ``/compare`` (and their ``.json``): the job
  history from the store (jobs_http.py).

Without ``--url`` only the job history is served.

Read-only, no state of its own beyond the live summaries; binds to
127.0.0.1 unless told otherwise (reach it through an SSH tunnel).

Every request needs a token or a trusted proxy's user (:class:`Access`,
auth.py): the operator's token (``--token-file``'s, or one made at the
start and printed once on stderr in the page's URL) sees every job; a
user's own token or proxy name sees that user's jobs only. A
browser shows it once (``/?token=T``: a cookie is set and the address loses
the token); scripts and a site's reverse proxy send ``Authorization: Bearer
T``. The Host header must name this server (loopback names, the bound
address, ``--allow-host``), so a page elsewhere that rebinds its DNS name to
127.0.0.1 cannot read the data with the browser's cookie either. Refusals
are counted and logged on stderr with the peer's address."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import re
import secrets
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from hushmon.display import printable, without_credentials
from hushmon.errors import HushmonError
from hushmon.live.auth import ProxyTrust, UserTokens, Viewer
from hushmon.live.feed import connect, subscribe
from hushmon.live.jobs_http import History
from hushmon.live.owners import LiveOwners
from hushmon.live.page import page
from hushmon.live.sensors import KEY_SENSORS
from hushmon.live.state import LiveState

MAX_REQUEST_BYTES = 8192
COOKIE = "hushmon_token"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("", "0.0.0.0", "::")


def read_token_file(path: Path) -> str:
    """The token in ``path`` (its first line), which only its owner may read."""
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise HushmonError(f"--token-file {path}: {why}") from exc
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise HushmonError(
            f"--token-file {path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"chmod 600 {path}"
        )
    lines = text.splitlines()
    token = lines[0].strip() if lines else ""
    # It travels in a header, a cookie and a query: letters, digits and -._~+/= only.
    if len(token) < MIN_TOKEN_CHARS or not re.fullmatch(r"[A-Za-z0-9._~+/=-]+", token):
        raise HushmonError(
            f"--token-file {path}: the token (first line) must be at least {MIN_TOKEN_CHARS} "
            "letters, digits or -._~+/= (e.g. python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return token


def _host_name(host_header: str) -> str:
    """The name in a Host header, without its port: ``[::1]:80`` -> ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


@dataclass
class Access:
    """Who may read: the operator's token, the users' tokens, the proxies
    whose user header is believed, the admins, and the names the Host
    header may give (None: any, when bound to every address with no
    ``--allow-host``)."""

    token: str
    hosts: frozenset[str] | None
    refused: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    users: UserTokens | None = None
    proxy: ProxyTrust = field(default_factory=ProxyTrust)
    admins: frozenset[str] = frozenset()

    @classmethod
    def for_bind(cls, token: str, bind: str, allow_hosts: list[str]) -> Access:
        if bind in WILDCARD_ADDRESSES and not allow_hosts:
            return cls(token, None)
        names = {*LOOPBACK_NAMES, *(h.lower() for h in allow_hosts)}
        if bind not in WILDCARD_ADDRESSES:
            names.add(bind.lower())
        return cls(token, frozenset(names))

    def identify(
        self, headers: dict[str, str], query: dict[str, str], peer_ip: str, on_unix: bool
    ) -> tuple[str, str, Viewer | None]:
        """("", where the token was, the viewer) when allowed, else (why refused, "", None)."""
        if self.hosts is not None and _host_name(headers.get("host", "")) not in self.hosts:
            return "Host not allowed", "", None
        proxied = self.proxy.user_from(headers, peer_ip, on_unix)
        if proxied is not None:
            return "", "proxy", Viewer(proxied, proxied in self.admins, "proxy")
        given, where = self._given(headers, query)
        if not given:
            return "no token", "", None
        # compare_digest: the time taken does not tell how much of a guess was right
        if hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return "", where, Viewer("", True, "token")
        user = self.users.user_of(given) if self.users is not None else None
        if user is not None:
            return "", where, Viewer(user, user in self.admins, "user-token")
        return "wrong token", "", None

    def _given(self, headers: dict[str, str], query: dict[str, str]) -> tuple[str, str]:
        """The token a request carries and where: header, cookie or query."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip(), "header"
        try:
            jar = SimpleCookie(headers.get("cookie", ""))
        except CookieError:
            jar = SimpleCookie()
        if COOKIE in jar:
            return jar[COOKIE].value, "cookie"
        return query.get("token", ""), "query"

    def check(self, headers: dict[str, str], query: dict[str, str]) -> tuple[str, str]:
        """("", where the token was) when allowed, else (why refused, "")."""
        if self.hosts is not None and _host_name(headers.get("host", "")) not in self.hosts:
            return "Host not allowed", ""
        given, where = self._given(headers, query)
        if not given:
            return "no token", ""
        # compare_digest: the time taken does not tell how much of a guess was right
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            return "wrong token", ""
        return "", where

    def refuse(self, reason: str, peer: str, request_line: str) -> None:
        self.refused += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        print(f"hushmon serve: refused {printable(request_line[:200])} from {peer}: {reason} "
              f"({self.refused} refused so far)", file=sys.stderr, flush=True)  # fmt: skip


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, colon, value = line.partition(":")
        if colon:
            out[name.strip().lower()] = value.strip()
    return out


def snapshot_json(
    state: LiveState, stale_s: float, visible: Callable[[str], bool] | None = None
) -> str:
    """The snapshot; ``visible``: the jobs a viewer may see (None: all)."""
    snap = state.snapshot(time.time_ns(), stale_s)
    if visible is not None:
        snap["jobs"] = [j for j in snap["jobs"] if visible(j["job"])]
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


def _response(status: str, ctype: str, body: bytes, extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"Cache-Control: no-store\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


def _to_cookie(token: str, query: list[tuple[str, str]], path: str = "/") -> bytes:
    """The page asked for with ``?token=``: the token becomes a cookie (the
    page's own requests carry it) and the browser goes to the same address
    without it, so it stays out of the address bar and the history."""
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
    extra = f"Location: {path}{'?' + rest if rest else ''}\r\nSet-Cookie: {cookie}\r\n"
    return _response("303 See Other", "text/plain", b"", extra)


class LiveServer:
    def __init__(
        self,
        url: str,
        state: LiveState,
        stale_s: float,
        interval_s: float,
        access: Access,
        history: History | None = None,
        owners: LiveOwners | None = None,
    ) -> None:
        self.url = url  # "" = no live view, the job history only
        self.state = state
        self.stale_s = stale_s
        self.interval_s = interval_s
        self.access = access
        self.history = history
        self.owners = owners
        self.nc: Any = None

    def visible(self, viewer: Viewer) -> Callable[[str], bool] | None:
        """Which live jobs ``viewer`` sees: all for an admin; else those whose
        owner is known (job records, Slurm) to be them."""
        if viewer.admin:
            return None
        owners = self.owners.current() if self.owners is not None else {}
        return lambda job: owners.get(job) == viewer.user

    async def handle_unix(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.handle(reader, writer, on_unix=True)

    async def handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, on_unix: bool = False
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            writer.close()
            return
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        path, _, query = parts[1].partition("?") if len(parts) >= 2 else ("", "", "")
        pairs = parse_qsl(query, keep_blank_values=True)
        peer = writer.get_extra_info("peername")
        peer_ip = peer[0] if isinstance(peer, tuple) and peer else ""
        why, where, viewer = self.access.identify(_headers(head), dict(pairs), peer_ip, on_unix)
        try:
            if why or viewer is None:
                shown = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and peer else "unix"
                self.access.refuse(why, shown, request_line)
                status = "403 Forbidden" if why == "Host not allowed" else "401 Unauthorized"
                body = (
                    f"{why}: open the URL hushmon serve printed at its start, or send "
                    "'Authorization: Bearer TOKEN'\n"
                ).encode()
                writer.write(_response(status, "text/plain", body))
            elif where == "query" and path in ("/", "/index.html", "/jobs"):
                given = dict(pairs).get("token", "")
                writer.write(_to_cookie(given, pairs, path))
            elif len(parts) < 2 or parts[0] != "GET":
                writer.write(_response("405 Method Not Allowed", "text/plain", b"GET only\n"))
            elif not self.url and path in ("/", "/index.html"):
                writer.write(_response("303 See Other", "text/plain", b"", "Location: /jobs\r\n"))
            elif path in ("/", "/index.html"):
                body = page(self.url).encode()
                writer.write(_response("200 OK", "text/html; charset=utf-8", body))
            elif path == "/whoami":
                body = json.dumps(viewer.to_json()).encode()
                writer.write(_response("200 OK", "application/json", body))
            elif self.url and path == "/history":
                seen = self.visible(viewer)
                hist = {j: v for j, v in self.state.history().items() if seen is None or seen(j)}
                body = json.dumps(hist, separators=(",", ":")).encode()
                writer.write(_response("200 OK", "application/json", body))
            elif self.url and path == "/state":
                body = snapshot_json(self.state, self.stale_s, self.visible(viewer)).encode()
                writer.write(_response("200 OK", "application/json", body))
            elif self.url and path == "/events":
                limit = _max_events(query)
                if limit is None:
                    writer.write(_response("400 Bad Request", "text/plain", b"max=N, N >= 1\n"))
                else:
                    await self.events(writer, limit, viewer)
            elif self.history is not None and (
                reply := await self.history.answer(path, pairs, viewer)
            ):
                writer.write(_response(*reply))
            else:
                writer.write(_response("404 Not Found", "text/plain", b"not found\n"))
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the browser went away
        finally:
            writer.close()

    async def events(self, writer: asyncio.StreamWriter, limit: int, viewer: Viewer) -> None:
        """A snapshot every interval, ``limit`` times (then an ``end`` event)."""
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
            b"Connection: close\r\n\r\nretry: 2000\n\n"
        )
        sent = 0
        while sent < limit:
            if sent:
                await asyncio.sleep(self.interval_s)
            data = snapshot_json(self.state, self.stale_s, self.visible(viewer))
            writer.write(f"data: {data}\n\n".encode())
            await writer.drain()
            sent += 1
        writer.write(b"event: end\ndata: {}\n\n")


@dataclass
class ServeOptions:
    url: str  # "" = no live view: the job history only
    host: str
    port: int
    stale_s: float
    history_s: float
    token_file: Path | None = None
    allow_hosts: list[str] = field(default_factory=list)
    interval_s: float = 1.0
    history: History | None = None
    tokens_dir: Path | None = None
    trusted_proxies: list[str] = field(default_factory=list)
    unix: Path | None = None
    admins: list[str] = field(default_factory=list)
    user_header: str = "X-Remote-User"


def make_access(opts: ServeOptions) -> tuple[Access, str]:
    """The access rules ``opts`` ask for, and the operator's token."""
    token = read_token_file(opts.token_file) if opts.token_file else secrets.token_urlsafe(32)
    access = Access.for_bind(token, opts.host, opts.allow_hosts)
    access.users = UserTokens(opts.tokens_dir).load() if opts.tokens_dir else None
    access.proxy = ProxyTrust(
        frozenset(opts.trusted_proxies), opts.unix is not None, opts.user_header.lower()
    )
    access.admins = frozenset(opts.admins)
    return access, token


async def _listen_unix(srv: LiveServer, path: Path) -> asyncio.AbstractServer:
    """The proxy's socket: only the site's proxy should reach it (its
    folder's permissions say who), since its user header is believed."""
    with contextlib.suppress(FileNotFoundError):
        if path.is_socket():
            path.unlink()  # a socket left by an earlier run
    try:
        return await asyncio.start_unix_server(srv.handle_unix, str(path), limit=MAX_REQUEST_BYTES)
    except OSError as exc:
        raise HushmonError(f"cannot listen on {path}: {exc.strerror or exc}") from exc


async def run_serve(opts: ServeOptions) -> int:
    url, host, port = opts.url, opts.host, opts.port
    access, token = make_access(opts)
    state = LiveState()
    nc = await connect(url) if url else None
    reader = opts.history.reader if opts.history else None
    owners = LiveOwners(reader, lambda: list(state.jobs)) if url else None
    try:
        if nc is not None:
            await subscribe(nc, state, opts.history_s)
        srv = LiveServer(url, state, opts.stale_s, opts.interval_s, access, opts.history, owners)
        try:
            server = await asyncio.start_server(srv.handle, host, port, limit=MAX_REQUEST_BYTES)
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise HushmonError(f"cannot listen on {host}:{port}: {why}") from exc
        unix = await _listen_unix(srv, opts.unix) if opts.unix else None
        bound = server.sockets[0].getsockname()
        # The made token is shown this once; one from a file is the caller's already.
        query = "" if opts.token_file else f"?token={token}"
        where = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        what = f"summaries from {without_credentials(url)}" if url else "job history only"
        if opts.history is not None:
            what += f"; jobs from {opts.history.store}"
        if opts.unix:
            what += f"; proxy socket {opts.unix}"
        start = "/" if url else "/jobs"
        print(f"hushmon serve: http://{where}:{bound[1]}{start}{query} ({what})",
              file=sys.stderr, flush=True)  # fmt: skip
        async with server:
            if unix is not None:
                await unix.start_serving()
            await server.serve_forever()
    finally:
        if nc is not None:
            await nc.close()
    return 0


def serve(opts: ServeOptions) -> int:
    # a daemon: hushmon.cli tuned its heap and Arrow's pool (daemon_env.py)
    try:
        return asyncio.run(run_serve(opts))
    except KeyboardInterrupt:
        return 0
