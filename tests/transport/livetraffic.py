"""Live summaries for the live-view tests: agent-like raw batches published
each second (JetStream, the contract's headers) for 4 nodes in 2 racks
running job 42 with an application metric, reduced by the real
``hushmon-reduce --rack`` (one per rack) and ``--top``.

A plain module (not conftest): tests import it by name."""

from __future__ import annotations

import asyncio
import random
import subprocess
import threading
import time
from pathlib import Path

from hushmon.transport.wire import batch_headers, raw_subject

RACKS = {"r1": ["n1", "n2"], "r2": ["n3", "n4"]}
JOB = "42"
EPOCH = 1_700_000_000_000_000_000
GRACE_MS = 300


def batch(host: str, t_ns: int, k: int, rng: random.Random) -> str:
    """One period of a node: cpu rises with k, so a view that updates shows it."""
    rank = int(host[1:]) - 1
    user = 10.0 + (k * 7 + rank * 3) % 80
    iter_s = 0.5 + 0.1 * rank + 0.01 * k
    lines = [
        f"cpu,host={host},cpu=total,scope=host user_pct={user},system_pct={rng.uniform(1, 5):.3f},"
        f"idle_pct={100 - user - 3} {t_ns}",
        f"mem,host={host},scope=host used_pct={20 + rank} {t_ns}",
        f"load,host={host},scope=host load1={1 + rank * 0.5} {t_ns}",
        f"net,host={host},iface=eth0 rx_bytes_per_s={1e6 * (rank + 1)},tx_bytes_per_s=2e5 {t_ns}",
        f"net,host={host},iface=lo rx_bytes_per_s=9e9,tx_bytes_per_s=9e9 {t_ns}",
        f"hushmon_agent,host={host} period_ms=1000i {t_ns}",
        f"job,host={host},job={JOB} active=1i {t_ns}",
        f"app,host={host},job={JOB},rank={rank},metric=iter_s count=10i,mean={iter_s},"
        f"min={iter_s * 0.9},max={iter_s * 1.1},sum={iter_s * 10} {t_ns}",
    ]
    return "\n".join(lines) + "\n"


class LiveTraffic:
    """Reducers and a publisher thread; ``stop()`` ends all of it."""

    def __init__(self, url: str, bin_dir: Path, logs: Path) -> None:
        self.url = url
        self.procs: list[subprocess.Popen[bytes]] = []
        self.published = 0
        self.failed = 0
        self._stop = threading.Event()
        common = ["--url", url, "--period-grace-ms", str(GRACE_MS)]
        for args in [["--rack", r] for r in RACKS] + [["--top"]]:
            log = (logs / f"reduce-{args[-1]}.log").open("wb")
            self.procs.append(
                subprocess.Popen(
                    [str(bin_dir / "hushmon-reduce"), *common, *args],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
            )
        self._thread = threading.Thread(target=lambda: asyncio.run(self._publish()), daemon=True)
        self._thread.start()

    async def _publish(self) -> None:
        import nats

        nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.5)
        js = nc.jetstream()
        rng = random.Random(7)
        seq = 0
        try:
            while not self._stop.is_set():
                seq += 1
                t_ns = time.time_ns() // 1_000_000_000 * 1_000_000_000
                for rack, hosts in RACKS.items():
                    for host in hosts:
                        text = batch(host, t_ns, seq, rng)
                        hdrs = batch_headers(host, EPOCH, seq, text.count("\n"))
                        try:
                            await js.publish(raw_subject(rack, host), text.encode(), headers=hdrs)
                            self.published += 1
                        except Exception:  # noqa: BLE001  # server away: as an agent, go on
                            self.failed += 1
                await asyncio.sleep(1.0 - (time.time() % 1.0) + 0.05)
        finally:
            await nc.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
