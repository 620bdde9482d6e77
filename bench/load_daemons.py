"""The processes of bench_transport_load.py: started with their logs, their
resident size and CPU sampled every second, stopped with SIGTERM, and
grouped by kind (the daemon a site runs: hub, leaf, rack reducer, top
reducer, collector; the load generator apart)."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hushmon.procstat import process_cpu_s, rss_kib

SAMPLE_EVERY_S = 1.0
# kind -> what the name of its processes starts with
KINDS = (
    ("leaf nats-server", "leaf-"),
    ("hub nats-server", "hub"),
    ("rack reducer", "reduce-r"),
    ("top reducer", "reduce-top"),
    ("collector", "collect"),
    ("loadgen (the agents)", "loadgen"),
)


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # t, KiB, CPU s

    @property
    def kind(self) -> str:
        return next(k for k, prefix in KINDS if self.name.startswith(prefix))

    def at(self, t: float) -> tuple[float, int, float] | None:
        """The last sample at or before t."""
        before = [s for s in self.samples if s[0] <= t]
        return before[-1] if before else None

    def cpu_between(self, t_from: float, t_to: float) -> float:
        """CPU seconds spent between two sample times (0 when unknown)."""
        a, b = self.at(t_from) or (self.samples[0] if self.samples else None), self.at(t_to)
        return b[2] - a[2] if a and b else 0.0

    def cpu_total(self) -> float:
        return self.samples[-1][2] - self.samples[0][2] if len(self.samples) > 1 else 0.0


class Sampler:
    """RSS and CPU of every daemon, every SAMPLE_EVERY_S, in a thread."""

    def __init__(self, daemons: list[Daemon]) -> None:
        self.daemons = daemons
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def _run(self) -> None:
        while not self._stop.is_set():
            t = self.now()
            for d in self.daemons:
                if d.proc.poll() is None:
                    rss, cpu = rss_kib(d.proc.pid), process_cpu_s(f"/proc/{d.proc.pid}/stat")
                    if rss > 0:  # 0: it exited between poll and read (its CPU reads 0 too)
                        d.samples.append((t, rss, cpu))
            self._stop.wait(SAMPLE_EVERY_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def start(name: str, argv: list[str], tmp: Path) -> Daemon:
    """Its stderr to tmp/NAME.log, its stdout to tmp/NAME.out."""
    log = tmp / f"{name}.log"
    with log.open("wb") as err, (tmp / f"{name}.out").open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    return Daemon(name, proc, log)


def stop(d: Daemon, timeout_s: float = 60) -> int:
    if d.proc.poll() is None:
        d.proc.send_signal(signal.SIGTERM)
    try:
        return d.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        return d.proc.wait()


def last_line(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""
