"""The machine's one bed, taken in turn: an exclusive flock on
/tmp/hushmon-bed.lock, the file the engineers' convention
(``flock /tmp/hushmon-bed.lock CMD``) and bench/bench_findings.py lock.

A process whose ancestor holds the lock (``flock LOCK pytest ...``: flock(1)
holds it and waits for its child; ``exec 9>LOCK; flock 9; pytest ...``: the
shell's descriptor holds it) counts as holding it: taking it again would
wait for itself forever. The same check makes the lock re-entrant within one
process (a bed fixture's lock while a test takes it again)."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

LOCK_PATH = Path("/tmp/hushmon-bed.lock")
# Long enough for another engineer's bed work (minutes, by the convention),
# short enough that a forgotten holder fails a CI run in one line instead of
# hanging it.
WAIT_LIMIT_S = 1200.0


class BedLockTimeout(RuntimeError):
    pass


def _parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    # the command name in parentheses may hold spaces: the fields after it
    return int(stat.rsplit(")", 1)[1].split()[1])


def _self_and_ancestors() -> set[int]:
    pids: set[int] = set()
    pid = os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            pid = _parent_pid(pid)
        except (OSError, ValueError, IndexError):
            break
    return pids


def flock_holders(path: Path) -> list[int]:
    """Pids holding an flock on PATH, from /proc/locks (waiters, the lines
    with '->', left out). Matched by device and inode: /tmp may not be the
    only file system with that inode number."""
    try:
        st = path.stat()
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    # /proc/locks writes the device as hex major:minor, the inode in decimal
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = []
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        if fields[5] == where:
            holders.append(int(fields[4]))
    return holders


def _holds_by_descriptor(pid: int, path: Path) -> bool:
    """Whether PID has PATH open on a descriptor that holds its flock. The
    pid /proc/locks gives is the one that took the lock: after
    ``exec 9>LOCK; flock 9`` that is flock(1), gone, while the shell's
    descriptor (and its fdinfo) holds the lock."""
    try:
        want = path.stat()
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        try:
            st = fd.stat()
            if (st.st_dev, st.st_ino) != (want.st_dev, want.st_ino):
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue
        for line in info.splitlines():
            words = line.split()
            if words[:1] == ["lock:"] and "FLOCK" in words and "->" not in words:
                return True
    return False


def held_here(path: Path = LOCK_PATH) -> bool:
    """Whether this process or one above it holds the lock (by the pid that
    took it, or by a descriptor it holds)."""
    mine = _self_and_ancestors()
    if set(flock_holders(path)) & mine:
        return True
    return any(_holds_by_descriptor(pid, path) for pid in mine)


def _describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    words = " ".join(a.decode(errors="replace") for a in argv if a)
    return f"pid {pid} ({words[:160]})"


def _default_notice(text: str) -> None:
    # pytest captures fd 2: the terminal, where there is one, shows the wait
    # while it happens; the captured stderr keeps it for a failure's report
    print(text, file=sys.stderr, flush=True)
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(text + "\n")
    except OSError:
        pass


def _wait_in_queue(fh: TextIO, path: Path, limit_s: float) -> None:
    """A blocking flock (the kernel's queue: a poll would lose every race to
    flock(1)'s waiters), ended by an alarm after limit_s where signals can be
    had (the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        fcntl.flock(fh, fcntl.LOCK_EX)
        return

    def expired(signum: int, frame: object) -> None:
        holders = ", ".join(_describe(p) for p in flock_holders(path)) or "no one now"
        raise BedLockTimeout(f"the bed lock {path} stayed held for {limit_s:.0f} s by {holders}")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(max(1, int(limit_s)))
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def bed_lock(
    path: Path = LOCK_PATH,
    limit_s: float = WAIT_LIMIT_S,
    notice: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the bed lock for the block: at once when free or held above us;
    else a line saying who holds it, the wait, and a line when it is ours."""
    say = notice or _default_notice
    if held_here(path):
        yield
        return
    # an existing file is opened without O_CREAT: /tmp's protected_regular
    # refuses O_CREAT on another user's file there, even to root
    with path.open("r" if path.exists() else "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = ", ".join(_describe(p) for p in flock_holders(path)) or "another process"
            say(f"hushmon: waiting for the bed lock {path}, held by {holders}")
            start_s = time.monotonic()
            _wait_in_queue(fh, path, limit_s)
            say(f"hushmon: got the bed lock {path} after {time.monotonic() - start_s:.0f} s")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
