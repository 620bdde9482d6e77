"""The set-up the alert tests share (tests/transport/test_alert.py on
published batches, tests/testbed/test_alert_bed.py on a live bed): a site's
rules folder, a subscriber to the alerts on NATS, and ``hushmon alert``
started and waited for until it listens."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from hushmon.live.feed import connect

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
# `hushmon alert` says this on stderr once its subscription is made
LISTENING = "hushmon alert: live rules"


def site_rules(parent: Path, idle_alloc_min_s: int) -> Path:
    """A site's rules folder whose allocation counts as idle after
    idle_alloc_min_s seconds."""
    site = parent / "rules"
    site.mkdir()
    (site / "parameters.toml").write_text(f"idle_alloc_min_s = {idle_alloc_min_s}\n")
    return site


class AlertListener:
    """Every message on hm.alert.> from entering the block to leaving it, as
    (subject, alert, time.monotonic() when it arrived)."""

    def __init__(self, url: str, ready_s: float = 30) -> None:
        self.url = url
        self.ready_s = ready_s
        self.got: list[tuple[str, dict[str, Any], float]] = []
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        nc = await connect(self.url)

        async def on(msg: Any) -> None:
            self.got.append((msg.subject, json.loads(msg.data), time.monotonic()))

        await nc.subscribe("hm.alert.>", cb=on)
        await nc.flush()
        self._ready.set()
        while not self._stop.is_set():
            await asyncio.sleep(0.1)
        await nc.close()

    def __enter__(self) -> AlertListener:
        self._thread.start()
        if not self._ready.wait(self.ready_s):
            self._stop.set()
            raise AssertionError(f"no subscription to hm.alert.> within {self.ready_s:.0f} s")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(15)


def start_alert(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, wait_s: float = 60
) -> tuple[subprocess.Popen[str], str]:
    """`hushmon alert ARGS --json -`, returned once it subscribed (its
    LISTENING line): a sleep would have to guess how long its start takes on
    a busy machine. Returns the process and the stderr read so far; what
    stays unread comes with communicate()."""
    proc = subprocess.Popen(
        [*HUSHMON, "alert", *args, "--json", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    assert proc.stderr is not None
    seen = ""
    deadline_s = time.monotonic() + wait_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while LISTENING not in seen:
            left_s = deadline_s - time.monotonic()
            if left_s <= 0 or not sel.select(left_s):
                proc.kill()
                raise AssertionError(f"hushmon alert did not listen in {wait_s:.0f} s: {seen}")
            # the descriptor itself, not the text wrapper: a line left in the
            # wrapper's buffer would not wake the selector
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"hushmon alert ended before listening: {seen}")
            seen += chunk.decode(errors="replace")
    return proc, seen
