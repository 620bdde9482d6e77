"""Talking to a running ``hushmon-agent`` over its control socket
(docs/formats.md): one request line, one answer line.

Below ``run``, ``testbed``, ``transport`` and ``overhead``, which all speak to
agents: it depends on nothing of theirs. Every failure is an
:class:`AgentError` with a message the caller prints as a warning.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from hushmon.datadir import DataDir

# How long one control request may take before the agent counts as not answering.
REQUEST_TIMEOUT_S = 3.0


class AgentError(Exception):
    """The agent is missing, does not answer, or refused a request."""


def exchange_line(path: str, line: str, timeout_s: float) -> bytes:
    """One request line to an agent's control socket and its one-line answer
    (the bytes up to and with the newline, or what came before the close).
    Raises OSError, or TimeoutError when the agent does not answer in time."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        sock.sendall(line.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply


@dataclass
class AgentClient:
    """Request/response over the agent's Unix control socket: one line each way."""

    socket_path: Path
    timeout_s: float = REQUEST_TIMEOUT_S

    def request(self, line: str) -> str:
        """Sends one request; returns the text after ``ok`` or raises AgentError."""
        try:
            reply = exchange_line(str(self.socket_path), line, self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise AgentError(f"control socket {self.socket_path}: {exc}") from exc
        text = reply.decode(errors="replace").strip()
        if text == "ok" or text.startswith("ok "):
            return text[2:].strip()
        if text.startswith("error"):
            raise AgentError(f"agent refused '{line}': {text[5:].strip() or 'no reason given'}")
        raise AgentError(f"agent gave an unexpected reply to '{line}': {text!r}")

    def status(self) -> dict[str, str]:
        """The ``status`` pairs (period, samples, jobs, spool...)."""
        pairs: dict[str, str] = {}
        for item in self.request("status").split():
            key, sep, value = item.partition("=")
            if sep:
                pairs[key] = value
        return pairs

    def answers(self) -> bool:
        try:
            self.status()
        except AgentError:
            return False
        return True

    def samples(self) -> int | None:
        """How many periods the agent has sampled, if it says."""
        value = self.status().get("samples")
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    def wait_for_next_sample(self, period_s: float) -> None:
        """Returns once the agent has taken a sample after this call (so the
        interval that is running now is on record), or after about two
        periods if the agent does not report its sample count."""
        deadline = time.monotonic() + 2 * period_s + 1.0
        start = self.samples()
        while time.monotonic() < deadline:
            time.sleep(min(0.05, period_s / 4))
            now = self.samples()
            if start is not None and now is not None and now > start:
                return
        if start is not None:
            raise AgentError(f"no new sample within {2 * period_s + 1.0:.1f} s")


def running_agent(data: DataDir) -> AgentClient | None:
    """The agent answering on the data directory's socket, if any."""
    client = AgentClient(data.agent_socket)
    if data.agent_socket.exists() and client.answers():
        return client
    return None


def remove_stale_socket(data: DataDir) -> None:
    """A socket file nobody answers on is left from a crash; an agent
    starting on the same path must not trip over it."""
    path = data.agent_socket
    if path.is_socket() and not AgentClient(path, timeout_s=0.5).answers():
        try:
            os.unlink(path)
        except OSError as exc:
            raise AgentError(f"cannot remove the stale socket {path}: {exc}") from exc
