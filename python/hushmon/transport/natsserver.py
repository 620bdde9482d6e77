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

from hushmon.errors import HushmonError

RAW_STREAM = "HM_RAW"
RAW_SUBJECTS = "hm.raw.>"
SUM_STREAM = "HM_SUM"
SUM_SUBJECTS = "hm.sum.>"
# Long enough to cover an agent's reconnect and replay after a short outage;
# the store deduplicates by (host, epoch, seq) beyond it.
DUPLICATE_WINDOW_S = 15 * 60
# A batch is one node's period: tens of KB on a node with many CPUs.
MAX_PAYLOAD_BYTES = 1 << 20
READY_TIMEOUT_S = 15.0


@dataclass
class NatsServerConfig:
    """What one nats-server process is: its ports, its peers and its role."""

    name: str
    store_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    jetstream: bool = True
    cluster_name: str = ""
    cluster_port: int = 0
    routes: Sequence[str] = ()
    leaf_listen_port: int = 0  # hub side: accepts rack leaves
    leaf_remotes: Sequence[str] = ()  # leaf side: the hub's leaf URLs
    monitor_port: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    def render(self) -> str:
        """The server's configuration file text."""
        lines = [
            f'server_name: "{self.name}"',
            f'listen: "{self.host}:{self.port}"',
            f"max_payload: {MAX_PAYLOAD_BYTES}",
        ]
        if self.monitor_port:
            lines.append(f'http: "{self.host}:{self.monitor_port}"')
        if self.jetstream:
            lines.append(f'jetstream {{ store_dir: "{self.store_dir}" }}')
        if self.cluster_name:
            routes = ", ".join(f'"{r}"' for r in self.routes)
            lines.append(
                f'cluster {{ name: "{self.cluster_name}", '
                f'listen: "{self.host}:{self.cluster_port}", routes: [{routes}] }}'
            )
        if self.leaf_listen_port:
            lines.append(f'leafnodes {{ listen: "{self.host}:{self.leaf_listen_port}" }}')
        if self.leaf_remotes:
            urls = ", ".join(f'"{u}"' for u in self.leaf_remotes)
            # A leaf reconnects on its own when the hub or the uplink comes back.
            lines.append(f"leafnodes {{ reconnect: 1, remotes: [ {{ urls: [{urls}] }} ] }}")
        lines += [f"{k}: {v}" for k, v in self.extra.items()]
        return "\n".join(lines) + "\n"

    @property
    def client_url(self) -> str:
        return f"nats://{self.host}:{self.port}"


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


async def ensure_streams_async(url: str, replicas: int = 1, timeout_s: float = 10.0) -> None:
    """Declares HM_RAW and HM_SUM (idempotent: an existing stream is updated)."""
    import nats
    from nats.js.api import StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    nc = await nats.connect(url, connect_timeout=timeout_s, max_reconnect_attempts=0)
    try:
        js = nc.jetstream(timeout=timeout_s)
        for name, subjects in ((RAW_STREAM, RAW_SUBJECTS), (SUM_STREAM, SUM_SUBJECTS)):
            config = StreamConfig(
                name=name,
                subjects=[subjects],
                storage=StorageType.FILE,
                num_replicas=replicas,
                duplicate_window=DUPLICATE_WINDOW_S,
                max_msg_size=MAX_PAYLOAD_BYTES,
            )
            try:
                await js.stream_info(name)
                await js.update_stream(config)
            except NotFoundError:
                await js.add_stream(config)
    finally:
        await nc.close()


def ensure_streams(url: str, replicas: int = 1, timeout_s: float = 10.0) -> None:
    try:
        asyncio.run(ensure_streams_async(url, replicas, timeout_s))
    except (OSError, TimeoutError) as exc:
        raise HushmonError(f"declaring streams on {url}: {exc or type(exc).__name__}") from exc
