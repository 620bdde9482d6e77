"""Talking to ``hushmon-agent``: the control socket (docs/formats.md) and, in
embedded mode, starting and stopping an agent of our own.

Nothing here may stop the user's command from running: every failure is an
:class:`AgentError` with a message the caller prints as a warning.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hushmon.datadir import DataDir

# How long one control request may take before the agent counts as not answering.
REQUEST_TIMEOUT_S = 3.0
# How long a freshly started agent may take to open its socket.
START_TIMEOUT_S = 10.0
# How long SIGTERM may take (the agent closes its spool file on the way out).
STOP_TIMEOUT_S = 10.0

_PR_SET_PDEATHSIG = 1


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


def _die_with_parent() -> None:
    """In the agent's process: get SIGTERM if hushmon dies, so an embedded
    agent never outlives the run that started it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the agent is still stopped by stop() in the normal case


@dataclass
class EmbeddedAgent:
    """An agent this run started; stopped (and its spool closed) by stop()."""

    process: subprocess.Popen[bytes]
    client: AgentClient
    log_path: Path
    argv: list[str] = field(default_factory=list)

    @classmethod
    def start(
        cls, agent_path: Path, data: DataDir, period_ms: int, host: str | None = None
    ) -> EmbeddedAgent:
        data.create()
        argv = [
            str(agent_path),
            "--spool-dir",
            str(data.spool),
            "--socket",
            str(data.agent_socket),
            "--period-ms",
            str(period_ms),
        ]
        if host:
            argv += ["--host", host]
        log_path = data.run / "agent.log"
        try:
            with log_path.open("ab") as log:
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    preexec_fn=_die_with_parent,
                    # Its own group: the user's Ctrl-C reaches it only through us.
                    start_new_session=True,
                )
        except OSError as exc:
            raise AgentError(f"cannot start {agent_path}: {exc}") from exc
        agent = cls(process, AgentClient(data.agent_socket), log_path, argv)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AgentError(
                    f"{agent_path.name} exited with code {process.returncode} at start"
                    f"{agent.log_tail()}"
                )
            if agent.client.answers():
                return agent
            time.sleep(0.05)
        agent.stop()
        raise AgentError(f"{agent_path.name} did not open {data.agent_socket} in time")

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return (": " + " | ".join(text[-lines:])) if text else ""

    def stop(self) -> int | None:
        """SIGTERM, wait, SIGKILL if it hangs. Returns the agent's exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


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
