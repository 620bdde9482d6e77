"""Embedded mode of ``hushmon run``: an agent of our own, started on the
data directory's socket and stopped (its spool closed) when the run ends.

The control-socket client it talks through is :mod:`hushmon.agentclient`.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hushmon.agentclient import AgentClient, AgentError
from hushmon.datadir import DataDir

# How long a freshly started agent may take to open its socket.
START_TIMEOUT_S = 10.0
# How long SIGTERM may take (the agent closes its spool file on the way out).
STOP_TIMEOUT_S = 10.0

_PR_SET_PDEATHSIG = 1


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
