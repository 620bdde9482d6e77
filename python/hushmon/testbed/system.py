"""Running the system tools the bed is built with (ip, tc, slurm daemons),
each failure turned into a one-line HushmonError that says what was being
done."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from hushmon.errors import HushmonError

TOOL_TIMEOUT_S = 30.0


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise HushmonError(
            f"{what} needs root (network namespaces, bridges, tc, cgroups): run it with sudo"
        )


def tool(name: str, package: str) -> str:
    found = shutil.which(name) or next(
        (str(p) for p in (Path("/usr/sbin") / name, Path("/sbin") / name) if p.exists()), None
    )
    if found is None:
        raise HushmonError(f"{name} not found: install {package} (scripts/install-deps.sh)")
    return found


def run(
    argv: Sequence[str], what: str, *, check: bool = True, timeout: float = TOOL_TIMEOUT_S
) -> str:
    """Runs a tool; returns its stdout. ``what`` names the step for the error."""
    try:
        out = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, check=False
        )
    except OSError as exc:
        raise HushmonError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from exc
    except subprocess.TimeoutExpired as exc:
        raise HushmonError(f"{what}: {argv[0]} did not finish in {timeout:.0f} s") from exc
    if check and out.returncode != 0:
        reason = out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}"
        raise HushmonError(f"{what}: {reason.splitlines()[-1]}")
    return out.stdout


def ip(*args: str, what: str, netns: str | None = None, check: bool = True) -> str:
    argv = [tool("ip", "iproute2")]
    if netns:
        argv += ["-n", netns]
    return run([*argv, *args], what, check=check)


def tc(*args: str, what: str, netns: str | None = None) -> str:
    argv = [tool("tc", "iproute2")]
    if netns:
        argv += ["-n", netns]
    return run([*argv, *args], what)


def netns_list() -> list[str]:
    out = ip("netns", "list", what="listing network namespaces", check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(pid: int) -> bool:
    """Alive and not a zombie; a zombie child of ours (a daemon this process
    started, killed by a fault test) is reaped."""
    if not pid_alive(pid):
        return False
    if not _zombie(pid):
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    return False


def mem_available_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def stop_processes(pids: Sequence[int], grace_s: float = 8.0) -> list[int]:
    """SIGTERM, a grace period, then SIGKILL; returns the pids still alive."""
    left = [p for p in pids if p != os.getpid()]
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            left = [p for p in left if pid_alive(p) and not _zombie(p)]
            time.sleep(0.05)
        if not left:
            break
    return left


def spawn(
    argv: Sequence[str], log: Path, what: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Starts a daemon of the bed in its own session, its output appended to ``log``."""
    try:
        with log.open("ab") as out:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                env=None if env is None else {**os.environ, **env},
            )
    except OSError as exc:
        raise HushmonError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from exc
