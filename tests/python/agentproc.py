"""A real hushmon-agent daemon for tests that talk to its control socket
(test_agent_send, test_slurm_scripts, test_agent_scope)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class RunningAgent:
    """A real agent daemon with its control socket in a temporary folder."""

    def __init__(self, bin_dir: Path, work: Path, *args: str) -> None:
        self.bin = bin_dir / "hushmon-agent"
        self.sock = work / "agent.sock"
        self.log = work / "agent.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.bin),
                    "--socket",
                    str(self.sock),
                    "--spool-dir",
                    str(work / "spool"),
                    "--sources",
                    "self",
                    "--host",
                    "n1",
                    *args,
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        deadline = time.monotonic() + 10
        while not self.answers():
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "agent did not answer on its socket"
            time.sleep(0.02)

    def answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(str(self.sock))
                s.sendall(b"status\n")
                return s.recv(4096).startswith(b"ok")
        except OSError:
            return False

    def status(self) -> str:
        """The agent's `status` line, asked as the Slurm scripts ask it."""
        proc = run_agent(self.bin.parent, "--socket", str(self.sock), "--send", "status")
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def run_agent(bin_dir: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """hushmon-agent with these arguments, to its end (a hang fails at ``timeout``)."""
    return subprocess.run(
        [str(bin_dir / "hushmon-agent"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@contextmanager
def running_agent(bin_dir: Path, work: Path, *args: str) -> Iterator[RunningAgent]:
    a = RunningAgent(bin_dir, work, *args)
    try:
        yield a
    finally:
        a.stop()
