"""Helpers of the live bed tests: running the CLI, checking the machine can
build a bed, a handle on a bed that is up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.testbed import livecheck
from hushmon.testbed.bedlock import bed_lock

__all__ = ["DATA_PARENT", "HUSHMON", "LiveBed", "bed_lock", "bed_unavailable", "bed_up", "hushmon"]

HUSHMON = livecheck.HUSHMON
# Nodes have private /tmp: the bed's data must live elsewhere.
DATA_PARENT = Path("/var/tmp")


def bed_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the test bed needs root"
    for tool in (
        "ip",
        "tc",
        "nsenter",
        "unshare",
        "slurmctld",
        "slurmd",
        "munged",
        "slurmdbd",
        "mariadbd",
    ):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} is not installed (scripts/install-deps.sh)"
    probe = f"hushmon-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make network namespaces: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def hushmon(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return livecheck.cli(*args, timeout=timeout, env=env)


@contextmanager
def bed_up(*options: str) -> Iterator[tuple[dict[str, Any], Path]]:
    """`hushmon testbed up OPTIONS` as a user runs it, in a fresh data folder:
    yields (its --json report, the data folder); `down` and the folder
    removed after, also when the test fails.

    Holds the bed lock (/tmp/hushmon-bed.lock) from before `up` to after
    `down`, so a test run and an engineer's `flock /tmp/hushmon-bed.lock CMD`
    take the bed in turn; under such a flock (an ancestor holds the lock) it
    goes straight on (hushmon.testbed.bedlock)."""
    data = DATA_PARENT / f"hushmon-test-bed-{uuid.uuid4().hex[:8]}"
    with bed_lock():
        up = hushmon("testbed", "up", *options, "--data-dir", str(data), "--json", "-")
        try:
            if up.returncode != 0:
                raise AssertionError(f"testbed up {' '.join(options)} failed: {up.stderr.strip()}")
            yield json.loads(up.stdout), data
        finally:
            hushmon("testbed", "down")
            shutil.rmtree(data, ignore_errors=True)


@dataclass
class LiveBed:
    info: dict[str, Any]
    data: Path

    @property
    def env(self) -> dict[str, str]:
        return dict(self.info["env"])

    def node_exec(
        self, node: str, *command: str, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.info["node_exec"], node, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
