"""Who may do what on hushmon's NATS servers (docs/transport.md, "Users and
permissions"), and how a hushmon client proves who it is.

Over NATS the uid in a control request (Hm-Uid) is only a claim, so the
servers themselves must keep steering to the admins: every client logs in
as one of the roles below and the server enforces the role's subjects.

Passwords, not nkeys or JWT creds: nats-py and libnats take a user and a
password with no extra package or tool (nkeys need the Python ``nkeys``
module and a key generator, creds files the operator/JWT mode and its
resolver); the servers read the passwords from their environment (an
EnvironmentFile the admin generates with ``python -m
hushmon.transport.deploy passwords``), so the configuration files in git
hold none, and each client reads its own from a file only its service can
read. A client's user: ``$HUSHMON_NATS_USER``, its password file:
``$HUSHMON_NATS_PASSWORD_FILE``; with neither it connects without a user
(the test bed, a server without authorization)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import string
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

USER_ENV = "HUSHMON_NATS_USER"
PASSWORD_FILE_ENV = "HUSHMON_NATS_PASSWORD_FILE"

# JetStream's API as a leaf's clients reach it, and the hub's domain form.
_JS_API = ("$JS.API.>", "$JS.hub.API.>")
# What no role but admin may do: steer the agents, drop the buffered data.
_NEVER = (
    "hm.ctl.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.hub.API.STREAM.DELETE.>",
    "$JS.hub.API.STREAM.PURGE.>",
)


@dataclass(frozen=True)
class Role:
    """A login and the subjects it may publish and subscribe to (empty
    allow lists with admin=True: everything)."""

    name: str
    why: str
    publish: tuple[str, ...] = ()
    publish_deny: tuple[str, ...] = _NEVER
    subscribe: tuple[str, ...] = ("_INBOX.>",)
    allow_responses: bool = False  # may answer requests it received (reply subjects)
    admin: bool = False

    @property
    def password_var(self) -> str:
        return f"HM_NATS_PASS_{self.name.upper()}"


# One table: a new client kind is a new line (docs/transport.md lists them).
ROLES: tuple[Role, ...] = (
    Role(
        "agent",
        "node agents: publish their batches, take control requests for their host or all, "
        "answer them",
        publish=("hm.raw.>",),
        subscribe=("hm.ctl.host.*", "hm.ctl.all", "_INBOX.>"),
        allow_responses=True,
    ),
    Role(
        "reduce",
        "hushmon-reduce (rack and top): pull raw batches or partials, publish summaries",
        publish=("hm.sum.>", "$JS.ACK.>", *_JS_API),
    ),
    Role(
        "collect",
        "hushmon collect: declares the streams, pulls both into the store",
        publish=("$JS.ACK.>", *_JS_API),
        publish_deny=("hm.ctl.>",),
    ),
    Role(
        "viewer",
        "hushmon top, serve, transport status: read summaries and batches, cannot steer",
        publish=_JS_API,
        subscribe=("hm.sum.>", "hm.raw.>", "_INBOX.>"),
    ),
    Role("admin", "hushmon ctl (and everything else): the only role that may steer", admin=True),
)


def role(name: str) -> Role:
    for r in ROLES:
        if r.name == name:
            return r
    raise HushmonError(f"no NATS role {name!r} (roles: {', '.join(r.name for r in ROLES)})")


def _quoted(subjects: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{s}"' for s in subjects) + "]"


def render_users(roles: Sequence[Role] = ROLES) -> str:
    """An ``authorization`` block: each role's password from the server's
    environment ($HM_NATS_PASS_<ROLE>), its permissions."""
    lines = ["authorization {", "  users = ["]
    for r in roles:
        entry = f'    {{ user: "{r.name}", password: ${r.password_var}'
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
    return "\n".join(lines)


LEAF_USER = "leaf"
LEAF_PASSWORD_VAR = "HM_NATS_PASS_LEAF"


def leaf_url_var(k: int) -> str:
    """The environment variable holding hub k's leaf URL with the leaf login."""
    return f"HM_NATS_HUB{k}_LEAF_URL"


def client_auth() -> dict[str, Any]:
    """nats.connect() keyword arguments for this process's login (none when
    $HUSHMON_NATS_USER is unset)."""
    user = os.environ.get(USER_ENV, "")
    path = os.environ.get(PASSWORD_FILE_ENV, "")
    if not user and not path:
        return {}
    if not user or not path:
        raise HushmonError(f"set both {USER_ENV} and {PASSWORD_FILE_ENV} (or neither)")
    try:
        password = Path(path).read_text().strip()
    except OSError as exc:
        raise HushmonError(f"{PASSWORD_FILE_ENV} {path}: {exc.strerror or exc}") from None
    if not password:
        raise HushmonError(f"{PASSWORD_FILE_ENV} {path} is empty")
    return {"user": user, "password": password}


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
    """32 random letters (182 bits). Letters only: nats-server reads an
    environment variable's value as configuration text, and a value such as
    "4-2x..." is taken for a date or a number and refused."""
    return "".join(secrets.choice(string.ascii_letters) for _ in range(32))


def generate_passwords(folder: Path, hubs: Sequence[str], leaf_port: int) -> list[Path]:
    """One random password per role (``<role>.password``, 0600) and the
    servers' environment file (``nats-server.env``: every password and the
    hubs' leaf URLs with the leaf login). Refuses to overwrite: a second run
    would lock every client out."""
    folder.mkdir(parents=True, exist_ok=True)
    env_path = folder / "nats-server.env"
    if env_path.exists():
        raise HushmonError(f"{env_path} exists: remove the folder's files to make new passwords")
    written = []
    env_lines = []
    for r in ROLES:
        pw = new_password()
        env_lines.append(f"{r.password_var}={pw}")
        written.append(_private(folder / f"{r.name}.password", pw + "\n"))
    leaf_pw = new_password()
    env_lines.append(f"{LEAF_PASSWORD_VAR}={leaf_pw}")
    for k, hub in enumerate(hubs, start=1):
        env_lines.append(f"{leaf_url_var(k)}=nats-leaf://{LEAF_USER}:{leaf_pw}@{hub}:{leaf_port}")
    written.append(_private(env_path, "\n".join(env_lines) + "\n"))
    return written


def _private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path
