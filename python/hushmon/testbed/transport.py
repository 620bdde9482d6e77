"""The online transport on the bed (``hushmon testbed up --transport nats``):
a hub of 3 JetStream nats-servers on the core, one leaf nats-server per
rack on the rack's switch, HM_RAW and HM_SUM with 3 replicas, two rack
reducers per rack (in the leaf's namespace, like a service on the rack's
leaf server), the top reducer and ``hushmon collect`` next to the hub.

Every server configuration comes from hushmon.transport.natsserver, the one
place that writes them (the shipped deploy/nats/ configs too). Every daemon
runs in a namespace named hm-* and is recorded in the bed's state, so
`down` stops it with the rest, and `status` shows it.

TLS is on, as on a real cluster (docs/security.md): `up` makes a CA of the
bed's own and certificates for each server (its address), each node and
each service role under the state folder's nats/tls; every listener checks
its peers' certificates, and every client (agents, reducers, collector, the
bed's own checks, `hushmon` commands given client_env()) checks the
server's. The servers have no logins (the bed is one operator's).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError
from hushmon.paths import program
from hushmon.testbed import system
from hushmon.testbed.spec import (
    HUB_NETNS,
    hub_addresses,
    leaf_address,
    leaf_netns,
    rack_name,
)
from hushmon.testbed.state import STATE_DIR, Bed
from hushmon.transport import natsserver as ns
from hushmon.transport import natstls

START_TIMEOUT_S = 20.0
# The collector of a fresh bed makes its lake first (DuckLake's extensions
# loaded, the catalog's tables committed): 5-10 s more than a reducer's start
# on this 2-vCPU VM at load 10-15.
COLLECT_START_TIMEOUT_S = 60.0
# A 3-server hub elects its JetStream leader within a few seconds of start.
STREAMS_SETTLE_S = 30.0
REDUCERS_PER_RACK = 2
RACK_INSTANCES = ("a", "b")
# The durable consumers the bed declares with its streams (the admin step)
# and its reducers and collector bind to (c/transport, collector.py).
COLLECT_CONSUMERS = ((ns.RAW_STREAM, ns.COLLECT_RAW), (ns.SUM_STREAM, ns.COLLECT_SUM))
TOP_CONSUMER = (ns.SUM_STREAM, ns.REDUCE_TOP)
Say = Callable[[str], None]


SERVICE_ROLES = ("reduce", "collect", "admin")


def hub_url() -> str:
    """Every hub server, as libnats and the bed's helpers take them."""
    return ",".join(f"tls://{a}:{ns.CLIENT_PORT}" for a in hub_addresses())


def hub_url_one() -> str:
    return f"tls://{hub_addresses()[0]}:{ns.CLIENT_PORT}"


def leaf_url(rack: int) -> str:
    return f"tls://{leaf_address(rack)}:{ns.CLIENT_PORT}"


def tls_dir(root: Path = STATE_DIR) -> Path:
    return root / "nats" / "tls"


def client_env(root: Path = STATE_DIR, who: str = "admin") -> dict[str, str]:
    """What a hushmon client needs to reach the bed's servers: its CA and
    the certificate of ``who`` (a service role or a node)."""
    stem = f"role-{who}" if who in SERVICE_ROLES else f"node-{who}"
    return natstls.TlsFiles.under(tls_dir(root), stem).env()


def make_tls(bed: Bed) -> None:
    """A new CA and every certificate of the bed (a new bed trusts no old one)."""
    folder = tls_dir(bed.root)
    if folder.exists():
        shutil.rmtree(folder)
    natstls.make_ca(folder, "hushmon test bed CA")
    for cfg in hub_configs(bed) + list(leaf_configs(bed).values()):
        natstls.write_identity(folder, f"server-{cfg.name}", cfg.name, [cfg.host], server=True)
    for who in SERVICE_ROLES:
        natstls.write_identity(folder, f"role-{who}", who)
    for node in bed.nodes():
        natstls.write_identity(folder, f"node-{node.name}", node.name)


def _with_tls(bed: Bed, cfg: ns.NatsServerConfig) -> ns.NatsServerConfig:
    cfg.tls = natstls.TlsFiles.under(tls_dir(bed.root), f"server-{cfg.name}")
    return cfg


def hub_configs(bed: Bed) -> list[ns.NatsServerConfig]:
    return [
        _with_tls(bed, c) for c in ns.hub_configs(hub_addresses(), bed.nats_store, monitor=True)
    ]


def leaf_configs(bed: Bed) -> dict[int, ns.NatsServerConfig]:
    return {
        rack: _with_tls(
            bed,
            ns.leaf_config(
                rack_name(rack), hub_addresses(), bed.nats_store, listen=leaf_address(rack)
            ),
        )
        for rack in range(1, bed.spec.racks + 1)
    }


@dataclass(frozen=True)
class Daemon:
    """One daemon of the transport: its name in the bed's state, its
    namespace and its command line."""

    name: str
    netns: str
    argv: list[str]
    env: dict[str, str] | None = None  # added to the bed's environment

    def command(self) -> list[str]:
        nsenter = system.tool("nsenter", "util-linux")
        return [nsenter, f"--net=/run/netns/{self.netns}", "--", *self.argv]


def _server_daemon(bed: Bed, cfg: ns.NatsServerConfig, netns: str) -> Daemon:
    conf = bed.nats_conf_dir / f"{cfg.name}.conf"
    return Daemon(f"nats@{cfg.name}", netns, ns.server_argv(conf))


def servers(bed: Bed) -> list[Daemon]:
    out = [_server_daemon(bed, c, HUB_NETNS) for c in hub_configs(bed)]
    out += [_server_daemon(bed, c, leaf_netns(r)) for r, c in leaf_configs(bed).items()]
    return out


def consumers(bed: Bed) -> list[Daemon]:
    """Rack reducers (two per rack, one durable consumer), the top reducer,
    the collector writing the bed's store."""
    reduce = str(program("hushmon-reduce"))
    reduce_env = client_env(bed.root, "reduce")
    out = []
    for rack in range(1, bed.spec.racks + 1):
        for inst in RACK_INSTANCES[:REDUCERS_PER_RACK]:
            out.append(
                Daemon(
                    f"reduce@{rack_name(rack)}.{inst}",
                    leaf_netns(rack),
                    [reduce, "--rack", rack_name(rack), "--url", leaf_url(rack)],
                    reduce_env,
                )
            )
    # One URL: libnats takes no list here, and learns the other hub servers
    # from the cluster (it reconnects to any of them).
    out.append(
        Daemon("reduce@top", HUB_NETNS, [reduce, "--top", "--url", hub_url_one()], reduce_env)
    )
    out.append(
        Daemon(
            "collect",
            HUB_NETNS,
            # --wait: a collector started while the hub is down (or restarted
            # in a fault test) waits for it instead of exiting.
            [
                sys.executable,
                "-m",
                "hushmon.cli",
                "collect",
                "--url",
                hub_url_one(),
                "--db",
                str(bed.store),
                "--wait",
            ],
            client_env(bed.root, "collect"),
        )
    )
    return out


def daemons(bed: Bed) -> dict[str, Daemon]:
    return {d.name: d for d in servers(bed) + consumers(bed)}


def check_programs() -> None:
    """Fails in one line naming the fix before anything is made."""
    ns.nats_server_binary()
    program("hushmon-reduce")
    try:
        import nats  # noqa: F401
    except ModuleNotFoundError as exc:
        raise HushmonError("nats-py is missing: run 'make deps' (pip install nats-py)") from exc


def spawn(bed: Bed, daemon: Daemon) -> subprocess.Popen[bytes]:
    proc = system.spawn(
        daemon.command(),
        bed.logs / f"{daemon.name.replace('@', '-')}.log",
        f"starting {daemon.name}",
        daemon.env,
    )
    bed.daemons[daemon.name] = proc.pid
    return proc


def start_servers(bed: Bed, say: Say) -> None:
    """Writes the configurations, starts the hub and the leaves, declares the
    streams (3 replicas) once the hub has its JetStream leader."""
    if bed.nats_store.exists():
        shutil.rmtree(bed.nats_store)  # a new bed starts with empty streams
    make_tls(bed)
    configs = [(c, HUB_NETNS) for c in hub_configs(bed)]
    configs += [(c, leaf_netns(r)) for r, c in leaf_configs(bed).items()]
    procs = {}
    for cfg, netns in configs:
        ns.write_config(cfg, bed.nats_conf_dir / f"{cfg.name}.conf")
        daemon = _server_daemon(bed, cfg, netns)
        procs[daemon.name] = (spawn(bed, daemon), cfg)
    bed.save()
    for name, (proc, cfg) in procs.items():
        try:
            ns.wait_ready(cfg.host, cfg.port, START_TIMEOUT_S)
        except HushmonError as exc:
            raise HushmonError(f"{name}: {_exit_or(proc, exc)}: see {bed.logs}") from exc
    replicas = ns.stream_replicas(len(hub_addresses()))
    say(f"nats: streams {ns.RAW_STREAM}, {ns.SUM_STREAM} with {replicas} replicas (TLS)")
    racks = [rack_name(r) for r in range(1, bed.spec.racks + 1)]
    with _environment(client_env(bed.root)):
        ns.ensure_streams(
            hub_url(),
            replicas=replicas,
            timeout_s=5.0,
            settle_s=STREAMS_SETTLE_S,
            consumers=ns.site_consumers(racks),
        )


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """ensure_streams reads its TLS files from the environment, as every
    hushmon client does."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def connect_hub(root: Path = STATE_DIR) -> Any:
    """A nats-py connection to the bed's hub as its admin, over TLS."""
    import nats

    tls = natstls.client_context(natstls.TlsFiles.under(tls_dir(root), "role-admin"))
    return await nats.connect(
        hub_url().split(","), connect_timeout=2, max_reconnect_attempts=0, tls=tls
    )


def _exit_or(proc: subprocess.Popen[bytes], exc: Exception) -> str:
    code = proc.poll()
    return f"exited with code {code} at start" if code is not None else str(exc)


def start_consumers(bed: Bed) -> None:
    """Reducers and the collector; up when each pulls from its durable consumer."""
    procs = {d.name: spawn(bed, d) for d in consumers(bed)}
    bed.save()
    wait_consumers(bed, procs)


def wait_consumers(bed: Bed, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    want = [(ns.RAW_STREAM, f"reduce-{rack_name(r)}") for r in range(1, bed.spec.racks + 1)]
    if "reduce@top" in procs:
        want.append(TOP_CONSUMER)
    wait_s = START_TIMEOUT_S
    if "collect" in procs:
        want += list(COLLECT_CONSUMERS)
        wait_s = COLLECT_START_TIMEOUT_S
    deadline = time.monotonic() + wait_s
    missing = want
    pulled: set[tuple[str, str]] = set()
    while True:
        for name, proc in procs.items():
            if proc.poll() is not None:
                log = bed.logs / f"{name.replace('@', '-')}.log"
                raise HushmonError(
                    f"{name} exited with code {proc.returncode} at start: {_last_line(log)}"
                )
        pulled |= set(consumers_pulled())
        missing = [c for c in want if c not in pulled]
        if not missing:
            return
        if time.monotonic() > deadline:
            names = ", ".join(f"{s}/{c}" for s, c in missing)
            raise HushmonError(
                f"consumers {names} not pulled from in {wait_s:.0f} s: see {bed.logs}"
            )
        time.sleep(0.2)


def _last_line(log: Path) -> str:
    try:
        lines = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return f"see {log}"
    return lines[-1] if lines else f"see {log}"


def consumers_pulled() -> list[tuple[str, str]]:
    """(stream, durable) of every consumer with a pull request waiting now
    (a reducer or the collector bound to it)."""
    return asyncio.run(_consumers_pulled())


async def _consumers_pulled() -> list[tuple[str, str]]:
    nc = await connect_hub()
    try:
        js = nc.jetstream(timeout=5)
        out = []
        for stream in (ns.RAW_STREAM, ns.SUM_STREAM):
            for info in await js.consumers_info(stream):
                if info.num_waiting:
                    out.append((stream, str(info.name)))
        return out
    finally:
        await nc.close()


def refresh_pids(bed: Bed) -> None:
    """Daemon pids as the state file has them now: another process (a
    `hushmon run`, a fault test) may have restarted one since ``bed`` was read."""
    from hushmon.testbed.state import load

    now = load(bed.root)
    if now is not None:
        bed.daemons.update(now.daemons)


def restart(bed: Bed, name: str) -> int:
    """Starts a transport daemon of the bed again (after a fault test
    killed it, or `hushmon run` paused the collector); returns its pid."""
    refresh_pids(bed)
    table = daemons(bed)
    if name not in table:
        raise HushmonError(f"no transport daemon '{name}' (daemons: {', '.join(sorted(table))})")
    old = bed.daemons.get(name)
    if old and system.running(old):
        raise HushmonError(f"{name} is running (pid {old}): stop it first")
    proc = spawn(bed, table[name])
    bed.save()
    if name.startswith("nats@"):
        cfg = next(
            c
            for c in hub_configs(bed) + list(leaf_configs(bed).values())
            if name == f"nats@{c.name}"
        )
        ns.wait_ready(cfg.host, cfg.port, START_TIMEOUT_S)
    return proc.pid


def stop(bed: Bed, name: str) -> None:
    """Stops a daemon cleanly (SIGTERM: the collector commits the group in
    hand, a reducer publishes what is open and acks)."""
    refresh_pids(bed)
    pid = bed.daemons.get(name)
    if pid and system.running(pid):
        left = system.stop_processes([pid], grace_s=15.0)
        if left:
            raise HushmonError(f"{name} (pid {pid}) did not stop")
