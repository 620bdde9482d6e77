"""The reducers under a cluster's live load for minutes: simulated agents ->
rack leaves -> two rack reducers per rack -> hub -> the top reducer, with
jobs starting and ending, and no collectors (the reducers' own soak: what
died at t ~ 400 s in bench_transport_load.py's 3,500-agent run).

Started on this machine (loopback, free ports) as bench_transport_load.py
starts them: a hub, a leaf per rack, two ``hushmon-reduce --rack`` per
rack sharing the rack's consumer, ``hushmon-reduce --top``, and one
``hushmon-loadgen publish --live`` per rack (one ~2 KB batch per host at
the end of each 1 s period; six jobs of 40 % down to 1 % of the nodes).

Printed:
1. every minute, per daemon: CPU share and resident MiB;
2. reducers that died (exited before the end, or non-zero after SIGTERM),
   and any heap or sanitizer report in their logs;
3. job summaries: periods with any / with every agent merged exactly once,
   of the periods offered; latency end of period -> job summary;
4. per rack, its reducers' CPU per batch (their final counters: batches
   and cpu_s); with --compare-bin, one rack's reducers (--compare-rack)
   run that binary and the ratio to the other racks' is printed (the same
   load per rack, one run: old binary vs new side by side; the racks' job
   mixes differ, so run it both ways);
5. each daemon's resident MiB at the start, after the warm-up (the
   reducers' --keep-s window of 300 s full) and at the end.

Exit status 0 when no reducer died, no log holds a heap or sanitizer
report and every period has its job summaries.

    .venv/bin/python bench/bench_reduce_soak.py --agents 3500 --minutes 10
    .venv/bin/python bench/bench_reduce_soak.py --agents 1000 --minutes 3 \\
        --reduce-bin build-asan/bin/hushmon-reduce         # ASan/LSan build under load
    .venv/bin/python bench/bench_reduce_soak.py --agents 2000 --minutes 3 \\
        --compare-bin /tmp/old/bin/hushmon-reduce          # rack r1 on another build
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_transport_load import START_LEAD_S, start_servers
from load_daemons import Daemon, Sampler, last_line, start, stop
from load_figures import rss_json, rss_lines, rss_points, table_header, table_row
from load_jobs import plan_jobs
from load_watch import Watch, latency_s
from loadgen import publish_argv

from hushmon.paths import build_bin_dir
from hushmon.transport.natsserver import (
    DUPLICATE_WINDOW_S,
    StreamLimits,
    ensure_streams,
    site_consumers,
)

STARTUP_S = 3.0
STATS_EVERY_S = 5  # the reducers' --stats-every-s: their heap_mib over time
AFTER_LOAD_S = 8.0  # the last periods' partials and job summaries
# What a heap corruption or a sanitizer leaves in a log.
CRASH_RE = re.compile(
    r"double free|corruption|corrupted|unaligned fastbin|AddressSanitizer|LeakSanitizer|"
    r"UndefinedBehaviorSanitizer|runtime error:|Segmentation fault|Aborted"
)
KV_RE = re.compile(r"(\w+)=([-\d.]+)")


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=3500)
    ap.add_argument("--racks", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=6, help="jobs started and ended (at most 6)")
    ap.add_argument("--grace-ms", type=int, default=500, help="the reducers' --period-grace-ms")
    ap.add_argument(
        "--keep-s",
        type=int,
        default=300,
        help="the reducers' --keep-s (default 300, theirs): the window of published (job, "
        "period)s they remember, which their memory fills first",
    )
    ap.add_argument("--reduce-bin", metavar="PATH", help="hushmon-reduce (default: the build's)")
    ap.add_argument(
        "--compare-bin", metavar="PATH", help="one rack's reducers run this hushmon-reduce instead"
    )
    ap.add_argument(
        "--compare-rack",
        default="r1",
        help="the rack --compare-bin runs (default r1; run both ways: the racks' jobs differ)",
    )
    ap.add_argument(
        "--warmup-s", type=float, default=360.0, help="resident sizes compared from here on"
    )
    ap.add_argument(
        "--raw-max-mib",
        type=int,
        default=-1,
        help="HM_RAW's size limit (default -1: none, the 6 h max age only): what the hub's "
        "resident size follows",
    )
    ap.add_argument(
        "--dup-window-s",
        type=float,
        default=0.0,
        help="an experiment: set HM_RAW's duplicate window to this (default 0: the admin "
        "step's DUPLICATE_WINDOW_S), to see what the hub's memory follows",
    )
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return ap.parse_args()


def check_args(a: argparse.Namespace) -> str | None:
    if a.racks < 1 or a.agents < a.racks or a.minutes <= 0 or not 0 <= a.jobs <= 6:
        return "need --racks >= 1, --agents >= --racks, --minutes > 0, 0 <= --jobs <= 6"
    if a.dup_window_s < 0:
        return "--dup-window-s: 0 (the admin step's) or more"
    if a.keep_s < 1:
        return "--keep-s: at least 1"
    if 0 <= a.raw_max_mib < 64:
        return "--raw-max-mib: at least 64 (64 messages of the largest size), or -1"
    if a.compare_bin and a.racks < 2:
        return "--compare-bin needs --racks >= 2 (one rack against the others)"
    if a.compare_rack not in [f"r{k + 1}" for k in range(a.racks)]:
        return f"--compare-rack {a.compare_rack}: not one of r1..r{a.racks}"
    for flag, path in (("--reduce-bin", a.reduce_bin), ("--compare-bin", a.compare_bin)):
        if path and not os.access(path, os.X_OK):
            return f"{flag} {path}: not an executable file"
    return None


def counters(log: Path) -> dict[str, float]:
    """The last counters line of a reducer's log (final, else the last stats)."""
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if "level=" in ln]
    except OSError:
        return {}
    return {k: float(v) for k, v in KV_RE.findall(lines[-1])} if lines else {}


def heap_series(log: Path) -> list[float]:
    """A reducer's heap_mib of each stats line (every STATS_EVERY_S)."""
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if " stats level=" in ln]
    except OSError:
        lines = []
    return [float(m.group(1)) for ln in lines if (m := re.search(r"heap_mib=([\d.]+)", ln))]


def heap_at(log: Path, times: tuple[float, ...], lead_s: float) -> list[float]:
    """A reducer's heap_mib at each time (sampler clock; the lines count from
    its start, lead_s before the sampler's); -1 where it printed none."""
    heap = heap_series(log)
    out = []
    for t in times:
        i = int((t + lead_s) / STATS_EVERY_S) - 1
        out.append(heap[min(max(i, 0), len(heap) - 1)] if heap else -1.0)
    return out


def crash_lines(log: Path) -> list[str]:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if CRASH_RE.search(ln)][:3]


async def set_dup_window(url: str, seconds: float) -> None:
    """HM_RAW's duplicate window, changed after the admin step (not a site's
    setting: the agents' replays need the 15 min)."""
    import nats

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        info = await js.stream_info("HM_RAW")
        cfg = info.config
        cfg.duplicate_window = seconds
        await js.update_stream(cfg)
    finally:
        await nc.close()


def main() -> int:
    a = parse_args()
    problem = check_args(a)
    if problem:
        print(f"bench_reduce_soak: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="hm-bench-soak-") as tmp_name:
        return run(Path(tmp_name), a)


def start_reducers(
    a: argparse.Namespace, tmp: Path, hub_url: str, leaf_urls: dict[str, str]
) -> list[Daemon]:
    own = a.reduce_bin or str(build_bin_dir() / "hushmon-reduce")
    grace = ["--period-grace-ms", str(a.grace_ms), "--keep-s", str(a.keep_s)]
    stats = ["--stats-every-s", str(STATS_EVERY_S)]
    daemons = []
    for rack, url in leaf_urls.items():
        binary = a.compare_bin if a.compare_bin and rack == a.compare_rack else own
        for k in (1, 2):
            argv = [binary, "--rack", rack, "--url", url, *stats, *grace]
            daemons.append(start(f"reduce-{rack}-{k}", argv, tmp))
    daemons.append(start("reduce-top", [own, "--top", "--url", hub_url, *stats, *grace], tmp))
    return daemons


def run(tmp: Path, a: argparse.Namespace) -> int:
    periods = max(1, round(a.minutes * 60))
    per_rack = a.agents // a.racks
    agents = per_rack * a.racks
    racks = [f"r{k + 1}" for k in range(a.racks)]
    jobs = plan_jobs(agents, periods, a.jobs) if periods >= 20 else []
    print(f"# bench_reduce_soak: {' '.join(sys.argv[1:]) or '(defaults)'}")
    print(
        f"# {agents} agents in {a.racks} racks at 1 Hz for {periods} s, {len(jobs)} jobs, "
        f"no collectors; HM_RAW limit {a.raw_max_mib} MiB, duplicate window "
        f"{a.dup_window_s or DUPLICATE_WINDOW_S:.0f} s; machine: {os.cpu_count()} CPUs; "
        f"/proc/loadavg before: {loadavg()}"
    )
    hub, leaves = start_servers(tmp, racks)
    servers = [hub]
    daemons: list[Daemon] = []
    gens: list[Daemon] = []
    try:
        limits = StreamLimits(raw_max_bytes=a.raw_max_mib * 2**20 if a.raw_max_mib > 0 else -1)
        ensure_streams(hub.url, consumers=site_consumers(racks), limits=limits)
        if a.dup_window_s > 0:
            asyncio.run(set_dup_window(hub.url, a.dup_window_s))
        for leaf in leaves.values():
            servers.append(leaf.start())
        time.sleep(1.0)  # leaves join the hub
        started = time.monotonic()
        daemons = start_reducers(a, tmp, hub.url, {r: leaf.url for r, leaf in leaves.items()})
        time.sleep(STARTUP_S)
        for d in daemons:
            if d.proc.poll() is not None:
                print(f"bench_reduce_soak: {d.name} exited at start: {last_line(d.log)}")
                return 1
        t0_ns = (time.time_ns() // 1_000_000_000 + START_LEAD_S) * 1_000_000_000
        job_args = [w for j in jobs for w in ("--job", j.loadgen_arg())]
        for k, rack in enumerate(racks):
            argv = publish_argv(
                leaves[rack].url, rack, per_rack, per_rack * periods, "--live", "--t0-ns",
                str(t0_ns), "--first-host", str(k * per_rack), *job_args,
            )  # fmt: skip
            gens.append(start(f"loadgen-{rack}", argv, tmp))
        watched = [Daemon(s.cfg.name, s.proc, s.log_path) for s in servers if s.proc]
        watched += daemons + gens
        sampler = Sampler(watched)
        # the reducers' stats lines count from their start, before the sampler's
        lead_s = time.monotonic() - started
        watch = Watch(hub.url)
        load_from = sampler.now() + max(0.0, t0_ns / 1e9 - time.time())
        print("1. per daemon every 60 s: CPU share and resident MiB")
        for line in table_header(watched):
            print(line.replace("   lag (s)", ""))
        next_row = load_from + 60.0
        while any(g.proc.poll() is None for g in gens):
            time.sleep(0.5)
            if sampler.now() >= next_row:
                print(table_row(next_row - 60.0, next_row, watched, 0.0)[:-10], flush=True)
                next_row += 60.0
        load_end = sampler.now()
        time.sleep(AFTER_LOAD_S)
        died = {d.name: d.proc.returncode for d in daemons if d.proc.poll() is not None}
        watch.stop()
        sampler.stop()
        rcs = {d.name: stop(d) for d in daemons}
    finally:
        for d in daemons + gens:
            stop(d)
        for s in reversed(servers):
            s.stop()
    load = (load_from, load_end)
    return report(a, tmp, daemons, gens, watched, watch, load, lead_s, died, rcs, periods)


def report(
    a: argparse.Namespace,
    tmp: Path,
    daemons: list[Daemon],
    gens: list[Daemon],
    watched: list[Daemon],
    watch: Watch,
    load: tuple[float, float],
    lead_s: float,
    died: dict[str, int | None],
    rcs: dict[str, int],
    periods: int,
) -> int:
    agents = (a.agents // a.racks) * a.racks
    crashes = {d.name: crash_lines(d.log) for d in daemons if crash_lines(d.log)}
    bad_exit = {n: rc for n, rc in rcs.items() if rc != 0}
    print(
        f"2. reducers died during the load: {len(died)} of {len(daemons)}"
        + "".join(
            f"; {n} (exit {rc}): {last_line(tmp / f'{n}.log')[:120]}" for n, rc in died.items()
        )
    )
    print(
        f"   non-zero exit after SIGTERM: {len(bad_exit)}"
        + "".join(f"; {n} {rc}" for n, rc in bad_exit.items())
        + f"; heap or sanitizer reports in the logs: {len(crashes)}"
        + "".join(f"; {n}: {' | '.join(ls)[:300]}" for n, ls in crashes.items())
    )
    merged: dict[int, int] = {}
    for _t, period, nsources in watch.job:
        merged[period] = merged.get(period, 0) + nsources
    complete = sum(1 for n in merged.values() if n == agents)
    job_lat = latency_s(watch.job)
    gen_bad = [g.name for g in gens if g.proc.returncode != 0]
    print(
        f"3. periods with job summaries: {len(merged)} of {periods}; with every agent merged "
        f"exactly once: {complete}; end of period -> job summary p50 {np.median(job_lat):.2f} s, "
        f"p99 {np.percentile(job_lat, 99):.2f} s"
        + (f"; loadgen failed: {', '.join(gen_bad)}" if gen_bad else "")
        if job_lat.size
        else f"3. no job summary seen ({periods} periods offered)"
    )
    per_rack = rack_costs(a, tmp, daemons)
    print("4. rack reducers' CPU per batch (their last counters: batches, cpu_s):")
    for rack, (binary, batches, cpu_s) in per_rack.items():
        us = cpu_s / batches * 1e6 if batches else float("nan")
        print(
            f"   {rack}: {batches:,.0f} batches, {cpu_s:.2f} CPU-s = {us:.1f} us per batch, "
            f"{us * 1e-3:.3f} cores per 1000 agents ({binary})"
        )
    if a.compare_bin and len(per_rack) > 1:
        other = [v for r, v in per_rack.items() if r != a.compare_rack]
        us_new = sum(c for _b, _n, c in other) / max(sum(n for _b, n, _c in other), 1) * 1e6
        b1, n1, c1 = per_rack[a.compare_rack]
        us_old = c1 / n1 * 1e6 if n1 else float("nan")
        print(
            f"   CPU per batch, the other racks / {a.compare_rack} ({b1}): {us_new:.1f} / "
            f"{us_old:.1f} us = {us_new / us_old:.2f}"
        )
    top = counters(tmp / "reduce-top.log")
    print(
        f"   top reducer: {top.get('partials_in', 0):,.0f} partials in, "
        f"{top.get('cpu_s', 0):.2f} CPU-s"
    )
    rss_at = rss_points(5.0, load[0], load[1], a.warmup_s)
    print("5.")
    for line in rss_lines(watched, *rss_at):
        print(line)
    heap = {d.name: heap_at(d.log, rss_at[:3], lead_s) for d in daemons}
    print("   reducers' heap in use (malloc'ed, not freed; their stats lines), MiB:")
    for name, pts in heap.items():
        growth = (pts[2] - pts[1]) / pts[1] * 100 if pts[1] > 0 else float("nan")
        print(f"     {name:<14} {pts[0]:7.1f} / {pts[1]:7.1f} / {pts[2]:7.1f}  {growth:+5.1f} %")
    print(f"# /proc/loadavg after: {loadavg()}")
    ok = not died and not bad_exit and not crashes and complete == periods and not gen_bad
    if a.json:
        figures = {
            "agents": agents,
            "racks": a.racks,
            "periods": periods,
            "loadavg_end": loadavg(),
            "died": list(died),
            "bad_exit": bad_exit,
            "crash_reports": crashes,
            "periods_with_job_summaries": len(merged),
            "periods_complete": complete,
            "job_latency_p50_s": float(np.median(job_lat)) if job_lat.size else None,
            "job_latency_p99_s": float(np.percentile(job_lat, 99)) if job_lat.size else None,
            "rack_cpu": {
                r: {"bin": b, "batches": n, "cpu_s": c} for r, (b, n, c) in per_rack.items()
            },
            "top": top,
            "rss_mib_start_warm_end": rss_json(watched, *rss_at[:3]),
            "heap_mib_start_warm_end": heap,
            "heap_mib_every_stats": {d.name: heap_series(d.log) for d in daemons},
            "ok": ok,
        }
        Path(a.json).write_text(json.dumps(figures, indent=1))
    return 0 if ok else 1


def rack_costs(
    a: argparse.Namespace, tmp: Path, daemons: list[Daemon]
) -> dict[str, tuple[str, float, float]]:
    """rack -> (binary, batches, CPU-s) summed over its two reducers."""
    out: dict[str, tuple[str, float, float]] = {}
    for d in daemons:
        if d.name == "reduce-top":
            continue
        rack = d.name.split("-")[1]
        c = counters(d.log)
        binary = str(d.proc.args[0]) if isinstance(d.proc.args, list) else "?"
        b, n, cpu = out.get(rack, (binary, 0.0, 0.0))
        out[rack] = (b, n + c.get("batches", 0.0), cpu + c.get("cpu_s", 0.0))
    return out


if __name__ == "__main__":
    sys.exit(main())
