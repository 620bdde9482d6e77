"""Starting nats-server (hub, cluster member or rack leaf) and declaring the
streams of docs/transport.md.

One place writes every server configuration hushmon uses, so the test bed,
the tests and the shipped configs for a real cluster (deploy/nats/) agree on
names, limits and JetStream settings."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError
from hushmon.period import SUMMARY_CLOSE_S

# The names live in natsnames (natsusers needs them and natsserver needs
# natsusers); re-exported here, where the servers that use them are made.
from hushmon.transport.natsnames import (
    COLLECT_RAW,
    COLLECT_SUM,
    RAW_STREAM,
    RAW_SUBJECTS,
    REDUCE_TOP,
    SUM_STREAM,
    SUM_SUBJECTS,
    reduce_consumer,
)
from hushmon.transport.natstls import HANDSHAKE_TIMEOUT_S, TlsFiles

# The server keeps each raw batch's Nats-Msg-Id this long (~0.6 KB of hub
# memory per batch: 15 min at 10,000 nodes held ~5.5 GB, 2 min ~0.7 GB). It
# must cover the agent's resends of a batch whose ack was lost (every 5 s,
# ACK_TIMEOUT_NS in c/agent/sinks/nats.c); a replay after a longer outage is
# dropped by the reducers and by the store's (host, epoch, seq) check.
DUPLICATE_WINDOW_S = 2 * 60
DUPLICATE_WINDOW_MAX_S = SUMMARY_CLOSE_S // 2
# Retention: the streams are a buffer between the agents and the store, not
# the store. Limits-based (the reducers' and the collector's durable
# consumers each keep their own place), bounded by age, oldest dropped
# first. 1000 nodes at 1 Hz write ~2.7 MB/s of raw batches (~10 GB an
# hour): 6 h covers a collector down over a night shift; a collector down
# longer finds gaps in the agents' sequence numbers, counted as lost by
# `hushmon transport status`. A size bound is optional (-1: none): without
# one, the server's JetStream storage limit (max_file_store) is the bound,
# and a full store refuses new batches instead of dropping old ones, so
# the agents keep them in their spools. Summaries are ~100x smaller.
RAW_MAX_AGE_S = 6 * 3600
RAW_MAX_BYTES = -1
SUM_MAX_AGE_S = 7 * 24 * 3600
SUM_MAX_BYTES = -1
# A batch is one node's period: tens of KB on a node with many CPUs.
MAX_PAYLOAD_BYTES = 1 << 20
READY_TIMEOUT_S = 15.0

# The ports of a hushmon NATS deployment (the servers' defaults, named once
# so the test bed, the shipped configs and the docs agree).
CLIENT_PORT = 4222
CLUSTER_PORT = 6222
LEAF_PORT = 7422
MONITOR_PORT = 8222
HUB_CLUSTER_NAME = "hushmon-hub"
# The hub's JetStream domain. A leaf without JetStream does not pass the
# JetStream API ($JS.API.>) over its hub connection (the server denies it
# unless the system account is shared); a domain makes the hub answer
# $JS.hub.API.> too, and each leaf maps its clients' $JS.API.> there, so
# agents and reducers on a leaf use JetStream as if connected to the hub.
JS_DOMAIN = "hub"
# A rack leaf pings the hub this often and gives the link up after this many
# unanswered pings: a dead uplink is noticed in ~15 s instead of the
# server's default 4 min, so the leaf reconnects as soon as the link is back.
LEAF_PING_INTERVAL_S = 5
LEAF_PING_MAX = 3
# A leaf retries the hub this often while the uplink or the hub is down.
LEAF_RECONNECT_S = 1


@dataclass
class NatsServerConfig:
    """What one nats-server process is: its ports, its peers and its role."""

    name: str
    store_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    jetstream: bool = True
    js_domain: str = ""
    js_api_to_domain: str = ""  # leaf: map its clients' $JS.API.> to this domain's API
    cluster_name: str = ""
    cluster_port: int = 0
    routes: Sequence[str] = ()
    leaf_listen_port: int = 0  # hub side: accepts rack leaves
    leaf_remotes: Sequence[str] = ()  # leaf side: the hub's leaf URLs
    monitor_port: int = 0
    ping_interval_s: int = 0  # 0: the server's default (2 min)
    ping_max: int = 0  # 0: the server's default (2)
    extra: dict[str, str] = field(default_factory=dict)
    # Logins (natsusers.render_users), in the file or included from a file
    # next to it (users_include: a site's secrets, never in git); neither =
    # none, anyone may do anything (the test bed, most tests). A rack leaf
    # logs in to the hub's leaf port as the user "leaf" of these, whose
    # permissions bound what crosses its uplink.
    users_block: str = ""
    users_include: str = ""
    # TLS (natstls): this server's certificate, key and the CA it trusts.
    # Every listener then speaks TLS only and verifies its peers: clients
    # (when verify_clients) and route and leaf peers must present a
    # certificate of the CA. None: plain (most tests).
    tls: TlsFiles | None = None
    verify_clients: bool = True

    def _tls_block(self, *settings: str) -> str:
        assert self.tls is not None
        parts = [f'ca_file: "{self.tls.ca_file}"']
        if self.tls.cert_file is not None:
            parts += [f'cert_file: "{self.tls.cert_file}"', f'key_file: "{self.tls.key_file}"']
        parts += [*settings, f"timeout: {HANDSHAKE_TIMEOUT_S}"]
        return "tls { " + ", ".join(parts) + " }"

    def render(self) -> str:
        """The server's configuration file text."""
        # "$VAR": the name comes from the environment (one file for every
        # server of a role, in deploy/nats/).
        name = self.name if self.name.startswith("$") else f'"{self.name}"'
        lines = [
            f"server_name: {name}",
            f'listen: "{self.host}:{self.port}"',
            f"max_payload: {MAX_PAYLOAD_BYTES}",
        ]
        if self.monitor_port:
            # /connz and /subsz list every client and subject: this host only.
            lines.append(f'http: "127.0.0.1:{self.monitor_port}"')
        if self.tls is not None:
            lines.append(self._tls_block(*(["verify: true"] if self.verify_clients else [])))
        if self.ping_interval_s:
            lines.append(f'ping_interval: "{self.ping_interval_s}s"')
        if self.ping_max:
            lines.append(f"ping_max: {self.ping_max}")
        if self.jetstream:
            domain = f', domain: "{self.js_domain}"' if self.js_domain else ""
            lines.append(f'jetstream {{ store_dir: "{self.store_dir}"{domain} }}')
        if self.js_api_to_domain:
            lines.append(f'mappings {{ "$JS.API.>": "$JS.{self.js_api_to_domain}.API.>" }}')
        if self.cluster_name:
            routes = ", ".join(f'"{r}"' for r in self.routes)
            # Routes have no login: with TLS only a holder of a server
            # certificate whose names are in the route list joins the cluster.
            tls = ""
            if self.tls is not None:
                tls = ", " + self._tls_block("verify_cert_and_check_known_urls: true")
            lines.append(
                f'cluster {{ name: "{self.cluster_name}", '
                f'listen: "{self.host}:{self.cluster_port}", routes: [{routes}]{tls} }}'
            )
        if self.leaf_listen_port:
            tls = ", " + self._tls_block("verify: true") if self.tls is not None else ""
            lines.append(f'leafnodes {{ listen: "{self.host}:{self.leaf_listen_port}"{tls} }}')
        if self.leaf_remotes:
            # "$VAR": the URL (with the leaf login) comes from the environment
            urls = ", ".join(u if u.startswith("$") else f'"{u}"' for u in self.leaf_remotes)
            # A leaf reconnects on its own when the hub or the uplink comes back.
            tls = ", " + self._tls_block() if self.tls is not None else ""
            lines.append(
                f"leafnodes {{ reconnect: {LEAF_RECONNECT_S}, "
                f"remotes: [ {{ urls: [{urls}]{tls} }} ] }}"
            )
        lines += [f"{k}: {v}" for k, v in self.extra.items()]
        if self.users_block:
            lines.append(self.users_block.rstrip("\n"))
        if self.users_include:
            lines.append(f'include "{self.users_include}"')
        return "\n".join(lines) + "\n"

    @property
    def client_url(self) -> str:
        return f"{'tls' if self.tls is not None else 'nats'}://{self.host}:{self.port}"


def hub_configs(
    peers: Sequence[str],
    store_root: Path,
    listen: Sequence[str] | None = None,
    monitor: bool = True,
) -> list[NatsServerConfig]:
    """The hub: one JetStream server per entry of ``peers`` (the address or
    name the others reach it at), clustered with routes to every peer, each
    accepting rack leaves. ``listen``: the address each binds (default: its
    peer address; a real cluster listens on 0.0.0.0). With one peer there is
    no cluster (and streams get one replica)."""
    binds = list(listen) if listen is not None else list(peers)
    if len(binds) != len(peers):
        raise HushmonError(f"{len(peers)} hub peers but {len(binds)} listen addresses")
    out = []
    for k, bind in enumerate(binds, start=1):
        out.append(
            NatsServerConfig(
                name=f"hub{k}",
                store_dir=store_root / f"hub{k}",
                host=bind,
                port=CLIENT_PORT,
                cluster_name=HUB_CLUSTER_NAME if len(peers) > 1 else "",
                cluster_port=CLUSTER_PORT if len(peers) > 1 else 0,
                routes=[f"nats-route://{p}:{CLUSTER_PORT}" for p in peers]
                if len(peers) > 1
                else (),
                js_domain=JS_DOMAIN,
                leaf_listen_port=LEAF_PORT,
                # on 127.0.0.1: servers sharing a host (the bed's hub
                # namespace) each need their own port; hub1 has the usual one
                monitor_port=MONITOR_PORT + k - 1 if monitor else 0,
            )
        )
    return out


def leaf_config(
    rack: str, hub_peers: Sequence[str], store_root: Path, listen: str = "0.0.0.0"
) -> NatsServerConfig:
    """A rack's leaf: no JetStream of its own (the streams live on the hub;
    publishes, their acks and the reducers' pulls cross the uplink through
    the leaf connection), agents and rack reducers connect to it."""
    return NatsServerConfig(
        name=f"leaf-{rack}",
        store_dir=store_root / f"leaf-{rack}",
        host=listen,
        port=CLIENT_PORT,
        jetstream=False,
        js_api_to_domain=JS_DOMAIN,
        leaf_remotes=[f"nats-leaf://{p}:{LEAF_PORT}" for p in hub_peers],
        ping_interval_s=LEAF_PING_INTERVAL_S,
        ping_max=LEAF_PING_MAX,
    )


def stream_replicas(hub_servers: int) -> int:
    """HM_RAW and HM_SUM: 3 replicas on a hub of 3 or more, else one per server."""
    return min(3, max(1, hub_servers))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str:
    path = shutil.which("nats-server")
    if path is None:
        raise HushmonError("nats-server not found: run 'make deps' (Debian package nats-server)")
    return path


def write_config(cfg: NatsServerConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg.store_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(cfg.render())
    return path


def server_argv(config_path: Path) -> list[str]:
    return [nats_server_binary(), "-c", str(config_path)]


def wait_ready(host: str, port: int, timeout_s: float = READY_TIMEOUT_S) -> None:
    """Waits until the server accepts clients (it sends INFO first)."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0) as s:
                if s.recv(4).startswith(b"INFO"):
                    return
        except OSError as exc:
            last = exc.strerror or str(exc)
        time.sleep(0.05)
    raise HushmonError(f"nats-server at {host}:{port} not ready after {timeout_s:.0f} s ({last})")


class LocalNatsServer:
    """A nats-server child process (tests, benchmarks, one-machine use)."""

    def __init__(self, cfg: NatsServerConfig, workdir: Path) -> None:
        if cfg.port == 0:
            cfg.port = free_port(cfg.host)
        self.cfg = cfg
        self.workdir = workdir
        self.log_path = workdir / f"{cfg.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalNatsServer:
        conf = write_config(self.cfg, self.workdir / f"{self.cfg.name}.conf")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                server_argv(conf), stdout=log, stderr=log, stdin=subprocess.DEVNULL
            )
        try:
            wait_ready(self.cfg.host, self.cfg.port)
        except HushmonError:
            self.stop()
            raise
        return self

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    @property
    def url(self) -> str:
        return self.cfg.client_url

    def __enter__(self) -> LocalNatsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class StreamLimits:
    """How long and how much HM_RAW and HM_SUM keep (see RAW_MAX_AGE_S)."""

    raw_max_age_s: float = RAW_MAX_AGE_S
    raw_max_bytes: int = RAW_MAX_BYTES
    sum_max_age_s: float = SUM_MAX_AGE_S
    sum_max_bytes: int = SUM_MAX_BYTES
    duplicate_window_s: float = DUPLICATE_WINDOW_S

    def check(self) -> None:
        # The store closes a period's summaries an hour after it with a last
        # rebuild from raw data, which must come after any replay the window
        # lets in: the window stays at most half of that hour.
        if not 10 <= self.duplicate_window_s <= DUPLICATE_WINDOW_MAX_S:
            raise HushmonError(
                f"duplicate window {self.duplicate_window_s:.0f} s: use 10 .. "
                f"{DUPLICATE_WINDOW_MAX_S} (it must cover the agents' 5 s resends and stay under "
                f"the store's closing of summaries, {SUMMARY_CLOSE_S} s; the hub holds ~0.6 KB "
                "per batch in it)"
            )
        # Shorter than the duplicate window would let a replay in twice.
        for what, age in (("raw", self.raw_max_age_s), ("summary", self.sum_max_age_s)):
            if age < self.duplicate_window_s:
                raise HushmonError(
                    f"{what} stream max age {age:.0f} s is shorter than the duplicate window "
                    f"({self.duplicate_window_s:.0f} s)"
                )
        for what, size in (("raw", self.raw_max_bytes), ("summary", self.sum_max_bytes)):
            if size != -1 and size < 64 * MAX_PAYLOAD_BYTES:
                raise HushmonError(
                    f"{what} stream max bytes {size} is below 64 messages of the largest size"
                )


# A collector's group must commit before its messages come again; after a
# kill -9 the messages in flight come back after this long.
COLLECT_ACK_WAIT_S = 30.0
# A reducer holds a summary at most half its consumer's AckWait
# (c/transport/rack.c): 40 s covers 5 graces of 2 s periods plus 10 s.
REDUCE_ACK_WAIT_S = 40.0
REDUCE_MAX_ACK_PENDING = 20000


@dataclass(frozen=True)
class ConsumerSpec:
    """One durable pull consumer as the admin step declares it."""

    stream: str
    name: str
    filter_subject: str | None
    ack_wait_s: float
    max_ack_pending: int


def site_consumers(
    racks: Sequence[str] = (),
    reduce_ack_wait_s: float = REDUCE_ACK_WAIT_S,
    reduce_max_ack_pending: int = REDUCE_MAX_ACK_PENDING,
) -> list[ConsumerSpec]:
    """Every durable consumer of a site with these racks: the collector's
    two, the top reducer's, one per rack reducer."""
    from hushmon.transport.natsusers import check_rack

    for rack in racks:
        check_rack(rack)
    if len(set(racks)) != len(racks):
        raise HushmonError("a rack is named twice")
    wait, pending = reduce_ack_wait_s, reduce_max_ack_pending
    return [
        ConsumerSpec(RAW_STREAM, COLLECT_RAW, None, COLLECT_ACK_WAIT_S, -1),
        ConsumerSpec(SUM_STREAM, COLLECT_SUM, None, COLLECT_ACK_WAIT_S, -1),
        ConsumerSpec(SUM_STREAM, REDUCE_TOP, "hm.sum.rack.>", wait, pending),
        *(
            ConsumerSpec(RAW_STREAM, reduce_consumer(r), f"hm.raw.{r}.>", wait, pending)
            for r in racks
        ),
    ]


async def _ensure_consumers(js: Any, consumers: Sequence[ConsumerSpec]) -> None:
    """Creates each consumer or updates the settings an existing one may
    change (AckWait, MaxAckPending): its place in the stream is kept."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    for c in consumers:
        config = ConsumerConfig(
            durable_name=c.name,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=c.ack_wait_s,
            max_ack_pending=c.max_ack_pending,
            filter_subject=c.filter_subject,
        )
        await js.add_consumer(c.stream, config)


async def ensure_streams_async(
    url: str,
    replicas: int = 1,
    timeout_s: float = 10.0,
    limits: StreamLimits | None = None,
    consumers: Sequence[ConsumerSpec] | None = None,
) -> None:
    """Declares HM_RAW and HM_SUM (idempotent: an existing stream is updated,
    its limits included) and the durable consumers (``site_consumers()``
    when None: the collector's and the top reducer's)."""
    import nats
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    from hushmon.transport.natsusers import client_auth

    nc = await nats.connect(
        url.split(","), connect_timeout=timeout_s, max_reconnect_attempts=0, **client_auth()
    )
    try:
        js = nc.jetstream(timeout=timeout_s)
        lim = limits or StreamLimits()
        lim.check()
        for name, subjects, max_age_s, max_bytes in (
            (RAW_STREAM, RAW_SUBJECTS, lim.raw_max_age_s, lim.raw_max_bytes),
            (SUM_STREAM, SUM_SUBJECTS, lim.sum_max_age_s, lim.sum_max_bytes),
        ):
            config = StreamConfig(
                name=name,
                subjects=[subjects],
                storage=StorageType.FILE,
                num_replicas=replicas,
                duplicate_window=lim.duplicate_window_s,
                max_msg_size=MAX_PAYLOAD_BYTES,
                max_age=max_age_s,
                max_bytes=max_bytes,
                # viewers read the newest summaries by direct get: no consumer
                allow_direct=True,
            )
            try:
                await js.stream_info(name)
                await js.update_stream(config)
            except NotFoundError:
                await js.add_stream(config)
        await _ensure_consumers(js, site_consumers() if consumers is None else consumers)
    finally:
        await nc.close()


def ensure_streams(
    url: str,
    replicas: int = 1,
    timeout_s: float = 10.0,
    settle_s: float = 0.0,
    limits: StreamLimits | None = None,
    consumers: Sequence[ConsumerSpec] | None = None,
) -> None:
    """Declares the streams and the durable consumers (the admin step).
    ``settle_s``: keep trying that long while a cluster that has just
    started elects its JetStream leader (until then it answers with errors
    or not at all)."""
    from nats.errors import Error as NatsError

    deadline = time.monotonic() + settle_s
    while True:
        try:
            asyncio.run(ensure_streams_async(url, replicas, timeout_s, limits, consumers))
            return
        except (OSError, TimeoutError, NatsError) as exc:
            if time.monotonic() < deadline:
                time.sleep(0.25)
                continue
            reason = str(exc) or type(exc).__name__
            raise HushmonError(f"declaring streams on {url}: {reason}") from exc
