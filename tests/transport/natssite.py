"""A real nats-server set up as `deploy secrets` sets up a site: TLS on,
clients verified against the site's CA, the logins and permissions of
natsusers (service roles and one login per node), and how a test logs in
as any of them (the environment a hushmon client reads, or a nats-py
connection)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats

from hushmon.transport import natsusers as nu
from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig
from hushmon.transport.natstls import TlsFiles, client_context

NODES = ("n1", "n2", "a1", "a2")
RACKS = ("r1", "r2")  # a login reduce-<rack> each
CLIENT_VARS = nu.CLIENT_ENV_VARS


@dataclass
class Site:
    server: LocalNatsServer
    secrets: Path
    errors: dict[str, list[str]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def log(self) -> str:
        return self.server.log_path.read_text(errors="replace")

    def tls_files(self, user: str) -> TlsFiles:
        stem = f"node-{user}" if user in NODES else f"role-{user}"
        if user == nu.LEAF_USER:  # a leaf logs in with its server's certificate
            stem = "server-leaf1"
        return TlsFiles.under(self.secrets / nu.TLS_DIR, stem)

    def password_file(self, user: str) -> Path:
        return self.secrets / (nu.NODES_DIR if user in NODES else "") / f"{user}.password"

    def env(self, user: str, password_file: Path | None = None) -> dict[str, str]:
        """A hushmon client's environment for this login (TLS included)."""
        return {
            "HUSHMON_NATS_USER": user,
            "HUSHMON_NATS_PASSWORD_FILE": str(password_file or self.password_file(user)),
            **self.tls_files(user).env(),
        }

    def context(self, user: str) -> ssl.SSLContext:
        return client_context(self.tls_files(user))

    async def connect(self, user: str, **options: Any) -> Any:
        """A nats-py connection as ``user``; the server's async errors
        (permission violations) collect in self.errors[user]."""
        errors = self.errors.setdefault(user, [])

        async def on_error(exc: Exception) -> None:
            errors.append(str(exc))

        if user in NODES or user.startswith("reduce-"):
            # a node or a reducer reads its own inbox only (natsusers)
            options.setdefault("inbox_prefix", nu.inbox_prefix(user))
        return await nats.connect(
            self.url,
            user=user,
            password=self.password_file(user).read_text().strip(),
            tls=self.context(user),
            error_cb=on_error,
            max_reconnect_attempts=0,
            **options,
        )


def client_env(env: dict[str, str]) -> dict[str, str]:
    """os.environ with exactly the login and TLS settings in env."""
    full = {k: v for k, v in os.environ.items() if k not in CLIENT_VARS}
    return {**full, **env}


@contextmanager
def secure_site(tmp_path: Path) -> Iterator[Site]:
    secrets = tmp_path / "secrets"
    nu.generate_secrets(secrets, ["127.0.0.1"], ["leaf1"], list(NODES), 7422, list(RACKS))
    cfg = NatsServerConfig(
        name="secure",
        store_dir=tmp_path / "js",
        users_block=(secrets / nu.USERS_FILE).read_text(),
        tls=TlsFiles.under(secrets / nu.TLS_DIR, "server-127.0.0.1"),
    )
    with LocalNatsServer(cfg, tmp_path) as server:
        yield Site(server, secrets)
