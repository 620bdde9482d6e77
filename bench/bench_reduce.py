"""hushmon-reduce's throughput, latency and memory, next to what NATS
JetStream alone does on this machine.

Prints, in one run against a local nats-server (file storage, the streams
of docs/transport.md):

1. The load generator (c/transport/loadgen.c, `hushmon-loadgen publish`):
   N realistic batches (the first period of
   tests/fixtures/spool/testbed-4n2r/n1-3.lp, host, seq and time varied;
   H hosts of one rack) published into HM_RAW as fast as the stream acks
   them: the raw JetStream publish rate.
2. The raw consume rate: `hushmon-loadgen consume` pulls and acks the same
   N messages without reading them (wall rate and messages per CPU second
   of the client).
3. The rack reducer draining the same N batches (started after they are
   in the stream): node-batches per CPU second of the reducer process
   (its utime + stime: the goal is >= 50,000 per core) and per wall
   second, with the ratios to (2).
3b. The top reducer: P rack partials (R racks of H/R hosts each, per
   period; the sensors of a real partial from (3), sources varied) published
   to hm.sum.rack.<rack>, then drained by `hushmon-reduce --top`: rack
   partials merged per top-reducer CPU second.
4. End-to-end latency: H hosts publishing one batch per period each at the
   period's end on the real-time clock (loadgen --live), the reducer
   running; p50/p99 of (partial seen on hm.sum.rack.> - end of its period),
   per batch, with the grace the reducer waits before publishing.
5. The reducer's resident size (VmRSS) over both phases.

Not a test: nothing is asserted. Figures go to docs/transport.md
("Reducer throughput") with the command and the machine's load.

    .venv/bin/python bench/bench_reduce.py [--quick] [--batches N] [--hosts H]
        [--live-periods P] [--grace-ms G] [--top-partials P] [--racks R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from loadgen import kv, publish_argv

from hushmon.paths import build_bin_dir
from hushmon.procstat import process_cpu_s, rss_kib
from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    site_consumers,
)

# A reducer draining a backlog as fast as it can: deep pulls (its consumer's
# MaxAckPending, declared by main() as the admin step), short grace.
DRAIN_MAX_ACK_PENDING = 200000
DRAIN_FLAGS = ("--fetch-batch", "512", "--period-grace-ms", "200", "--keep-s", "60")


class Reducer:
    """hushmon-reduce --rack r1 with its RSS sampled every 0.5 s."""

    def __init__(
        self, url: str, log: Path, *args: str, level: tuple[str, ...] = ("--rack", "r1")
    ) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [
                str(build_bin_dir() / "hushmon-reduce"),
                *level,
                "--url",
                url,
                "--stats-every-s",
                "1",
                *args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb"),
        )
        self.rss: list[tuple[float, int]] = []
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.rss.append((time.monotonic() - self.t0, rss_kib(self.proc.pid)))
            time.sleep(0.5)

    def batches(self) -> float:
        stats = [ln for ln in self.log.read_text().splitlines() if " stats " in ln]
        return kv(stats[-1]).get("batches", 0.0) if stats else 0.0

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        final = [ln for ln in self.log.read_text().splitlines() if " final " in ln]
        if self.proc.returncode != 0 or not final:
            tail = "\n".join(self.log.read_text().splitlines()[-5:])
            print(f"# reducer exited with {self.proc.returncode}, its log ends:\n{tail}")
        return kv(final[-1]) if final else {}


async def drained(
    url: str, n: int, t0: float, stream: str = "HM_RAW", consumer: str = "reduce-r1"
) -> float:
    """Seconds from t0 until the consumer has delivered n messages and has
    none unacked (its last summaries published), polled every 50 ms."""
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    try:
        while time.monotonic() - t0 < 600:
            try:
                info = await js.consumer_info(stream, consumer)
            except Exception:  # noqa: BLE001 - not created yet
                info = None
            if (
                info
                and (info.delivered.stream_seq or 0) >= n
                and info.num_pending == 0
                and (info.num_ack_pending == 0)
            ):
                break
            await asyncio.sleep(0.05)
        return time.monotonic() - t0
    finally:
        await nc.close()


def loadgen(*args: str) -> dict[str, float]:
    r = subprocess.run(
        [str(build_bin_dir() / "hushmon-loadgen"), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        sys.exit(f"bench_reduce: hushmon-loadgen {args[0]} failed: {r.stderr.strip()}")
    return kv(r.stdout)


async def watch_partials(url: str, seconds: float, out: list[tuple[float, int, int]]) -> None:
    """(arrival on the real-time clock, period time_ns, batches in it)."""
    import nats

    nc = await nats.connect(url)

    async def on_msg(msg: object) -> None:
        payload = json.loads(msg.data)  # type: ignore[attr-defined]
        out.append((time.time(), int(payload["time_ns"]), len(payload["sources"])))

    await nc.subscribe("hm.sum.rack.>", cb=on_msg)
    await asyncio.sleep(seconds)
    await nc.close()


async def publish_rack_partials(
    url: str, racks: int, hosts_per_rack: int, periods: int
) -> tuple[int, int, int]:
    """racks x periods rack partials for job "bench-top", the sensors of the
    first partial the rack reducer published in (3), hosts t<rack>-<i>.
    Returns (partials, sensors per partial, bytes per partial)."""
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    sub = await js.subscribe("hm.sum.rack.>", ordered_consumer=True)
    model = json.loads((await sub.next_msg(timeout=10)).data)
    await sub.unsubscribe()
    sensors = json.dumps(model["sensors"], separators=(",", ":"))
    t0 = 1_800_000_000_000_000_000
    size = 0
    for period in range(periods):
        t = t0 + period * 1_000_000_000
        pending = []
        for r in range(racks):
            hosts = [[f"t{r}-{i}", 1, period + 1] for i in range(hosts_per_rack)]
            head = json.dumps(
                {
                    "v": 1,
                    "level": "rack",
                    "rack": f"t{r}",
                    "job": "bench-top",
                    "time_ns": t,
                    "sources": hosts,
                },
                separators=(",", ":"),
            )
            payload = (head[:-1] + ',"sensors":' + sensors + "}").encode()
            size = len(payload)
            ack = await js.publish_async(
                f"hm.sum.rack.t{r}", payload, headers={"Nats-Msg-Id": f"bench-top:{r}:{t}"}
            )
            pending.append(ack)
        await asyncio.gather(*pending)
    await nc.close()
    return racks * periods, len(model["sensors"]), size


def top_phase(url: str, tmp: Path, a: argparse.Namespace) -> None:
    periods = max(1, a.top_partials // a.racks)
    n, nsensors, size = asyncio.run(
        publish_rack_partials(url, a.racks, max(1, a.hosts // a.racks), periods)
    )
    before = sum_rack_messages(url)
    top = Reducer(
        url,
        tmp / "reduce-top.log",
        *DRAIN_FLAGS,
        level=("--top",),
    )
    t0 = time.monotonic()
    wall = asyncio.run(drained(url, before, t0, "HM_SUM", "reduce-top"))
    busy_cpu = process_cpu_s(f"/proc/{top.proc.pid}/stat")
    time.sleep(1.0)
    final = top.stop()
    merged = final.get("partials_in", 0.0)
    print(
        f"3b. top reducer: {int(merged)} rack partials in ({n} of {nsensors} sensors, "
        f"{max(1, a.hosts // a.racks)} sources, {size:,} B each; {a.racks} racks x {periods} "
        f"periods), {int(final.get('summaries', 0))} job summaries, CPU {busy_cpu:.2f} s, "
        f"wall {wall:.2f} s"
    )
    print(
        f"   {merged / busy_cpu:,.0f} rack partials per top-reducer CPU-s, "
        f"{merged * max(1, a.hosts // a.racks) / busy_cpu:,.0f} node-batches per CPU-s merged"
    )


def sum_rack_messages(url: str) -> int:
    """Messages on hm.sum.rack.> in HM_SUM (what reduce-top will deliver)."""

    async def count() -> int:
        import nats

        nc = await nats.connect(url)
        js = nc.jetstream()
        info = await js.stream_info("HM_SUM", subjects_filter="hm.sum.rack.>")
        await nc.close()
        return sum((info.state.subjects or {}).values())

    return asyncio.run(count())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI size: 20,000 batches, 5 live periods")
    ap.add_argument("--batches", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--live-periods", type=int, default=20)
    ap.add_argument("--grace-ms", type=int, default=500, help="reducer grace in the live phase")
    ap.add_argument("--top-partials", type=int, default=5000, help="rack partials for the top")
    ap.add_argument("--racks", type=int, default=25, help="racks the top reducer merges")
    a = ap.parse_args()
    if a.quick:
        a.batches, a.live_periods, a.hosts, a.top_partials = 20_000, 5, 200, 1000
    a.batches -= a.batches % a.hosts
    print(f"# bench_reduce: {' '.join(sys.argv[1:]) or '(defaults)'}")
    print(f"# machine: {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="hm-bench-reduce-") as tmp:
        server = LocalNatsServer(
            NatsServerConfig(name="bench", store_dir=Path(tmp) / "js"), Path(tmp)
        )
        server.start()
        try:
            consumers = site_consumers(["r1"], reduce_max_ack_pending=DRAIN_MAX_ACK_PENDING)
            ensure_streams(server.url, consumers=consumers)
            run(server.url, Path(tmp), a)
        finally:
            server.stop()
    print(f"# load average after: {os.getloadavg()}")


def run(url: str, tmp: Path, a: argparse.Namespace) -> None:
    pub = loadgen(*publish_argv(url, "r1", a.hosts, a.batches)[1:])
    print(
        f"1. publish  {int(pub['published'])} batches of {pub['batch_bytes']:.0f} B "
        f"({int(pub['lines_per_batch'])} lines), {a.hosts} hosts: "
        f"{pub['msgs_per_s']:,.0f} msgs/s"
    )
    raw = loadgen(
        "consume",
        "--url",
        url,
        "--stream",
        "HM_RAW",
        "--filter",
        "hm.raw.r1.>",
        "--count",
        str(a.batches),
    )
    print(
        f"2. raw consume (pull + ack): {raw['msgs_per_s']:,.0f} msgs/s wall, "
        f"{raw['msgs_per_cpu_s']:,.0f} msgs per client CPU-s"
    )

    red = Reducer(
        url,
        tmp / "reduce.log",
        *DRAIN_FLAGS,
    )
    t0 = time.monotonic()
    wall = asyncio.run(drained(url, a.batches, t0))
    busy_cpu = process_cpu_s(f"/proc/{red.proc.pid}/stat")
    time.sleep(1.0)  # the last partials go out
    rss_drain = list(red.rss)
    final = red.stop()
    per_core = final["batches"] / busy_cpu
    per_wall = final["batches"] / wall
    print(
        f"3. reducer: {int(final['batches'])} batches, {int(final['lines'])} lines, "
        f"{int(final['partials'])} partials, CPU {busy_cpu:.2f} s, wall {wall:.2f} s "
        "(to the last ack, 200 ms grace included)"
    )
    print(
        f"   {per_core:,.0f} node-batches per reducer CPU-s (goal >= 50,000), "
        f"{per_core * int(pub['lines_per_batch']):,.0f} lines per CPU-s; "
        f"{per_wall:,.0f} per wall s"
    )
    print(
        f"   ratio to raw consume: per CPU-s {per_core / raw['msgs_per_cpu_s']:.2f}, "
        f"wall {per_wall / raw['msgs_per_s']:.2f}; to raw publish (wall) "
        f"{per_wall / pub['msgs_per_s']:.2f}"
    )

    top_phase(url, tmp, a)

    # 4. live: hosts publish at each period's end; latency from then to the partial.
    red = Reducer(
        url,
        tmp / "reduce-live.log",
        "--period-grace-ms",
        str(a.grace_ms),
    )
    seen: list[tuple[float, int, int]] = []
    watch_s = a.live_periods + 3 + a.grace_ms / 1000
    watcher = threading.Thread(target=lambda: asyncio.run(watch_partials(url, watch_s, seen)))
    watcher.start()
    time.sleep(0.5)
    live = loadgen(
        *publish_argv(
            url, "r1", a.hosts, a.hosts * a.live_periods, "--live", "--epoch", str(time.time_ns())
        )[1:]
    )  # not the ids of phase 1
    watcher.join()
    live_final = red.stop()
    lat = np.repeat([arr - (t + 1e9) / 1e9 for arr, t, _ in seen], [n for *_, n in seen])
    if len(lat):
        print(
            f"4. live: {a.hosts} hosts x {a.live_periods} periods of 1 s ({live['published']:.0f}"
            f" batches), grace {a.grace_ms} ms: latency end of period -> partial p50 "
            f"{np.percentile(lat, 50):.3f} s, p99 {np.percentile(lat, 99):.3f} s over {len(lat)} "
            f"batches; late {int(live_final.get('late', 0))}"
        )
    print(
        f"5. reducer RSS: drain phase {min(k for _, k in rss_drain) / 1024:.1f}-"
        f"{max(k for _, k in rss_drain) / 1024:.1f} MiB; live phase samples (MiB, every 0.5 s): "
        + " ".join(f"{k / 1024:.1f}" for _, k in red.rss[:: max(1, len(red.rss) // 12)])
    )


if __name__ == "__main__":
    main()
