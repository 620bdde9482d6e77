"""The whole NATS transport under a cluster's load: simulated agents ->
rack leaves -> rack reducers -> hub -> top reducer and collector.

Started on this machine (loopback, free ports): a hub (one JetStream
server, domain "hub", HM_RAW and HM_SUM), one leaf per rack connected to
it, two rack reducers per rack sharing the rack's durable consumer (as the
test bed and a real cluster run them), the top reducer and ``hushmon
collect`` (DuckDB store) on the hub. Then ``hushmon-loadgen publish
--live`` per rack plays the agents: H/R hosts each, one realistic batch
(12 lines, ~2 KB, the agent's default sources) per host at the end of each
1 s period, with the contract's headers, through the rack's leaf.

Printed:
1. the raw JetStream publish rate on the hub (loadgen as fast as acks
   allow, before the run; the stream is purged after): the physical limit;
2. every minute (every 10 s with --quick), per daemon: resident size (MiB)
   and CPU share; the collector's lag (messages not yet stored);
3. end-to-end latency p50/p99 from the end of a period to its rack
   partials and its job-wide summary (seen on the hub), and to the store
   (collector lag in seconds of load);
4. the rack reducers' node-batches per CPU-second under this load, and the
   collector's ingest rate, each as a ratio to (1);
5. loss accounting from the store: batches published, stored, lost,
   duplicated (by host and sequence number), and memory growth of each
   daemon from the first minute to the end (flat = under 10 %).

Not a test (tests/transport/test_transport_load.py runs --quick and checks
the counts only). Figures go to docs/transport.md ("The whole path under
load") with the command and the load average.

    .venv/bin/python bench/bench_transport_load.py [--quick] [--agents 1000]
        [--racks 2] [--minutes 10] [--json FILE]
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
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from loadgen import kv, publish_argv

from hushmon.paths import build_bin_dir
from hushmon.procstat import process_cpu_s, rss_kib
from hushmon.transport.natsserver import (
    JS_DOMAIN,
    LEAF_PING_INTERVAL_S,
    LEAF_PING_MAX,
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    free_port,
    site_consumers,
)

REPO = Path(__file__).resolve().parent.parent
HUSHMON = REPO / ".venv/bin/hushmon"
SAMPLE_EVERY_S = 1.0
FLAT_GROWTH = 0.10


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    samples: list[tuple[float, int, float]] = field(default_factory=list)  # t, KiB, CPU s


class Sampler:
    """RSS and CPU of every daemon, every SAMPLE_EVERY_S."""

    def __init__(self, daemons: list[Daemon]) -> None:
        self.daemons = daemons
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic() - self.t0
            for d in self.daemons:
                if d.proc.poll() is None:
                    rss, cpu = rss_kib(d.proc.pid), process_cpu_s(f"/proc/{d.proc.pid}/stat")
                    d.samples.append((t, rss, cpu))
            self._stop.wait(SAMPLE_EVERY_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def start(name: str, argv: list[str], tmp: Path) -> Daemon:
    log = tmp / f"{name}.log"
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=log.open("wb"), stdin=subprocess.DEVNULL
    )
    return Daemon(name, proc, log)


def stop(d: Daemon, timeout_s: float = 60) -> int:
    if d.proc.poll() is None:
        d.proc.send_signal(signal.SIGTERM)
    try:
        return d.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        return d.proc.wait()


def raw_publish_rate(hub_url: str, hosts: int) -> float:
    """Messages/s of loadgen publishing as fast as acks allow, then the
    stream is emptied so the run starts clean."""
    n = max(20_000, hosts * 20)
    r = subprocess.run(
        publish_argv(hub_url, "burst", hosts, n, "--epoch", "1"),
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        sys.exit(f"bench_transport_load: loadgen burst failed: {r.stderr.strip()}")

    async def purge() -> None:
        import nats

        nc = await nats.connect(hub_url)
        await nc.jetstream().purge_stream("HM_RAW")
        await nc.close()

    asyncio.run(purge())
    return kv(r.stdout)["msgs_per_s"]


class Watch:
    """Arrivals of rack partials and job summaries on the hub, and the
    collector's lag, sampled in a thread of its own."""

    def __init__(self, hub_url: str) -> None:
        self.hub_url = hub_url
        self.rack: list[tuple[float, int]] = []  # arrival (real time), period time_ns
        self.job: list[tuple[float, int, int]] = []  # + sources merged
        self.lag: list[tuple[float, int]] = []  # monotonic, unstored messages
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
                info = await js.consumer_info("HM_RAW", "collect-raw")
                self.lag.append(
                    (time.monotonic(), int(info.num_pending or 0) + int(info.num_ack_pending or 0))
                )
            except Exception as exc:  # noqa: BLE001 - the consumer appears once collect starts
                self.lag.append((time.monotonic(), -1))
                del exc
            await asyncio.sleep(SAMPLE_EVERY_S)
        await nc.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def stream_backlog(hub_url: str) -> int:
    """Messages of HM_RAW the collector's consumer has not acked."""

    async def ask() -> int:
        import nats

        nc = await nats.connect(hub_url)
        info = await nc.jetstream().consumer_info("HM_RAW", "collect-raw")
        await nc.close()
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    return asyncio.run(ask())


def latency_s(arrivals: list[tuple[float, int]] | list[tuple[float, int, int]]) -> np.ndarray:
    """Seconds from the end of each period to the first message about it."""
    first: dict[int, float] = {}
    for a in arrivals:
        first.setdefault(a[1], a[0])
    return np.array([t - (p + 1_000_000_000) / 1e9 for p, t in first.items()])


def store_counts(db: Path, hosts: int, periods: int) -> tuple[int, int, int]:
    """(batches missing, values stored more than once for one (series,
    time), values stored) for the agents n00000.. with seq 1..periods."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        stored = con.execute(
            "SELECT count(DISTINCT (host, seq)) FROM transport_batches "
            "WHERE host LIKE 'n%' AND seq BETWEEN 1 AND ?",
            [periods],
        ).fetchone()[0]
        values, dup = con.execute(
            """SELECT coalesce(sum(c), 0), coalesce(sum(c - 1), 0) FROM (
                   SELECT count(*) AS c FROM samples v JOIN series s USING (series_id)
                   WHERE s.host LIKE 'n%' GROUP BY v.series_id, v.time_ns)"""
        ).fetchone()
    finally:
        con.close()
    return hosts * periods - int(stored), int(dup), int(values)


def table_row(t: float, daemons: list[Daemon], lag: int) -> str:
    cells = []
    for d in daemons:
        s = [x for x in d.samples if x[0] <= t]
        cells.append(f"{s[-1][1] / 1024:6.1f}" if s else "     -")
    return f"{t:6.0f} s " + " ".join(cells) + f"  {lag:>8}"


def cpu_share(d: Daemon, t_from: float, t_to: float) -> float:
    s = [x for x in d.samples if t_from <= x[0] <= t_to]
    if len(s) < 2 or s[-1][0] <= s[0][0]:
        return 0.0
    return (s[-1][2] - s[0][2]) / (s[-1][0] - s[0][0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI size: 100 agents, 30 s")
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--racks", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument(
        "--grace-ms",
        type=int,
        default=500,
        help="the reducers' --period-grace-ms (default two periods: ~1.5 s more per level)",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args()
    if a.quick:
        a.agents, a.minutes = 100, 0.5
    if a.agents < a.racks or a.racks < 1 or a.minutes <= 0:
        print("bench_transport_load: need --racks >= 1, --agents >= --racks, --minutes > 0")
        return 2
    periods = max(1, round(a.minutes * 60))
    per_rack = a.agents // a.racks
    agents = per_rack * a.racks
    print(f"# bench_transport_load: {' '.join(sys.argv[1:]) or '(defaults)'}")
    print(
        f"# {agents} agents in {a.racks} racks at 1 Hz for {periods} s; machine: "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()}"
    )
    with tempfile.TemporaryDirectory(prefix="hm-bench-load-") as tmp_name:
        tmp = Path(tmp_name)
        return run(tmp, a, periods, per_rack)


def run(tmp: Path, a: argparse.Namespace, periods: int, per_rack: int) -> int:
    hub_leaf_port = free_port()
    hub = LocalNatsServer(
        NatsServerConfig(
            name="hub", store_dir=tmp / "hub", js_domain=JS_DOMAIN, leaf_listen_port=hub_leaf_port
        ),
        tmp,
    )
    servers = [hub]
    daemons: list[Daemon] = []
    try:
        hub.start()
        racks = [f"r{k + 1}" for k in range(a.racks)]
        ensure_streams(hub.url, consumers=site_consumers(racks))
        raw_rate = raw_publish_rate(hub.url, per_rack)
        print(f"1. raw JetStream publish on the hub: {raw_rate:,.0f} msgs/s (the physical limit)")
        leaves = {}
        for rack in racks:
            leaf = LocalNatsServer(
                NatsServerConfig(
                    name=f"leaf-{rack}",
                    store_dir=tmp / f"leaf-{rack}",
                    jetstream=False,
                    js_api_to_domain=JS_DOMAIN,
                    leaf_remotes=[f"nats-leaf://127.0.0.1:{hub_leaf_port}"],
                    ping_interval_s=LEAF_PING_INTERVAL_S,
                    ping_max=LEAF_PING_MAX,
                ),
                tmp,
            )
            servers.append(leaf.start())
            leaves[rack] = leaf
        time.sleep(1.0)  # leaves join the hub
        reduce_bin = str(build_bin_dir() / "hushmon-reduce")
        for rack in racks:
            for k in (1, 2):
                daemons.append(
                    start(
                        f"reduce-{rack}-{k}",
                        [
                            reduce_bin,
                            "--rack",
                            rack,
                            "--url",
                            leaves[rack].url,
                            "--stats-every-s",
                            "5",
                            "--period-grace-ms",
                            str(a.grace_ms),
                        ],
                        tmp,
                    )
                )
        daemons.append(
            start(
                "reduce-top",
                [reduce_bin, "--top", "--url", hub.url, "--period-grace-ms", str(a.grace_ms)],
                tmp,
            )
        )
        db = tmp / "store.duckdb"
        daemons.append(
            start(
                "collect",
                [
                    str(HUSHMON),
                    "collect",
                    "--url",
                    hub.url,
                    "--db",
                    str(db),
                    "--json",
                    str(tmp / "collect.json"),
                ],
                tmp,
            )
        )
        servers_as_daemons = [
            Daemon(s.cfg.name, s.proc, s.log_path) for s in servers if s.proc is not None
        ]
        watched = servers_as_daemons + daemons
        sampler = Sampler(watched)
        watch = Watch(hub.url)
        time.sleep(2.0)  # consumers created
        gens = [
            start(
                f"loadgen-{rack}",
                publish_argv(
                    leaves[rack].url,
                    rack,
                    per_rack,
                    per_rack * periods,
                    "--live",
                    "--first-host",
                    str(k * per_rack),
                ),
                tmp,
            )
            for k, rack in enumerate(racks)
        ]
        for g in gens:
            g.log = tmp / f"{g.name}.log"
        step = 10.0 if a.quick else 60.0
        print(f"2. resident MiB per daemon every {step:.0f} s, and the collector's lag (messages):")
        print("         " + " ".join(f"{d.name[:6]:>6}" for d in watched) + "       lag")
        print("         (" + ", ".join(d.name for d in watched) + ")")
        next_row = step
        while any(g.proc.poll() is None for g in gens):
            time.sleep(0.5)
            t = time.monotonic() - sampler.t0
            if t >= next_row:
                lag = watch.lag[-1][1] if watch.lag else -1
                print(table_row(t, watched, lag), flush=True)
                next_row += step
        gen_failed = [g.name for g in gens if g.proc.returncode != 0]
        load_end = time.monotonic() - sampler.t0
        # the store catches up: the collector's consumer has nothing left
        drain_from = time.monotonic()
        while time.monotonic() - drain_from < 300:
            if watch.lag and watch.lag[-1][0] > drain_from and watch.lag[-1][1] == 0:
                break
            time.sleep(0.5)
        drain_s = time.monotonic() - drain_from
        time.sleep(3.0)  # the last partials and job summaries
        lag_at_end = watch.lag[-1][1] if watch.lag else -1
        print(table_row(time.monotonic() - sampler.t0, watched, lag_at_end))
        watch.stop()
        sampler.stop()
        rcs = {d.name: stop(d) for d in daemons}
        # what the collector had not taken when it was stopped is still in
        # HM_RAW (not lost): counted apart
        backlog = stream_backlog(hub.url)
    finally:
        for d in daemons:
            stop(d)
        for s in reversed(servers):
            s.stop()

    published = per_rack * a.racks * periods
    missing, dup_values, values = store_counts(db, per_rack * a.racks, periods)
    lost = missing - backlog
    collect = json.loads((tmp / "collect.json").read_text())
    rack_lat = latency_s(watch.rack)
    job_lat = latency_s(watch.job)
    # every agent's batch reaches a job summary of its period: the first
    # one, or a late one (a batch after the grace makes a further summary)
    merged: dict[int, int] = {}
    for _t, period, nsources in watch.job:
        merged[period] = merged.get(period, 0) + nsources
    complete = sum(1 for n in merged.values() if n == published // periods)
    first_full = len({j[1] for j in watch.job if j[2] >= published // periods})
    lagged = [lag for t, lag in watch.lag if lag >= 0]
    max_lag = max(lagged) if lagged else -1
    per_s = per_rack * a.racks
    print(
        f"3. latency end of period -> rack partial p50 {np.median(rack_lat):.2f} s, "
        f"p99 {np.percentile(rack_lat, 99):.2f} s ({len(rack_lat)} periods); "
        f"-> job summary p50 {np.median(job_lat):.2f} s, p99 {np.percentile(job_lat, 99):.2f} s "
        f"({len(job_lat)} periods: {first_full} whole in the first summary, {complete} whole "
        f"with the late ones); "
        f"-> store: collector lag at most {max_lag} messages = {max_lag / per_s:.2f} s of load, "
        f"drained {drain_s:.1f} s after the last period"
    )
    red = [d for d in daemons if d.name.startswith("reduce-r")]
    red_cpu = sum(d.samples[-1][2] for d in red if d.samples)
    red_batches = published / red_cpu if red_cpu > 0 else 0.0
    coll = next(d for d in daemons if d.name == "collect")
    coll_cpu = coll.samples[-1][2] if coll.samples else 0.0
    print(
        f"4. rack reducers: {red_cpu:.1f} CPU-s for {published} batches = {red_batches:,.0f} "
        f"node-batches per CPU-s at {per_s} batches/s offered (ratio to raw publish "
        f"{red_batches / raw_rate:.2f}); collector: {collect['batches_per_s']:.0f} batches/s "
        f"over its life, {coll_cpu:.1f} CPU-s = {published / coll_cpu if coll_cpu else 0:,.0f} "
        f"batches per CPU-s (ratio to raw publish "
        f"{(published / coll_cpu if coll_cpu else 0) / raw_rate:.2f})"
    )
    print(
        f"5. published {published} batches; lost = {lost}, duplicated = {dup_values}, "
        f"not collected yet = {backlog} (still in HM_RAW when the collector was stopped "
        f"{drain_s:.0f} s after the last period) "
        f"(values stored twice for one series and time; {values:,} values stored; "
        f"collector: {collect['duplicate_batches']} duplicates discarded, "
        f"{collect['redelivered']} redelivered, {collect['rejected_batches']} rejected)"
    )
    growth = {}
    # Memory is compared over the second half of the load: the reducers
    # remember published periods for --keep-s (300 s), so they grow until
    # then by design; and the drain after the load is not steady state.
    first_t = load_end / 2
    for d in servers_as_daemons + daemons:
        held = [s[1] for s in d.samples if first_t <= s[0] <= load_end]
        if held and held[0]:
            growth[d.name] = (held[-1] - held[0]) / held[0]
    flat = all(g < FLAT_GROWTH for g in growth.values())
    print(
        f"   memory from t={first_t:.0f} s to the end of the load: "
        + ", ".join(f"{k} {v * 100:+.0f} %" for k, v in growth.items())
        + (" (flat)" if flat else " (NOT flat)")
    )
    print(
        "   CPU share during the load: "
        + ", ".join(f"{d.name} {cpu_share(d, 0, load_end) * 100:.1f} %" for d in watched)
    )
    bad = [n for n, rc in rcs.items() if rc != 0] + gen_failed
    if bad:
        print(f"# exited non-zero: {', '.join(bad)} (logs were in {tmp})")
    print(f"# load average after: {os.getloadavg()}")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "agents": per_s,
                    "periods": periods,
                    "raw_publish_msgs_per_s": raw_rate,
                    "rack_latency_p50_s": float(np.median(rack_lat)),
                    "rack_latency_p99_s": float(np.percentile(rack_lat, 99)),
                    "job_latency_p50_s": float(np.median(job_lat)),
                    "job_latency_p99_s": float(np.percentile(job_lat, 99)),
                    "reducer_batches_per_cpu_s": red_batches,
                    "collector_batches_per_s": collect["batches_per_s"],
                    "published": published,
                    "periods_complete_in_job_summaries": complete,
                    "periods_whole_in_first_job_summary": first_full,
                    "lost": lost,
                    "not_collected_yet": backlog,
                    "duplicated": dup_values,
                    "memory_growth": growth,
                    "exited_non_zero": bad,
                },
                indent=1,
            )
        )
    return 0 if lost == 0 and dup_values == 0 and not bad else 1


if __name__ == "__main__":
    sys.exit(main())
