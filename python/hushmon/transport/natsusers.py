"""Who may do what on hushmon's NATS servers (docs/security.md, "NATS:
TLS, identities, roles"), and how a hushmon client proves who it is.

Over NATS the uid in a control request (Hm-Uid) is only a claim, so the
servers themselves must keep steering to the admins: every client logs in
as one of the service roles below or as its node (one login per node,
allowed its own subjects only) and the server enforces the permissions.

Passwords, not nkeys or JWT creds: nats-py and libnats take a user and a
password with no extra package or tool (nkeys need the Python ``nkeys``
module and a key generator, creds files the operator/JWT mode and its
resolver). ``python -m hushmon.transport.deploy secrets`` makes them with
the TLS certificates; the servers include the logins from a file only
they read, so the configuration files in git hold none, and each client
reads its own password from a file only its service can read. A client's
user: ``$HUSHMON_NATS_USER``, its password file:
``$HUSHMON_NATS_PASSWORD_FILE``; with neither it connects without a user
(a server without authorization: the test bed, most tests)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import string
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError
from hushmon.transport.natsnames import (
    COLLECT_RAW,
    COLLECT_SUM,
    RAW_STREAM,
    REDUCE_TOP,
    SUM_STREAM,
    reduce_consumer,
)
from hushmon.transport.natstls import (
    CA_FILE_ENV,
    CERT_FILE_ENV,
    KEY_FILE_ENV,
    client_context,
    client_files_from_env,
)

USER_ENV = "HUSHMON_NATS_USER"
PASSWORD_FILE_ENV = "HUSHMON_NATS_PASSWORD_FILE"
# Every variable a client reads its login and TLS from (the C clients also
# take the server name to expect).
CLIENT_ENV_VARS = (
    USER_ENV,
    PASSWORD_FILE_ENV,
    CA_FILE_ENV,
    CERT_FILE_ENV,
    KEY_FILE_ENV,
    "HUSHMON_NATS_TLS_HOSTNAME",
)

RAW = RAW_STREAM
SUM = SUM_STREAM


def _api(*tails: str) -> tuple[str, ...]:
    """JetStream API subjects as a hub's clients send them and as a leaf
    forwards them (its clients' $JS.API.> mapped to the hub's domain)."""
    return tuple(f"{prefix}.{t}" for t in tails for prefix in ("$JS.API", "$JS.hub.API"))


# Stream state: nothing here changes anything, and nothing names a consumer.
_STREAM_READ_API = _api("INFO", "STREAM.NAMES", "STREAM.LIST", "STREAM.INFO.*")
# ...and every consumer's state (the viewer's and collector's `transport
# status`); never a reducer's, which sees its own consumer only.
_READ_API = (*_STREAM_READ_API, *_api("CONSUMER.NAMES.*", "CONSUMER.LIST.*", "CONSUMER.INFO.*.*"))


def _bound_consumer(stream: str, name: str) -> tuple[str, ...]:
    """Read and pull one durable consumer the admin made, and ack its
    messages. No CREATE in any form (a creator may redefine it, or give a
    consumer a deliver subject of its choice, which the server does not
    check against its permissions) and no DELETE (a consumer removed loses
    its place for every instance)."""
    return (
        *_api(f"CONSUMER.INFO.{stream}.{name}", f"CONSUMER.MSG.NEXT.{stream}.{name}"),
        f"$JS.ACK.{stream}.{name}.>",
    )


def inbox_prefix(user: str) -> str:
    """The inbox a login's replies come to (pulled messages, acks of its
    publishes, API answers), so another login cannot read them; the agent
    (c/agent/sinks/nats.c) and hushmon-reduce (c/transport/nats_io.c) set it."""
    return f"_INBOX.{user}"


@dataclass(frozen=True)
class Role:
    """A login and the subjects it may publish and subscribe to (empty
    allow lists with admin=True: everything). Allow lists only: what a role
    does not list it may not do; ``publish_deny`` cuts holes in a wildcard."""

    name: str
    why: str
    publish: tuple[str, ...] = ()
    publish_deny: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ("_INBOX.>",)
    allow_responses: bool = False  # may answer requests it received (reply subjects)
    admin: bool = False


# A leaf forwards its rack reducers' pulls: any consumer of HM_RAW but the
# collector's (the leaf login is one for all racks; each rack reducer's own
# login, checked by the leaf it connects to, holds it to its own consumer).
_RACK_REDUCERS = _bound_consumer(RAW, "*")
_NOT_THE_COLLECTORS = _bound_consumer(RAW, COLLECT_RAW)

# One table: a new client kind is a new line (docs/security.md lists them).
# The rack reducers' logins are one per rack: rack_reducer_role().
ROLES: tuple[Role, ...] = (
    Role(
        REDUCE_TOP,
        "hushmon-reduce --top: pull the racks' partials (reduce-top on HM_SUM), publish job "
        "summaries",
        publish=("hm.sum.job.*", *_STREAM_READ_API, *_bound_consumer(SUM, REDUCE_TOP)),
        subscribe=(f"{inbox_prefix(REDUCE_TOP)}.>",),
    ),
    Role(
        "collect",
        "hushmon collect: pulls both streams into the store through its own consumers",
        publish=(
            *_READ_API,
            *_bound_consumer(RAW, COLLECT_RAW),
            *_bound_consumer(SUM, COLLECT_SUM),
        ),
    ),
    Role(
        "viewer",
        "hushmon top, serve, transport status: read summaries, batches and stream state; "
        "the stream's newest summaries by direct get (no consumer)",
        publish=(*_READ_API, *_api(f"DIRECT.GET.{SUM}", f"DIRECT.GET.{SUM}.>")),
        # hm.alert.>: hushmon alert's live alerts, served by hushmon metrics
        subscribe=("hm.sum.>", "hm.raw.>", "hm.alert.>", "_INBOX.>"),
    ),
    Role(
        "alert",
        "hushmon alert: read the job summaries (as the viewer does), publish live alerts",
        publish=(
            "hm.alert.*",
            *_STREAM_READ_API,
            *_api(f"DIRECT.GET.{SUM}", f"DIRECT.GET.{SUM}.>"),
        ),
        subscribe=("hm.sum.job.>", "_INBOX.>"),
    ),
    Role(
        "leaf",
        "a rack leaf's uplink to the hub (publish: what it may send in; subscribe: what the "
        "hub sends it): its agents' batches and answers, its reducers' partials and pulls",
        publish=("hm.raw.*.*", "hm.sum.rack.*", "_INBOX.>", *_READ_API, *_RACK_REDUCERS),
        publish_deny=_NOT_THE_COLLECTORS,
        subscribe=("hm.ctl.>", "_INBOX.>"),
    ),
    Role(
        "admin",
        "hushmon ctl, `deploy streams` (streams, their limits and the durable consumers): the "
        "only role that may steer agents, change streams or make consumers",
        admin=True,
    ),
)


def check_rack(rack: str) -> None:
    """A rack name is a subject token and part of a login (reduce-<rack>)."""
    if not rack or not all(c.isalnum() or c in "-_" for c in rack) or not rack.isascii():
        raise HushmonError(f"rack name {rack!r}: use letters, digits, '-' and '_'")
    if reduce_consumer(rack) == REDUCE_TOP:
        raise HushmonError(f"rack name {rack!r}: reduce-{rack} is the top reducer's")


def rack_reducer_role(rack: str) -> Role:
    """A rack's reducers' login (user = their consumer's name, reduce-<rack>;
    the rack's two instances share it, as they share the consumer): pull
    hm.raw.<rack>.> through reduce-<rack> only, publish that rack's
    partials only, read its own replies only."""
    check_rack(rack)
    name = reduce_consumer(rack)
    return Role(
        name,
        f"hushmon-reduce --rack {rack}",
        publish=(f"hm.sum.rack.{rack}", *_STREAM_READ_API, *_bound_consumer(RAW, name)),
        subscribe=(f"{inbox_prefix(name)}.>",),
    )


def node_role(host: str) -> Role:
    """A node's own login (user = its host name): publish its own batches
    only (the subject is the proof of the sender, checked against the
    batch's Hm-Host and host tags by the reducers and the collector), take
    control requests for itself or all, answer them; its JetStream acks come
    to its own inbox prefix (_INBOX.<host>.: c/agent/sinks/nats.c), so it
    cannot read the replies and pulled batches meant for others."""
    check_host(host)
    return Role(
        host,
        "a node's agent",
        publish=(f"hm.raw.*.{host}",),
        subscribe=(f"hm.ctl.host.{host}", "hm.ctl.all", f"_INBOX.{host}.>"),
        allow_responses=True,
    )


def check_host(host: str) -> None:
    """A host name is a subject token and a login: letters, digits, - and _."""
    if not host or not all(c.isalnum() or c in "-_" for c in host) or not host.isascii():
        raise HushmonError(f"node name {host!r}: use letters, digits, '-' and '_'")
    if any(host == r.name for r in ROLES) or host.startswith("reduce-"):
        raise HushmonError(f"node name {host!r} is a service role's login")


def role(name: str) -> Role:
    for r in ROLES:
        if r.name == name:
            return r
    raise HushmonError(f"no NATS role {name!r} (roles: {', '.join(r.name for r in ROLES)})")


def _quoted(subjects: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{s}"' for s in subjects) + "]"


def render_users(roles: Sequence[Role], passwords: Mapping[str, str]) -> str:
    """An ``authorization`` block: each role's password (``passwords``, by
    user; letters only, see new_password) and permissions. The servers
    include it from a file only they read (``deploy secrets``)."""
    lines = ["authorization {", "  users = ["]
    for r in roles:
        pw = passwords[r.name]
        if not pw.isalnum():
            raise HushmonError(f"the password of {r.name!r} has characters other than letters")
        entry = f'    {{ user: "{r.name}", password: "{pw}"'
        if not r.admin:
            pub = f"allow: {_quoted(r.publish)}"
            if r.publish_deny:
                pub += f", deny: {_quoted(r.publish_deny)}"
            perms = f"publish: {{ {pub} }}, subscribe: {{ allow: {_quoted(r.subscribe)} }}"
            if r.allow_responses:
                perms += ", allow_responses: true"
            entry += f", permissions: {{ {perms} }}"
        lines.append(entry + " }")
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


LEAF_USER = "leaf"


def leaf_url_var(k: int) -> str:
    """The environment variable holding hub k's leaf URL with the leaf login."""
    return f"HM_NATS_HUB{k}_LEAF_URL"


class _QuietTlsClose(logging.Filter):
    """asyncio warns 'returning true from eof_received() has no effect when
    using ssl' each time a TLS server closes a nats-py connection (a
    refused login, a server stopping): noise on a user's terminal, not a
    fault, since nats-py reconnects or reports the close itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received()" not in record.getMessage()


_QUIET_TLS_CLOSE = _QuietTlsClose()


def client_auth() -> dict[str, Any]:
    """nats.connect() keyword arguments for this process's login (none when
    $HUSHMON_NATS_USER is unset) and TLS (when $HUSHMON_NATS_CA_FILE is set:
    the server's certificate is checked against that CA and the URL's host)."""
    tls = client_files_from_env()
    out: dict[str, Any] = {}
    if tls is not None:
        out["tls"] = client_context(tls)
        logging.getLogger("asyncio").addFilter(_QUIET_TLS_CLOSE)  # once: loggers keep a set
    user = os.environ.get(USER_ENV, "")
    path = os.environ.get(PASSWORD_FILE_ENV, "")
    if not user and not path:
        return out
    if not user or not path:
        raise HushmonError(f"set both {USER_ENV} and {PASSWORD_FILE_ENV} (or neither)")
    try:
        password = Path(path).read_text().strip()
    except OSError as exc:
        raise HushmonError(f"{PASSWORD_FILE_ENV} {path}: {exc.strerror or exc}") from None
    if not password:
        raise HushmonError(f"{PASSWORD_FILE_ENV} {path} is empty")
    return {**out, "user": user, "password": password}


async def connect_logged_in(
    servers: str | list[str],
    error_cb: Callable[[Exception], Awaitable[None]] | None = None,
    **options: Any,
) -> Any:
    """nats.connect() with this process's login that stops at the first
    refused login with one line: nats-py tries a refused login again without
    end (and a collector reconnecting for ever would wait silently)."""
    import nats

    refused = asyncio.Event()

    async def on_error(exc: Exception) -> None:
        if "authorization violation" in str(exc).lower():
            refused.set()
        if error_cb is not None:
            await error_cb(exc)

    connecting = asyncio.create_task(
        nats.connect(servers, error_cb=on_error, **options, **client_auth())
    )
    refusal = asyncio.create_task(refused.wait())
    await asyncio.wait({connecting, refusal}, return_when=asyncio.FIRST_COMPLETED)
    refusal.cancel()
    failed = connecting.done() and not connecting.cancelled() and connecting.exception()
    if not connecting.done() or "authorization violation" in str(failed).lower():
        connecting.cancel()
        with contextlib.suppress(asyncio.CancelledError, nats.errors.Error, OSError):
            await connecting
        shown = servers if isinstance(servers, str) else ",".join(servers)
        user = os.environ.get(USER_ENV, "")
        raise HushmonError(
            f"NATS server {shown} refused the login"
            + (f" of user {user!r}" if user else " (no user given)")
            + f" (Authorization Violation): set ${USER_ENV} and ${PASSWORD_FILE_ENV} "
            "(docs/transport.md 'Users and permissions')",
            exit_code=1,
        )
    return connecting.result()


def new_password() -> str:
    """32 random letters (182 bits). Letters only: nats-server reads a
    value in its configuration (or its environment, the leaf URLs) as
    configuration text, and a value such as "4-2x..." is taken for a date
    or a number and refused."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(32))


USERS_FILE = "users.conf"
SERVER_ENV_FILE = "nats-server.env"
TLS_DIR = "tls"
NODES_DIR = "nodes"


def site_roles(nodes: Sequence[str], racks: Sequence[str]) -> list[Role]:
    """Every login of a site: the service roles, one per rack's reducers,
    then one per node."""
    if len(set(nodes)) != len(nodes):
        raise HushmonError("a node is named twice")
    if len(set(racks)) != len(racks):
        raise HushmonError("a rack is named twice")
    return [*ROLES, *(rack_reducer_role(r) for r in racks), *(node_role(n) for n in nodes)]


def generate_secrets(
    folder: Path,
    hubs: Sequence[str],
    leaves: Sequence[str],
    nodes: Sequence[str],
    leaf_port: int,
    racks: Sequence[str],
) -> list[Path]:
    """What a site's servers and clients prove who they are with, all new:

    - ``tls/``: the CA (``ca.pem``; ``ca.key``, to keep offline), a server
      certificate per hub and leaf (``server-<name>``), a client certificate
      per node (``node-<host>``) and per service role (``role-<role>``,
      a rack's reducers ``role-reduce-<rack>``);
    - a password per service role (``<role>.password``, ``reduce-<rack>.password``;
      the leaf's is in the leaf URLs too) and per node (``nodes/<host>.password``);
    - ``users.conf``, the servers' logins and permissions (it holds every
      password: the hubs and leaves include it, 0600);
    - ``nats-server.env``: the hubs' leaf URLs with the leaf login.

    Keys and passwords are 0600. Refuses to overwrite: new passwords lock
    every client out (docs/security.md, rotation)."""
    from hushmon.transport import natstls

    roles = site_roles(nodes, racks)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    if (folder / USERS_FILE).exists():
        raise HushmonError(f"{folder / USERS_FILE} exists: remove the folder to make new secrets")
    passwords = {r.name: new_password() for r in roles}
    written = [_private(folder / USERS_FILE, render_users(roles, passwords))]
    (folder / NODES_DIR).mkdir(exist_ok=True)
    for r in roles:
        sub = folder / NODES_DIR if r.name in nodes else folder
        written.append(_private(sub / f"{r.name}.password", passwords[r.name] + "\n"))
    urls = [
        f"{leaf_url_var(k)}=nats-leaf://{LEAF_USER}:{passwords[LEAF_USER]}@{hub}:{leaf_port}"
        for k, hub in enumerate(hubs, start=1)
    ]
    written.append(_private(folder / SERVER_ENV_FILE, "\n".join(urls) + "\n"))
    tls = folder / TLS_DIR
    natstls.make_ca(tls)
    for server in [*hubs, *leaves]:
        # localhost: the services on a server's own machine (a rack's
        # reducers on its leaf) connect there
        natstls.write_identity(
            tls, f"server-{server}", server, ("localhost", "127.0.0.1"), server=True
        )
    for n in nodes:
        natstls.write_identity(tls, f"node-{n}", n)
    for r in roles:
        if r.name != LEAF_USER and r.name not in nodes:
            natstls.write_identity(tls, f"role-{r.name}", r.name)
    written.append(tls)
    return written


def _private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path
