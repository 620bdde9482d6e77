"""What bench_transport_load.py watches on the hub while the load runs: the
arrival of every rack partial and job summary, and the collectors' shared
raw consumer (messages not yet stored, and its ack floor), each second."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np

SAMPLE_EVERY_S = 1.0
RAW_CONSUMER = ("HM_RAW", "collect-raw")
SUM_CONSUMER = ("HM_SUM", "collect-sum")


class Watch:
    """Partials and summaries seen on the hub, and the collectors' lag,
    sampled in a thread of its own."""

    def __init__(self, hub_url: str) -> None:
        self.hub_url = hub_url
        self.rack: list[tuple[float, int]] = []  # arrival (real time), period time_ns
        self.job: list[tuple[float, int, int]] = []  # + sources merged
        # monotonic, messages not stored yet (pending + unacked; -1 unknown), ack floor
        self.lag: list[tuple[float, int, int]] = []
        self.sum_lag: list[tuple[float, int]] = []  # the same for the summaries' consumer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        import nats

        nc = await nats.connect(self.hub_url)
        js = nc.jetstream()

        async def on_rack(msg: object) -> None:
            p = json.loads(msg.data)  # type: ignore[attr-defined]
            self.rack.append((time.time(), int(p["time_ns"])))

        async def on_job(msg: object) -> None:
            p = json.loads(msg.data)  # type: ignore[attr-defined]
            self.job.append((time.time(), int(p["time_ns"]), len(p.get("sources", []))))

        await nc.subscribe("hm.sum.rack.>", cb=on_rack)
        await nc.subscribe("hm.sum.job.>", cb=on_job)
        while not self._stop.is_set():
            try:
                info = await js.consumer_info(*RAW_CONSUMER)
                unstored = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
                floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor else -1
                self.lag.append((time.monotonic(), unstored, floor))
            except Exception as exc:  # noqa: BLE001 - a slow answer under load is a gap
                self.lag.append((time.monotonic(), -1, -1))
                del exc
            try:
                info = await js.consumer_info(*SUM_CONSUMER)
                unstored = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
                self.sum_lag.append((time.monotonic(), unstored))
            except Exception as exc:  # noqa: BLE001 - as above
                self.sum_lag.append((time.monotonic(), -1))
                del exc
            await asyncio.sleep(SAMPLE_EVERY_S)
        await nc.close()

    def ack_floor(self) -> int:
        """The raw consumer's ack floor at the last sample that had one."""
        known = [floor for _t, _n, floor in self.lag if floor >= 0]
        return known[-1] if known else -1

    def unstored_at_end(self) -> int:
        return self.lag[-1][1] if self.lag else -1

    def lag_s(self, t_from: float, t_to: float, per_s: int) -> np.ndarray:
        """The collectors' lag in seconds of load (messages not stored / batches
        offered per second) at each sample between two monotonic times."""
        return np.array(
            [n / per_s for t, n, _f in self.lag if t_from <= t <= t_to and n >= 0], dtype=float
        )

    def sum_unstored(self, t_from: float, t_to: float) -> np.ndarray:
        """Summary messages not stored yet at each sample between two times."""
        return np.array([n for t, n in self.sum_lag if t_from <= t <= t_to and n >= 0], dtype=int)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def stream_backlog(hub_url: str) -> int:
    """Messages of HM_RAW the collectors' consumer has not acked."""

    async def ask() -> int:
        import nats

        nc = await nats.connect(hub_url)
        info = await nc.jetstream().consumer_info(*RAW_CONSUMER)
        await nc.close()
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    return asyncio.run(ask())


def purge_raw(hub_url: str) -> None:
    async def purge() -> None:
        import nats

        nc = await nats.connect(hub_url)
        await nc.jetstream().purge_stream(RAW_CONSUMER[0])
        await nc.close()

    asyncio.run(purge())


def latency_s(arrivals: list[tuple[float, int]] | list[tuple[float, int, int]]) -> np.ndarray:
    """Seconds from the end of each period to the first message about it."""
    first: dict[int, float] = {}
    for a in arrivals:
        first.setdefault(a[1], a[0])
    return np.array([t - (p + 1_000_000_000) / 1e9 for p, t in first.items()])
