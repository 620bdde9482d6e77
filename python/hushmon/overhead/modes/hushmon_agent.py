"""hushmon-agent with its default sources, no hardware counters."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hushmon.agentclient import AgentClient
from hushmon.errors import HushmonError
from hushmon.overhead.modes.base import Processes, spawn, wait_until
from hushmon.paths import program


def start_agent(work: Path, period_s: float, extra: list[str], what: str) -> Processes:
    """The agent writing to a spool under ``work``; ready once its control
    socket answers (it has opened every source by then)."""
    try:
        exe = program("hushmon-agent")
    except HushmonError as exc:
        raise HushmonError(str(exc), exit_code=1) from exc
    work.mkdir(parents=True, exist_ok=True)
    # A Unix socket path must fit in 108 bytes; the study folder may not.
    sock_dir = Path(tempfile.mkdtemp(prefix="hm-overhead-"))
    sock = sock_dir / "agent.sock"
    log = work / "agent.log"
    argv = [
        str(exe), "--spool-dir", str(work / "spool"), "--socket", str(sock),
        "--period-ms", str(round(period_s * 1000)), *extra,
    ]  # fmt: skip
    proc = spawn(argv, log)
    client = AgentClient(sock, timeout_s=1.0)
    try:
        wait_until(lambda: sock.exists() and client.answers(), proc, what, log)
    finally:
        if proc.poll() is not None:
            shutil.rmtree(sock_dir, ignore_errors=True)
    return Processes([proc], after_stop=[lambda: shutil.rmtree(sock_dir, ignore_errors=True)])


class HushmonAgent:
    name = "hushmon"
    description = "hushmon-agent, default sources, no hardware counters (--pmu none)"

    def missing(self) -> str | None:
        try:
            program("hushmon-agent")
        except HushmonError as exc:
            return str(exc)
        return None

    def start(self, work: Path, period_s: float) -> Processes:
        return start_agent(work, period_s, ["--pmu", "none"], "hushmon-agent")


MODE = HushmonAgent()
