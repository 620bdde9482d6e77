"""Whether a NATS server answers, before nats-py is asked to connect.

nats-py's first connect to a server that is down retries without end and
prints a traceback per try; a plain TCP connection first turns "down" into
one line for the user."""

from __future__ import annotations

import socket
from urllib.parse import urlparse


def reachable(url: str, timeout_s: float) -> str:
    """'' when a TCP connection to the server opens, else why not."""
    parsed = urlparse(url if "://" in url else f"nats://{url}")
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or 4222), timeout=timeout_s
        ):
            return ""
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
