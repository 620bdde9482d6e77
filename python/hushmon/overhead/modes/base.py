"""What every monitoring mode provides, and process helpers they share."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hushmon.errors import HushmonError
from hushmon.procstat import pid_cpu_s

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


class Running(Protocol):
    def stop(self) -> None: ...

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the mode's processes have used so far."""
        ...

    def dead(self) -> str | None:
        """Which of the mode's daemons has exited, if one has."""
        ...


class Mode(Protocol):
    name: str
    description: str

    def missing(self) -> str | None:
        """Why this mode cannot run here (a package to install), or None."""
        ...

    def start(self, work: Path, period_s: float) -> Running:
        """Starts the agent with its output under ``work``; raises HushmonError."""
        ...


@dataclass
class Processes:
    """Daemons a mode started, plus what to undo first (a scraper thread)."""

    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    before_stop: list[Callable[[], None]] = field(default_factory=list)
    after_stop: list[Callable[[], None]] = field(default_factory=list)
    # What the mode did, read at any time (e.g. {"scrapes": ...}): tests
    # check a mode really works, not only that its process is up.
    counters: dict[str, Callable[[], int]] = field(default_factory=dict)
    # CPU seconds of work done inside this process for the mode (a scraper).
    extra_cpu_s: list[Callable[[], float]] = field(default_factory=list)

    def dead(self) -> str | None:
        for p in self.procs:
            if p.poll() is not None:
                return f"{Path(str(p.args[0])).name} exited with code {p.returncode}"  # type: ignore[index]
        return None

    def cpu_s(self) -> float:
        """User + system CPU seconds of the daemons (while they run) and of
        any work this process does for the mode."""
        total = sum(pid_cpu_s(p.pid) for p in self.procs if p.poll() is None)
        return total + sum(f() for f in self.extra_cpu_s)

    def stop(self) -> None:
        for undo in self.before_stop:
            undo()
        for proc in reversed(self.procs):
            stop_process(proc)
        for undo in self.after_stop:
            undo()


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    try:
        with log.open("ab") as out:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env={**os.environ, **env} if env else None,
            )
    except OSError as exc:
        raise HushmonError(f"cannot start {argv[0]}: {exc}", exit_code=1) from exc


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, wait, SIGKILL if it hangs."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_until(
    ready: Callable[[], bool], proc: subprocess.Popen[bytes], what: str, log: Path
) -> None:
    """Waits for ``ready()``; a process that exits or a timeout is an error
    with the end of its log."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop_process(proc)
            raise HushmonError(
                f"{what} exited with code {proc.returncode} at start{log_tail(log)}", exit_code=1
            )
        if ready():
            return
        time.sleep(0.05)
    stop_process(proc)
    raise HushmonError(f"{what} not ready after {START_TIMEOUT_S:.0f} s{log_tail(log)}", 1)


def log_tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return (": " + " | ".join(text[-lines:])) if text else ""
