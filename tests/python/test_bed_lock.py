"""The bed lock (hushmon.testbed.bedlock) on a lock file of the test's own:
taken in turn with other processes, straight through under the engineers'
``flock LOCK CMD`` (an ancestor holds it), re-entrant in one process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hushmon.testbed.bedlock import BedLockTimeout, bed_lock, flock_holders, held_here

TAKE = (
    "import sys; from pathlib import Path; from hushmon.testbed.bedlock import bed_lock\n"
    "with bed_lock(Path(sys.argv[1]), limit_s=float(sys.argv[2])):\n"
    "    print('held', flush=True)\n"
)


def _holder(lock: Path) -> subprocess.Popen[bytes]:
    """A process beside the test (not above it) holding LOCK until killed."""
    # its own session: the kill ends sleep too, which holds flock(1)'s descriptor
    proc = subprocess.Popen(["flock", str(lock), "sleep", "60"], start_new_session=True)
    deadline_s = time.monotonic() + 30
    while not flock_holders(lock):
        assert time.monotonic() < deadline_s, "flock(1) never took the lock"
        time.sleep(0.05)
    return proc


@pytest.fixture
def flock_tool() -> None:
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is not installed (util-linux)")


def test_a_command_under_flock_of_the_same_file_goes_straight_on(
    tmp_path: Path, flock_tool: None
) -> None:
    lock = tmp_path / "bed.lock"
    # flock(1) holds the lock and waits for its child: the child must not
    # wait for it (the limit would fail it in 5 s; it passes at once)
    run = subprocess.run(
        ["flock", str(lock), sys.executable, "-c", TAKE, str(lock), "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "held"
    assert "waiting" not in run.stderr


def test_a_shell_that_holds_the_lock_on_its_descriptor_lets_its_commands_through(
    tmp_path: Path, flock_tool: None
) -> None:
    lock = tmp_path / "bed.lock"
    # flock(1) takes the lock for the shell's descriptor 9 and exits: the pid
    # /proc/locks names is gone; the shell (our parent, kept alive by the
    # line after) holds the lock, the command does not inherit descriptor 9
    script = f'exec 9>"{lock}"; flock 9; "$@" 9>&-; rc=$?; exit $rc'
    run = subprocess.run(
        ["bash", "-c", script, "sh", sys.executable, "-c", TAKE, str(lock), "5"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "held" and "waiting" not in run.stderr


def test_a_lock_held_beside_us_is_waited_for_and_named(tmp_path: Path, flock_tool: None) -> None:
    lock = tmp_path / "bed.lock"
    holder = _holder(lock)
    said: list[str] = []
    try:
        assert not held_here(lock)
        too_long = pytest.raises(BedLockTimeout, match="stayed held for 1 s by pid")
        with too_long, bed_lock(lock, limit_s=1, notice=said.append):
            pass
        assert len(said) == 1 and said[0].startswith("hushmon: waiting for the bed lock")
        assert f"pid {holder.pid}" in said[0]
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    # flock(1) is reaped; its sleep, which shares the lock, may still be dying
    deadline_s = time.monotonic() + 30
    while flock_holders(lock):
        assert time.monotonic() < deadline_s, "the killed holder kept the lock"
        time.sleep(0.05)
    # free again: taken at once, and re-entrant inside
    with bed_lock(lock, limit_s=5, notice=said.append):
        assert held_here(lock)
        with bed_lock(lock, limit_s=1, notice=said.append):
            pass
    assert len(said) == 1
    assert flock_holders(lock) == []
