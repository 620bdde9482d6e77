"""What `hushmon metrics` costs for a cluster of N simulated nodes (default 1000).

In process (no network): job summaries of jobs of 64, 32, 16, 8 and 4 nodes
(in turn, until N nodes are in jobs; ~90 sensors each, 2 application
metrics and a phase per rank) go into the exporter's state as the top
reducer's messages, and every node's raw batch (~4 KB, the agent's
default field set, with its hushmon_agent line) into the node-cost table.
Printed: CPU per summary message and per raw batch taken, then per answer
(text 0.0.4 and OpenMetrics): CPU time, bytes, series, median of --rounds.

With --nats: the same through a local nats-server and the real command
(`hushmon metrics` in its own process): N batches and the job summaries
published each second for --seconds, the exporter's CPU time (/proc) per
1000 batches, then the time and bytes of GET /metrics over HTTP.

    .venv/bin/python bench/bench_metrics.py [--nodes 1000] [--rounds 20] [--nats --seconds 20]

Prints the load average with the figures (the machine is shared)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from hushmon.metrics.server import Exporter
from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig, free_port
from hushmon.transport.summary import Summary
from hushmon.transport.wire import batch_headers, raw_subject

JOB_SIZES = (64, 32, 16, 8, 4)
NODES_PER_RACK = 40
# ranks per node sending application metrics (--app-ranks): each rank's values
# are sensors of their own in the summaries (docs/transport.md)
RANKS_PER_NODE = 2


def jobs_of(nodes: int) -> list[list[str]]:
    out: list[list[str]] = []
    n = 0
    while n < nodes:
        size = min(JOB_SIZES[len(out) % len(JOB_SIZES)], nodes - n)
        out.append([f"n{i:05d}" for i in range(n, n + size)])
        n += size
    return out


def rack_of(host: str) -> str:
    return f"r{int(host[1:]) // NODES_PER_RACK:03d}"


def node_lines(host: str, t_ns: int, job: str, rank0: int) -> str:
    """About the agent's default field set for one node and period."""
    h = f"host={host}"
    lines = [
        f"cpu,{h},cpu=total,scope=host user_pct=71.5,nice_pct=0,system_pct=3.25,idle_pct=24.1,"
        f"iowait_pct=0.5,irq_pct=0,softirq_pct=0.4,steal_pct=0.25 {t_ns}",
        f"load,{h},scope=host load1=30.5,load5=29.9,load15=28.1,procs_running=33i,"
        f"procs_blocked=0i {t_ns}",
        f"mem,{h},scope=host total_bytes=269000000000i,free_bytes=100000000000i,"
        f"available_bytes=150000000000i,buffers_bytes=1000000i,cached_bytes=40000000000i,"
        f"used_pct=44.2,swap_total_bytes=0i,swap_free_bytes=0i,dirty_bytes=100000i,"
        f"swap_cached_bytes=0i,writeback_bytes=0i,anon_bytes=90000000000i,"
        f"shmem_bytes=100000000i,slab_bytes=2000000000i,committed_bytes=120000000000i {t_ns}",
        f"vm,{h},scope=host pgpgin_per_s=10,pgpgout_per_s=300,pswpin_per_s=0,pswpout_per_s=0,"
        f"pgfault_per_s=12000,pgmajfault_per_s=0,oom_kill_per_s=0 {t_ns}",
        f"disk,{h},device=nvme0n1,scope=host read_bytes_per_s=0,write_bytes_per_s=409600,"
        f"reads_per_s=0,writes_per_s=12,busy_pct=1.5 {t_ns}",
    ]
    for iface, rx in (("ib0", 2.5e9), ("eth0", 1.2e5), ("lo", 5e3)):
        lines.append(
            f"net,{h},iface={iface} rx_bytes_per_s={rx},tx_bytes_per_s={rx * 0.9},"
            f"rx_packets_per_s=1000,tx_packets_per_s=900,rx_errors_per_s=0,tx_errors_per_s=0,"
            f"rx_drops_per_s=0,tx_drops_per_s=0 {t_ns}"
        )
    lines += [
        f"perf_sw,{h},scope=host context_switches_per_s=4000,page_faults_per_s=12000 {t_ns}",
        f"job,{h},job={job} active=1i {t_ns}",
        f"hushmon_agent,{h} cpu_us=212.5,jitter_us=61.2,rss_bytes=1258291i,samples_dropped=0i,"
        f"period_ms=1000i,control_unauthorized=0i,control_busy=0i,control_uid_cap=0i,"
        f"control_idle=0i,control_long_line=0i {t_ns}",
    ]
    for r in range(rank0, rank0 + RANKS_PER_NODE):
        lines.append(
            f"app,{h},job={job},rank={r},metric=iter_s count=10i,mean=0.51,min=0.46,max=0.56,"
            f"sum=5.1 {t_ns}"
        )
        lines.append(
            f"app,{h},job={job},rank={r},metric=residual count=10i,mean=1e-6,min=1e-7,max=1e-5,"
            f"sum=1e-5 {t_ns}"
        )
        lines.append(
            f"app_phase,{h},job={job},rank={r},phase=solve count=10i,mean_s=0.4,min_s=0.3,"
            f"max_s=0.5,total_s=4 {t_ns}"
        )
    return "\n".join(lines) + "\n"


def job_summary(job: str, hosts: list[str], t_ns: int) -> bytes:
    """The top reducer's job summary of one period: every sensor merged over the job's nodes."""
    sensors: dict[str, Summary] = {}
    for i, host in enumerate(hosts):
        for line in node_lines(host, t_ns, job, RANKS_PER_NODE * i).splitlines():
            key, fields, _t = line.split(" ")
            if key.startswith("job,"):
                continue
            tags = ",".join(t for t in key.split(",") if not t.startswith("host="))
            for f in fields.split(","):
                name, v = f.split("=")
                value = float(v.rstrip("i"))
                sensors.setdefault(f"{tags} {name}", Summary()).merge(Summary.of([value]))
    doc = {
        "v": 1,
        "level": "job",
        "job": job,
        "time_ns": t_ns,
        "sources": [[h, 1, t_ns // 10**9] for h in hosts],
        "sensors": {k: s.to_json() for k, s in sensors.items()},
    }
    return json.dumps(doc).encode()


def raw_batch(host: str, seq: int, t_ns: int, job: str) -> tuple[str, bytes, dict[str, str]]:
    text = node_lines(host, t_ns, job, 0)
    return (
        raw_subject(rack_of(host), host),
        text.encode(),
        batch_headers(host, 1, seq, text.count("\n")),
    )


def in_process(nodes: int, rounds: int) -> None:
    jobs = jobs_of(nodes)
    t_ns = time.time_ns() // 10**9 * 10**9
    summaries = [(f"hm.sum.job.{1000 + i}", job_summary(str(1000 + i), h, t_ns))
                 for i, h in enumerate(jobs)]  # fmt: skip
    batches = [raw_batch(h, 1, t_ns, str(1000 + i)) for i, hosts in enumerate(jobs) for h in hosts]
    ex = Exporter(keep_s=300.0, node_cost=True)
    # a period before, answered, not timed: sensor keys parsed once and cached
    for subject, payload in summaries:
        ex.state.add(subject, payload.replace(str(t_ns).encode(), str(t_ns - 10**9).encode()),
                     time.time_ns())  # fmt: skip
    ex.body(False)
    c0 = time.process_time()
    for subject, payload in summaries:
        ex.state.add(subject, payload, time.time_ns())
    c1 = time.process_time()
    for subject, data, headers in batches:
        ex.on_raw(subject, headers, data)
    c2 = time.process_time()
    assert ex.costs is not None and len(ex.costs.nodes) == nodes
    mean_summary = statistics.mean(len(p) for _s, p in summaries)
    sensors = sum(len(json.loads(p)["sensors"]) for _s, p in summaries)
    mean_batch = statistics.mean(len(d) for _s, d, _h in batches)
    print(f"{nodes} nodes in {len(jobs)} jobs of {'/'.join(map(str, JOB_SIZES))} nodes, "
          f"racks of {NODES_PER_RACK}; job summaries of {mean_summary / 1024:.0f} KiB, "
          f"{sensors / len(summaries):,.0f} sensors on average ({RANKS_PER_NODE} app ranks "
          f"per node)")  # fmt: skip
    print(f"  a period's job summaries kept (not parsed): {(c1 - c0) * 1e3:.2f} ms CPU "
          f"({(c1 - c0) / len(summaries) * 1e6:.1f} us each)")  # fmt: skip
    print(f"  raw batch taken for node cost: {(c2 - c1) / len(batches) * 1e6:,.1f} us CPU each "
          f"({mean_batch / 1024:.1f} KiB): {(c2 - c1) * 1e3:.0f} ms a period")  # fmt: skip
    period = 0
    for om in (False, True):
        cpu, sizes, parse = [], [], []
        body = b""
        for _ in range(rounds):
            # each answer after a new period: it parses that period's summaries
            period += 1
            stamp = str(t_ns + period * 10**9).encode()
            for subject, payload in summaries:
                ex.state.add(subject, payload.replace(str(t_ns).encode(), stamp), time.time_ns())
            a = time.process_time()
            ex.state.flush()
            b = time.process_time()
            body = ex.body(om)
            parse.append(b - a)
            cpu.append(time.process_time() - a)
            sizes.append(len(body))
        assert ex.state.bad == 0, ex.state.last_error
        text = body.decode()
        series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        job_series = sum(1 for line in text.splitlines() if line.startswith("hushmon_job_"))
        node_series = sum(1 for line in text.splitlines() if line.startswith("hushmon_agent_"))
        name = "OpenMetrics" if om else "text 0.0.4"
        print(f"  answer, {name}: {statistics.median(cpu) * 1e3:.1f} ms CPU (median of {rounds}; "
              f"parsing the newest period {statistics.median(parse) * 1e3:.1f} ms), "
              f"{statistics.median(sizes) / 1024:,.0f} KiB; {series:,} series: "
              f"{job_series:,} job ({job_series / len(jobs):.1f} per job), {node_series:,} node "
              f"({node_series / nodes:.1f} per node)")  # fmt: skip


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def publish_for(url: str, nodes: int, seconds: int) -> int:
    import nats

    nc = await nats.connect(url)
    jobs = jobs_of(nodes)
    # built once: each second only the timestamps change (the publisher must
    # keep up on this small machine)
    t0 = time.time_ns() // 10**9 * 10**9
    sums = [(f"hm.sum.job.{1000 + i}", job_summary(str(1000 + i), hosts, t0))
            for i, hosts in enumerate(jobs)]  # fmt: skip
    raws = [raw_batch(h, 1, t0, str(1000 + i)) for i, hosts in enumerate(jobs) for h in hosts]
    sent = 0
    for k in range(seconds):
        stamp = str(t0 + k * 10**9).encode()
        for subject, payload in sums:
            await nc.publish(subject, payload.replace(str(t0).encode(), stamp))
        for subject, data, headers in raws:
            h = dict(headers, **{"Hm-Seq": str(k + 1), "Nats-Msg-Id": f"{subject}:{k + 1}"})
            await nc.publish(subject, data.replace(str(t0).encode(), stamp), headers=h)
            sent += 1
        await nc.flush()
        await asyncio.sleep(max(0.0, 1.0 - (time.time() % 1.0)))
    await nc.close()
    return sent


def over_nats(nodes: int, seconds: int, rounds: int, tmp: Path) -> None:
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=tmp / "js"), tmp)
    server.start()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hushmon.cli", "metrics", "--url", server.url, "--port", str(port)],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.2)
        c0 = proc_cpu_s(proc.pid)
        sent = asyncio.run(publish_for(server.url, nodes, seconds))
        time.sleep(1.0)
        c1 = proc_cpu_s(proc.pid)
        print(f"over NATS, {nodes} nodes x {seconds} s ({sent:,} batches, summaries beside): "
              f"exporter {c1 - c0:.2f} CPU-s = {(c1 - c0) / sent * 1000:.3f} CPU-s per 1000 "
              f"batches, {(c1 - c0) / seconds * 100:.1f} % of a core at 1 Hz")  # fmt: skip
        for accept in ("", "application/openmetrics-text; version=1.0.0"):
            walls, sizes = [], []
            for _ in range(rounds):
                req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
                a = time.perf_counter()
                with urllib.request.urlopen(req, timeout=30) as r:
                    sizes.append(len(r.read()))
                walls.append(time.perf_counter() - a)
            name = "OpenMetrics" if accept else "text 0.0.4"
            print(f"  GET /metrics, {name}: {statistics.median(walls) * 1e3:.1f} ms wall "
                  f"(median of {rounds}), {statistics.median(sizes) / 1024:,.0f} KiB")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        server.stop()


def main() -> int:
    global RANKS_PER_NODE
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--nats", action="store_true", help="also through nats-server and the command")
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument(
        "--app-ranks",
        type=int,
        default=RANKS_PER_NODE,
        help="ranks per node sending 2 application metrics and a phase (default 2)",
    )
    args = p.parse_args()
    RANKS_PER_NODE = args.app_ranks
    print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}, {os.cpu_count()} CPUs")
    in_process(args.nodes, args.rounds)
    if args.nats:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            over_nats(args.nodes, args.seconds, args.rounds, Path(tmp))
    print(f"load average {Path('/proc/loadavg').read_text().split()[:3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
