"""Prometheus node exporter (Debian prometheus-node-exporter), default
collectors, scraped once per period by a small scraper in this process.

A Prometheus server would scrape from another machine; the scraper here does
only what the node sees of that: one HTTP GET of /metrics per period."""

from __future__ import annotations

import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.overhead.modes.base import Processes, spawn, wait_until
from hushmon.procstat import task_cpu_s

EXE = "prometheus-node-exporter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            response.read()
        return True
    except OSError:
        return False


class Scraper:
    """Scrapes ``url`` at every multiple of the period (wall clock), as
    Prometheus does at a fixed interval."""

    def __init__(self, url: str, period_s: float) -> None:
        self.url, self.period_s = url, period_s
        self.scrapes = self.failures = 0
        self.native_id: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="scraper", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        self.native_id = threading.get_native_id()
        while True:
            now = time.time()
            if self._stop.wait(self.period_s - now % self.period_s):
                return
            self.scrapes += 1
            if not scrape(self.url):
                self.failures += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_s(self) -> float:
        """The scraper thread's CPU seconds (what scraping costs this node)."""
        if self.native_id is None or not self._thread.is_alive():
            return 0.0
        return task_cpu_s(f"/proc/self/task/{self.native_id}")


class NodeExporter:
    name = "node_exporter"
    description = "Prometheus node exporter, default collectors, scraped once per period"

    def missing(self) -> str | None:
        return None if shutil.which(EXE) else f"{EXE} not installed (scripts/install-deps.sh)"

    def start(self, work: Path, period_s: float) -> Processes:
        exe = shutil.which(EXE)
        if exe is None:
            raise HushmonError(f"{EXE} not installed (scripts/install-deps.sh)", exit_code=1)
        work.mkdir(parents=True, exist_ok=True)
        port = free_port()
        log = work / "node_exporter.log"
        # An empty textfile directory: the Debian default points at a
        # system folder other tools may fill.
        (work / "textfile").mkdir(exist_ok=True)
        proc = spawn(
            [exe, f"--web.listen-address=127.0.0.1:{port}",
             f"--collector.textfile.directory={work / 'textfile'}"],
            log,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/metrics"
        wait_until(lambda: scrape(url), proc, EXE, log)
        scraper = Scraper(url, period_s)
        return Processes(
            [proc],
            before_stop=[scraper.stop],
            counters={"scrapes": lambda: scraper.scrapes, "failures": lambda: scraper.failures},
            extra_cpu_s=[scraper.cpu_s],
        )


MODE = NodeExporter()
