"""The whole NATS transport under a cluster's load: simulated agents ->
rack leaves -> rack reducers -> hub -> top reducer and K collectors, with
jobs starting and ending and their digests built while collection goes on.

Started on this machine (loopback, free ports): a hub (one JetStream
server, domain "hub", HM_RAW and HM_SUM), one leaf per rack connected to
it, two rack reducers per rack sharing the rack's durable consumer (as the
test bed and a real cluster run them), the top reducer and K ``hushmon
collect`` processes on the hub sharing the raw consumer, all writing one
store (a lake: ``--store lake``; the embedded DuckDB file allows one
writer and no reader, ``--store duckdb`` runs one collector and no
digests). On a lake, when hushmon collect has ``--summaries-only``, the K
collectors take raw batches only (``--raw-only``) and one more takes the
summaries only, the layout docs/transport.md gives a site (no raw group
waits unacked behind summary work); before it, the first of the K took both.
Then ``hushmon-loadgen publish --live`` per rack plays the
agents: H/R hosts each, one realistic batch (the agent's default sources,
~2 KB) per host at the end of each 1 s period, with the contract's
headers, through the rack's leaf. Jobs of 40 % down to 1 % of the nodes
start and end at different minutes (their hosts' batches carry the agent's
``job`` lines: ``--job`` of hushmon-loadgen); once a job's last period is in
the store, ``hushmon digest JOB`` runs on it, timed, and its digest.json is
checked, while the collectors go on.

Printed:
1. the raw JetStream publish rate on the hub (loadgen as fast as acks
   allow, before the run; the stream is purged after): the physical limit;
2. every minute (every 10 s with --quick), per daemon: CPU share and
   resident MiB over that minute, and the collectors' lag (seconds of load
   not yet stored);
3. latency from the end of a period to its rack partials and job-wide
   summary (seen on the hub); the collectors' lag p50/p99 in seconds (goal
   p99 <= 5 s) and from the store, the delay until a collector took each
   batch;
4. each daemon kind's CPU per batch and per 1000 agents over the run, and
   the projection to 10,000 nodes with its arithmetic; how many agents this
   machine's CPUs hold;
5. loss accounting from the store: batches published, stored, lost,
   duplicated (by host, epoch and sequence number), values stored twice;
   the store's bytes per stored value;
6. memory growth of each daemon from the first minute to the last minute
   of the load (flat = under 10 %), and each daemon's resident size at the
   start, after the warm-up (--warmup-s, 360 s: the reducers' --keep-s
   window full) and at the end, with its growth after the warm-up;
7. each job's digest: wait for its data, wall time, CPU, peak memory,
   checks, and how many raw messages the collectors stored meanwhile.

Not a test (tests/transport/test_transport_load.py runs --quick and checks
the counts only). Figures go to docs/transport.md ("The whole path under
load", "Sizing a site") with the command and the load average;
bench/sizing.py turns the --json output into a site's sizing table.

    .venv/bin/python bench/bench_transport_load.py [--quick] [--agents 10000]
        [--racks 2] [--minutes 10] [--collectors 2] [--engine E]
        [--store auto|lake|duckdb] [--jobs 6] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from load_daemons import Daemon, Sampler, last_line, start, stop
from load_figures import (
    growth_line,
    kind_costs,
    memory_growth,
    projection_lines,
    rss_json,
    rss_lines,
    rss_points,
    split_collectors,
    table_header,
    table_row,
)
from load_jobs import DigestRunner, digest_lines, plan_jobs
from load_store import compact, count_store
from load_watch import Watch, latency_s, purge_raw, stream_backlog
from loadgen import kv, publish_argv

from hushmon.paths import build_bin_dir
from hushmon.transport.natsserver import (
    JS_DOMAIN,
    LEAF_PING_INTERVAL_S,
    LEAF_PING_MAX,
    LocalNatsServer,
    NatsServerConfig,
    StreamLimits,
    ensure_streams,
    free_port,
    site_consumers,
)

REPO = Path(__file__).resolve().parent.parent
HUSHMON = REPO / ".venv/bin/hushmon"
LAG_GOAL_S = 5.0
START_LEAD_S = 3  # the loadgens connect before period 0 starts
STARTUP_S = 4.0  # a collector that dies this soon could not open the store
DIGESTS_AFTER_S = 300.0  # longest wait for the digests still running after the drain


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def collect_help() -> str:
    r = subprocess.run(
        [str(HUSHMON), "collect", "--help"], capture_output=True, text=True, check=False
    )
    return r.stdout


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI size: 100 agents, 30 s, 2 jobs")
    ap.add_argument("--agents", type=int, default=10_000)
    ap.add_argument("--racks", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--collectors", type=int, default=2, help="hushmon collect processes")
    ap.add_argument("--engine", help="the collectors' --engine (when hushmon collect has one)")
    ap.add_argument(
        "--store",
        choices=("auto", "lake", "duckdb"),
        default="auto",
        help="the collectors' store: a lake (several writers, readers meanwhile) or the "
        "embedded DuckDB file (one collector, no digests during the run); auto = lake when "
        "hushmon collect writes one",
    )
    ap.add_argument("--jobs", type=int, default=6, help="jobs started and ended (at most 6)")
    ap.add_argument(
        "--grace-ms",
        type=int,
        default=500,
        help="the reducers' --period-grace-ms (default 500: ~1.5 s less per level than "
        "two periods)",
    )
    ap.add_argument(
        "--drain-s", type=float, default=300.0, help="longest wait for the store after the load"
    )
    ap.add_argument(
        "--warmup-s",
        type=float,
        default=360.0,
        help="resident sizes are compared from this far into the load (default 360: the "
        "reducers' --keep-s window of 300 s full) to its end",
    )
    ap.add_argument(
        "--reduce-bin",
        metavar="PATH",
        help="the hushmon-reduce to run (default: the build's; e.g. build-asan's)",
    )
    ap.add_argument(
        "--digest-nice",
        type=int,
        default=0,
        metavar="N",
        help="run each digest under nice -n N (default 0: at the daemons' priority); a site "
        "digests on another machine than its collectors, which this 2-vCPU box cannot",
    )
    ap.add_argument(
        "--stream-max-age-s",
        type=float,
        metavar="S",
        help="how long HM_RAW and HM_SUM keep messages (default: the site's 6 h and 7 days): "
        "a run longer than this shows whether the hub's memory follows what they hold",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    a = ap.parse_args()
    if a.quick:
        a.agents, a.minutes, a.jobs = 100, 0.5, 2
    return a


def check_args(a: argparse.Namespace, help_text: str) -> str | None:
    """One line saying what is wrong, or None."""
    if a.agents < a.racks or a.racks < 1 or a.minutes <= 0:
        return "need --racks >= 1, --agents >= --racks, --minutes > 0"
    if a.collectors < 1 or not 0 <= a.jobs <= 6:
        return "need --collectors >= 1 and 0 <= --jobs <= 6"
    if not 0 <= a.digest_nice <= 19:
        return "--digest-nice: 0 .. 19"
    if a.minutes * 60 < 20 and a.jobs:
        return "jobs need a run of at least 20 s (--minutes 0.34), or --jobs 0"
    if a.engine and "--engine" not in help_text:
        return "--engine: this hushmon collect has no --engine option"
    if a.reduce_bin and not os.access(a.reduce_bin, os.X_OK):
        return f"--reduce-bin {a.reduce_bin}: not an executable file"
    if a.store == "duckdb" and a.collectors > 1:
        return "--store duckdb: the embedded store takes one writer: --collectors 1"
    return None


def main() -> int:
    a = parse_args()
    help_text = collect_help()
    problem = check_args(a, help_text)
    if problem:
        print(f"bench_transport_load: {problem}", file=sys.stderr)
        return 2
    note = ""
    if a.store == "auto":
        # hushmon collect writes a lake when its store path is one (schema.open_store)
        a.store = "lake"
    a.raw_only = "--raw-only" in help_text
    a.summaries_only = "--summaries-only" in help_text and a.store == "lake"
    if a.store == "duckdb":
        a.collectors, a.jobs = 1, 0
    elif a.collectors > 1 and "lake" not in help_text.lower():
        a.collectors = 1
        note = " (this hushmon collect refuses a lake that exists: one collector)"
    periods = max(1, round(a.minutes * 60))
    per_rack = a.agents // a.racks
    agents = per_rack * a.racks
    print(f"# bench_transport_load: {' '.join(sys.argv[1:]) or '(defaults)'}")
    print(
        f"# {agents} agents in {a.racks} racks at 1 Hz for {periods} s; {a.collectors} "
        f"collector(s){' for raw batches and 1 for the summaries' if a.summaries_only else ''} "
        f"on a {a.store} store{f', engine {a.engine}' if a.engine else ''}{note}; "
        f"machine: {os.cpu_count()} CPUs; /proc/loadavg before: {loadavg()}"
    )
    with tempfile.TemporaryDirectory(prefix="hm-bench-load-") as tmp_name:
        return run(Path(tmp_name), a, periods, per_rack)


def start_servers(
    tmp: Path, racks: list[str]
) -> tuple[LocalNatsServer, dict[str, LocalNatsServer]]:
    hub_leaf_port = free_port()
    hub = LocalNatsServer(
        NatsServerConfig(
            name="hub", store_dir=tmp / "hub", js_domain=JS_DOMAIN, leaf_listen_port=hub_leaf_port
        ),
        tmp,
    )
    hub.start()
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
        leaves[rack] = leaf
    return hub, leaves


def raw_publish_rate(hub_url: str, hosts: int) -> float:
    """Messages/s of loadgen publishing as fast as acks allow; then the
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
    purge_raw(hub_url)
    return kv(r.stdout)["msgs_per_s"]


def start_daemons(
    a: argparse.Namespace,
    tmp: Path,
    hub: LocalNatsServer,
    leaves: dict[str, LocalNatsServer],
    store: Path,
) -> list[Daemon]:
    reduce_bin = a.reduce_bin or str(build_bin_dir() / "hushmon-reduce")
    grace = ["--period-grace-ms", str(a.grace_ms)]
    daemons = []
    for rack, leaf in leaves.items():
        for k in (1, 2):
            argv = [reduce_bin, "--rack", rack, "--url", leaf.url, "--stats-every-s", "5", *grace]
            daemons.append(start(f"reduce-{rack}-{k}", argv, tmp))
    daemons.append(start("reduce-top", [reduce_bin, "--top", "--url", hub.url, *grace], tmp))
    # collect-0: the summaries only (no --engine: that is the raw path's);
    # it sorts first, as load_figures.split_collectors expects the collector
    # that takes the summaries to
    first = 0 if a.summaries_only else 1
    for k in range(first, a.collectors + 1):
        argv = [str(HUSHMON), "collect", "--url", hub.url, "--db", str(store)]
        argv += ["--json", str(tmp / f"collect-{k}.json")]
        if k == 0:
            argv.append("--summaries-only")
        elif a.engine:
            argv += ["--engine", a.engine]
        if k > 0 and (a.summaries_only or (k > 1 and a.raw_only)):
            argv.append("--raw-only")
        daemons.append(start(f"collect-{k}", argv, tmp))
        if k == first:  # the first makes the store; the others open it
            made = time.monotonic()
            while not store.exists() and time.monotonic() - made < STARTUP_S:
                time.sleep(0.1)
            time.sleep(1.0)
    return daemons


def run(tmp: Path, a: argparse.Namespace, periods: int, per_rack: int) -> int:
    racks = [f"r{k + 1}" for k in range(a.racks)]
    agents = per_rack * a.racks
    store = tmp / "data" / ("hushmon.lake" if a.store == "lake" else "hushmon.duckdb")
    store.parent.mkdir()
    jobs = plan_jobs(agents, periods, a.jobs) if a.store == "lake" else []
    hub, leaves = start_servers(tmp, racks)
    servers = [hub]
    daemons: list[Daemon] = []
    try:
        age = a.stream_max_age_s
        limits = StreamLimits(raw_max_age_s=age, sum_max_age_s=age) if age else None
        ensure_streams(hub.url, consumers=site_consumers(racks), limits=limits)
        raw_rate = raw_publish_rate(hub.url, per_rack)
        print(f"1. raw JetStream publish on the hub: {raw_rate:,.0f} msgs/s (the physical limit)")
        for leaf in leaves.values():
            servers.append(leaf.start())
        time.sleep(1.0)  # leaves join the hub
        daemons = start_daemons(a, tmp, hub, leaves, store)
        time.sleep(STARTUP_S)
        dead = [d for d in daemons if d.proc.poll() is not None]
        if dead:
            for d in dead:
                print(f"bench_transport_load: {d.name} exited at start: {last_line(d.log)}")
            return 1
        watched = [Daemon(s.cfg.name, s.proc, s.log_path) for s in servers if s.proc]
        watched += daemons
        t0_ns = (time.time_ns() // 1_000_000_000 + START_LEAD_S) * 1_000_000_000
        job_args = [w for j in jobs for w in ("--job", j.loadgen_arg())]
        gens = [
            start(
                f"loadgen-{rack}",
                publish_argv(
                    leaves[rack].url,
                    rack,
                    per_rack,
                    per_rack * periods,
                    "--live",
                    "--t0-ns",
                    str(t0_ns),
                    "--first-host",
                    str(k * per_rack),
                    *job_args,
                ),
                tmp,
            )
            for k, rack in enumerate(racks)
        ]
        watched += gens
        sampler = Sampler(watched)
        watch = Watch(hub.url)
        digests = DigestRunner(jobs, store, tmp / "reports", t0_ns, watch.ack_floor, a.digest_nice)
        if jobs:
            print(
                "   jobs: "
                + ", ".join(
                    f"{j.job} ({j.hosts} nodes, periods {j.start}-{j.end - 1})" for j in jobs
                )
            )
            digests.start()
        load_from = sampler.now() + max(0.0, t0_ns / 1e9 - time.time())
        step = 10.0 if a.quick else 60.0
        print(f"2. per daemon every {step:.0f} s: CPU share and resident MiB; the collectors' lag")
        for line in table_header(watched):
            print(line)
        next_row = load_from + step
        while any(g.proc.poll() is None for g in gens):
            time.sleep(0.5)
            if sampler.now() >= next_row:
                lag = watch.unstored_at_end()
                print(table_row(next_row - step, next_row, watched, lag / agents), flush=True)
                next_row += step
        load_end = sampler.now()
        gen_failed = [g.name for g in gens if g.proc.returncode != 0]
        for g in gens:
            if g.proc.returncode != 0:
                print(f"# {g.name} failed: {last_line(g.log)}")
        # the store catches up: the collectors' consumers have nothing left
        drain_from = time.monotonic()
        while time.monotonic() - drain_from < a.drain_s:
            raw_done = watch.lag and watch.lag[-1][0] > drain_from and watch.lag[-1][1] == 0
            if raw_done and watch.sum_lag and watch.sum_lag[-1][1] <= 0:
                break
            time.sleep(0.5)
        drain_s = time.monotonic() - drain_from
        digests.join(timeout_s=DIGESTS_AFTER_S)
        time.sleep(3.0)  # the last partials and job summaries
        end = sampler.now()
        print(table_row(load_end, end, watched, watch.unstored_at_end() / agents) + "  (drain)")
        digests.stop()
        watch.stop()
        sampler.stop()
        rcs = {d.name: stop(d) for d in daemons}
        # what the collectors had not taken when they were stopped is still
        # in HM_RAW (not lost): counted apart
        backlog = stream_backlog(hub.url)
    finally:
        for d in daemons:
            stop(d)
        for s in reversed(servers):
            s.stop()

    published = agents * periods
    counts = count_store(store, periods, t0_ns)
    lost = published - counts.batches - backlog
    gen_out = kv((tmp / f"loadgen-{racks[0]}.out").read_text())
    reports = [json.loads(p.read_text()) for p in sorted(tmp.glob("collect-*.json"))]
    rack_lat, job_lat = latency_s(watch.rack), latency_s(watch.job)
    # every agent's batch reaches a job summary of its period: the first
    # one, or a late one (a batch after the grace makes a further summary)
    merged: dict[int, int] = {}
    for _t, period, nsources in watch.job:
        merged[period] = merged.get(period, 0) + nsources
    complete = sum(1 for n in merged.values() if n == agents)
    load_abs = (sampler.t0 + load_from, sampler.t0 + load_end)
    lag_s = watch.lag_s(load_abs[0], load_abs[1], agents)
    lag_p50 = float(np.median(lag_s)) if lag_s.size else float("nan")
    lag_p99 = float(np.percentile(lag_s, 99)) if lag_s.size else float("nan")
    lag_max = float(lag_s.max()) if lag_s.size else float("nan")
    print(
        f"3. latency end of period -> rack partial p50 {np.median(rack_lat):.2f} s, "
        f"p99 {np.percentile(rack_lat, 99):.2f} s; -> job summary p50 {np.median(job_lat):.2f} s, "
        f"p99 {np.percentile(job_lat, 99):.2f} s ({len(job_lat)} periods, {complete} with "
        f"every agent once, late summaries included)"
    )
    print(
        f"   collectors' lag (raw messages not yet stored, in seconds of load, each second of "
        f"the load): p50 {lag_p50:.2f} s, p99 {lag_p99:.2f} s, max {lag_max:.1f} s "
        f"(goal p99 <= {LAG_GOAL_S:.0f} s: {'met' if lag_p99 <= LAG_GOAL_S else 'NOT met'}); "
        f"drained {drain_s:.1f} s after the last period; end of period -> batch received by a "
        f"collector (store's received_at): p50 {counts.taken_p50_s:.2f} s, "
        f"p99 {counts.taken_p99_s:.2f} s"
    )
    sum_lag = watch.sum_unstored(load_abs[0], load_abs[1])
    sum_p99 = float(np.percentile(sum_lag, 99)) if sum_lag.size else float("nan")
    sum_end = watch.sum_lag[-1][1] if watch.sum_lag else -1
    third = (load_abs[1] - load_abs[0]) / 3
    sum_first = watch.sum_unstored(load_abs[0], load_abs[0] + third)
    sum_last = watch.sum_unstored(load_abs[1] - third, load_abs[1])
    sum_thirds = (
        float(sum_first.mean()) if sum_first.size else float("nan"),
        float(sum_last.mean()) if sum_last.size else float("nan"),
    )
    print(
        f"   summaries not yet stored (collect-sum: pending + unacked messages; "
        f"{len(watch.rack) + len(watch.job):,} rack partials and job summaries in all): "
        f"p99 {sum_p99:.0f}, max {sum_lag.max() if sum_lag.size else -1}, mean over the "
        f"first third of the load {sum_thirds[0]:.0f}, over the last {sum_thirds[1]:.0f}; "
        f"{sum_end} when the collectors were stopped"
    )
    print(
        f"4. CPU per daemon kind over the run ({end - load_from:.0f} s: load and drain), "
        f"{published:,} batches of {counts.values_per_batch} values:"
    )
    # the steady load: after its first step (a run shorter than two steps: all of it)
    steady = load_from + step if load_end - (load_from + step) >= step else load_from
    costs = kind_costs(watched, published, counts.batches, steady, load_end)
    stored_by = {
        f.stem: int(json.loads(f.read_text()).get("batches_stored", 0))
        for f in tmp.glob("collect-*.json")
    }
    costs = split_collectors(
        costs,
        watched,
        stored_by,
        len(watch.rack) + len(watch.job),
        end - load_from,
        steady,
        load_end,
    )
    for line in projection_lines(costs, agents, os.cpu_count() or 1):
        print(line)
    dup_how = "per (series, time)" if counts.exact_values_check else "by count"
    print(
        f"5. published {published:,} batches; stored {counts.batches:,}; lost = {lost}, "
        f"duplicated = {counts.duplicated_batches} (by host, epoch, seq); values stored "
        f"twice = {counts.duplicated_values} ({dup_how}; {counts.values:,} values stored); "
        f"not collected = {backlog} (still in HM_RAW when the collectors were stopped); "
        f"collectors: {sum(r.get('duplicate_batches', 0) for r in reports)} duplicates "
        f"discarded, {sum(r.get('redelivered', 0) for r in reports)} redelivered, "
        f"{sum(r.get('rejected_batches', 0) for r in reports)} rejected"
    )
    print(
        "   per collector (its final report): "
        + "; ".join(
            f"{r.get('batches_stored', 0):,} batches stored, "
            f"{r.get('batches_per_cpu_s', 0):,.0f} per CPU-s"
            for r in reports
        )
        + f" ({len(reports)} of {a.collectors + a.summaries_only} wrote a report)"
    )
    print(
        f"   store on disk: {counts.store_bytes / 2**20:,.1f} MiB = "
        f"{counts.bytes_per_value:.2f} bytes per stored value ({a.store}, as written, "
        f"before any compaction)"
    )
    packed = compact(store) if a.store == "lake" else None
    if packed is not None and packed.ok:
        print(
            f"   after 'hushmon store compact' ({packed.seconds:.0f} s): "
            f"{packed.bytes_after / 2**20:,.1f} MiB = {packed.bytes_after / counts.values:.2f} "
            "bytes per stored value (raw values, their 1-minute rollups, the catalog)"
        )
    elif packed is not None:
        print(f"   'hushmon store compact' failed: {packed.line}")
    first_min = steady
    growth = memory_growth(watched, first_min, load_end)
    half = memory_growth(watched, (load_from + load_end) / 2, load_end)
    print(
        "6. "
        + growth_line(
            f"from t={first_min:.0f} s to the end of the load ({load_end:.0f} s)", growth
        )[3:]
    )
    print(
        growth_line(
            "over the second half of the load (the reducers fill their --keep-s "
            "window of 300 s first)",
            half,
        )
    )
    if jobs:
        print(
            f"7. digests while the {a.collectors} collector(s) ran ({len(digests.runs)} of "
            f"{len(jobs)} jobs):"
        )
        for line in digest_lines(digests.runs):
            print(line)
    bad = [n for n, rc in rcs.items() if rc != 0] + gen_failed
    digests_bad = [r.job.job for r in digests.runs if not r.ok] + [
        j.job for j in jobs[len(digests.runs) :]
    ]
    for d in daemons + gens:
        if d.name in bad:
            print(f"# {d.name} exited non-zero: {last_line(d.log)}")
    if digests_bad:
        print(f"# digests failed or not as scheduled: {', '.join(digests_bad)}")
    print(f"# /proc/loadavg after: {loadavg()}")
    rss_at = rss_points(5.0, load_from, load_end, a.warmup_s)
    for line in rss_lines(watched, *rss_at):
        print(line)
    if a.json:
        figures = {
            "rss_mib_start_warm_end": rss_json(watched, *rss_at[:3]),
            "agents": agents,
            "load_s": periods,
            # how long the streams kept messages (None: the site's 6 h and 7
            # days, so none aged out): the hub works more once they expire
            "stream_max_age_s": a.stream_max_age_s,
            "racks": a.racks,
            "collectors": a.collectors,
            "summaries_only_collector": a.summaries_only,
            "engine": a.engine,
            "store": a.store,
            "periods": periods,
            "loadavg_end": loadavg(),
            "raw_publish_msgs_per_s": raw_rate,
            "batch_bytes": gen_out.get("batch_bytes", 0.0),
            "lines_per_batch": gen_out.get("lines_per_batch", 0.0),
            "values_per_batch": counts.values_per_batch,
            "rack_latency_p50_s": float(np.median(rack_lat)),
            "rack_latency_p99_s": float(np.percentile(rack_lat, 99)),
            "job_latency_p50_s": float(np.median(job_lat)),
            "job_latency_p99_s": float(np.percentile(job_lat, 99)),
            "collector_lag_p50_s": lag_p50,
            "collector_lag_p99_s": lag_p99,
            "collector_lag_max_s": lag_max,
            "drain_s": drain_s,
            "summaries_unstored_p99": sum_p99,
            "summaries_unstored_at_end": sum_end,
            "summaries_unstored_thirds": sum_thirds,
            "summary_messages": len(watch.rack) + len(watch.job),
            "published": published,
            "stored": counts.batches,
            "periods_complete_in_job_summaries": complete,
            "lost": lost,
            "not_collected_yet": backlog,
            "duplicated": counts.duplicated_batches,
            "duplicated_values": counts.duplicated_values,
            "values_stored": counts.values,
            "store_bytes": counts.store_bytes,
            "bytes_per_value": counts.bytes_per_value,
            "bytes_per_value_compacted": (
                packed.bytes_after / counts.values
                if packed and packed.ok and counts.values
                else None
            ),
            "memory_growth": growth,
            "kinds": [c.to_json() for c in costs],
            "collector_reports": [
                {k: r.get(k) for k in ("batches_stored", "cpu_seconds", "batches_per_cpu_s")}
                for r in reports
            ],
            "jobs": [j.loadgen_arg() for j in jobs],
            "digests": [r.to_json() for r in digests.runs],
            "exited_non_zero": bad,
        }
        Path(a.json).write_text(json.dumps(figures, indent=1))
    return (
        0
        if lost == 0
        and counts.duplicated_batches == 0
        and counts.duplicated_values == 0
        and not bad
        and not digests_bad
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
