"""Who is asking ``hushmon serve``: the operator's token (an admin), a
user's own token, or a user named by the site's reverse proxy.

- **The operator's token** (``--token-file`` or the one printed at the
  start) sees everything, as before per-user access existed.
- **Per-user tokens**: ``hushmon serve token --user NAME --tokens-dir DIR``
  makes one, prints it once and keeps only its SHA-256 in ``DIR/NAME``
  (0600), so a copy of the folder lets no one in. A request carrying it is
  NAME's; the folder is read again when it changes (a token revoked by
  deleting its file stops working within a second).
- **A reverse proxy** (Apache/nginx with the site's login, Open OnDemand)
  that authenticated the user passes the name in ``X-Remote-User``. The
  header is believed only on connections from the addresses given with
  ``--trusted-proxy`` or on the unix socket ``--unix`` (which the site lets
  only the proxy reach); from anyone else it is ignored, never trusted.

A name in ``--admin`` sees every job; anyone else sees only jobs whose
record names them as owner (history/records.py), and live jobs whose owner
is known to be them."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from hushmon.errors import HushmonError

USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
HASH_PREFIX = "sha256:"
RELOAD_EVERY_S = 1.0


@dataclass(frozen=True)
class Viewer:
    user: str  # "" for the operator's token
    admin: bool
    how: str  # "token", "user-token", "proxy"

    @property
    def owner_filter(self) -> str | None:
        """The owner whose jobs alone this viewer may see (None: all)."""
        return None if self.admin else self.user

    def to_json(self) -> dict[str, object]:
        return {"user": self.user, "admin": self.admin, "how": self.how}


def check_user_name(name: str) -> str:
    if not USER_NAME.fullmatch(name):
        raise HushmonError(
            f"user name {name!r}: 1-64 letters, digits or _.@- (not starting with . @ -)"
        )
    return name


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def make_user_token(tokens_dir: Path, user: str) -> str:
    """A new token for ``user`` (replacing theirs); only its hash is kept."""
    check_user_name(user)
    tokens_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    path = tokens_dir / user
    tmp = tokens_dir / f".{user}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{HASH_PREFIX}{token_hash(token)}\n")
    tmp.replace(path)
    return token


@dataclass
class UserTokens:
    """The per-user token folder, hash -> user, read again when it changes."""

    folder: Path
    by_hash: dict[str, str] = field(default_factory=dict)
    _seen: tuple[int, int] = (-1, -1)
    _checked: float = 0.0

    def load(self) -> UserTokens:
        try:
            st = self.folder.stat()
        except OSError as exc:
            raise HushmonError(f"--tokens-dir {self.folder}: {exc.strerror}") from exc
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise HushmonError(
                f"--tokens-dir {self.folder} is open to others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}): chmod 700 {self.folder}"
            )
        self._read()
        return self

    def _read(self) -> None:
        st = self.folder.stat()
        self._seen = (st.st_mtime_ns, st.st_ino)
        found: dict[str, str] = {}
        for path in self.folder.iterdir():
            if not USER_NAME.fullmatch(path.name) or not path.is_file():
                continue
            try:
                line = path.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            if line.startswith(HASH_PREFIX):
                found[line[len(HASH_PREFIX) :]] = path.name
        self.by_hash = found

    def user_of(self, token: str) -> str | None:
        now = time.monotonic()
        if now - self._checked >= RELOAD_EVERY_S:
            self._checked = now
            try:
                st = self.folder.stat()
                if (st.st_mtime_ns, st.st_ino) != self._seen:
                    self._read()
            except OSError:
                self.by_hash = {}  # the folder is gone: no user token works
        # a dict lookup by the token's hash: its time tells nothing of the token
        return self.by_hash.get(token_hash(token))


@dataclass(frozen=True)
class ProxyTrust:
    """Whose ``X-Remote-User`` header is believed."""

    addresses: frozenset[str] = frozenset()
    unix: bool = False  # connections on the --unix socket
    header: str = "x-remote-user"

    def user_from(self, headers: dict[str, str], peer_ip: str, on_unix: bool) -> str | None:
        """The proxy's user, or None (header absent, or not from a trusted proxy)."""
        if not ((on_unix and self.unix) or peer_ip in self.addresses):
            return None
        name = headers.get(self.header, "").strip()
        return name if name and USER_NAME.fullmatch(name) else None
