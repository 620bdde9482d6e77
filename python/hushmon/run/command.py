"""Running the user's command in its own process group, so a Ctrl-C (or a
SIGTERM from a batch system) stops the whole job - mpirun and everything it
started - while ``hushmon run`` itself lives on to keep the data."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from hushmon.errors import HushmonError

# After the first Ctrl-C the job gets this long to stop by itself (mpirun
# passes the signal to its ranks) before the group is killed.
GRACE_S = 10.0
FORWARDED = (signal.SIGINT, signal.SIGTERM)
STDERR_FD = 2


@dataclass
class CommandResult:
    exit_code: int
    interrupted_by: int | None  # the first signal we received, if any
    started_ns: int
    ended_ns: int
    error: str | None = None  # why the command could not start

    @property
    def duration_s(self) -> float:
        return (self.ended_ns - self.started_ns) / 1e9


def exit_code_of(returncode: int) -> int:
    """A shell's convention: killed by signal N -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signum)


def session_members(sid: int, proc_root: Path = Path("/proc")) -> list[int]:
    """Processes in session ``sid``. mpirun puts each rank in a process group
    of its own, but they stay in the session we created for the command, so
    the session is what holds the whole job."""
    members = []
    for entry in proc_root.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 3 and fields[3] == str(sid):
            members.append(int(entry.name))
    return members


def kill_session(sid: int) -> None:
    """SIGKILL to every process of the command's session (ours only: the
    session was created for the command and is named by its leader's pid)."""
    _signal_group(sid, signal.SIGKILL)
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_in_group(
    command: Sequence[str],
    on_signal: Callable[[int], None] | None = None,
    stdout_to_stderr: bool = False,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Runs ``command`` in a new session (its own process group, no terminal
    signals); SIGINT/SIGTERM sent to us are passed to its process group, a
    second one (or GRACE_S without an exit) kills the whole session.
    ``stdout_to_stderr``: the command writes its stdout to our stderr (ours
    is taken, e.g. by ``--json -``). ``env``: its environment (default ours).
    Returns its exit code."""
    if not command:
        raise HushmonError("no command given (hushmon run [options] -- COMMAND ...)")
    received: list[int] = []
    first_signal_at: list[float] = []

    started_ns = time.time_ns()
    try:
        proc = subprocess.Popen(
            list(command),
            start_new_session=True,
            stdout=STDERR_FD if stdout_to_stderr else None,
            env=None if env is None else dict(env),
        )
    except OSError as exc:
        # The shell's codes: 127 not found, 126 found but not runnable.
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        reason = exc.strerror or str(exc)
        return CommandResult(code, None, started_ns, time.time_ns(), f"{command[0]}: {reason}")

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:
            first_signal_at.append(time.monotonic())
            _signal_group(proc.pid, signum)
            if on_signal is not None:
                on_signal(signum)
        else:
            kill_session(proc.pid)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        while True:
            try:
                returncode = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if first_signal_at and time.monotonic() - first_signal_at[0] > GRACE_S:
                    kill_session(proc.pid)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        # The leader is gone; anything it left behind in its session goes too.
        kill_session(proc.pid)
    return CommandResult(
        exit_code_of(returncode), received[0] if received else None, started_ns, time.time_ns()
    )
