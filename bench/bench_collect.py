"""hushmon collect: ingest rate from NATS into the store, next to hushmon ingest.

A synthetic job (hushmon.store.synthetic: --nodes nodes x --seconds periods
at 1 Hz, the agent's field set) is cut into the agent's batches (one per
node and period, contract headers), published to HM_RAW of a local
nats-server, then collected by ``hushmon collect --once`` in a fresh
process. Printed: batches/s, lines/s and values/s of the collector, its
batches per CPU-second (CPU of the collect call, every thread: the figure
issue 20 sets at 20,000; and of the whole process, start-up included); the
publish rate of this script (nats-py, one JetStream ack per batch, for
scale only); ``hushmon ingest`` of the same lines as spool files as a ratio.
Then the summary path in this process: a rack partial per (rack, period)
of the same job, as the rack reducers send them (every sensor summarized
over the rack's nodes), stored into the collected store in groups of 64
by the collector's own code: summaries per CPU-s. With --reducers,
``bench/bench_reduce.py --quick`` runs after it and the collector's rate is
printed as a ratio of the rack reducer's node-batches per CPU-s.
The machine is shared: the load average is printed with the figures.

``--engine c`` (or ``both``, beside the Python collector) collects the same
stream with the C hot path (libhushmon_collect through
hushmon.transport.fastcollect) into a lake: a fresh process pulls groups of
2048 (64 MiB at most), appends each with the lake writer
(transport/lake_writer.py, one commit) and acks it; printed are its batches
per CPU-second (the process's CPU over the loop: fetch, parse, append, ack;
libnats' threads included), as a ratio of the Python collector's and of the
rack reducer's (--reducers). Then ``--processes`` collectors of each engine
share collect-raw at once on a stream published again (in full before
they start, so the publisher does not compete for the CPUs): aggregate
batches per second and CPU per batch, as a ratio of one process's, and each
C collector's share of its wall time holding the lake's commit lock (and in
lake_commit, the wait for the lock included). The C collectors' append is
split into its files (the group's tables encoded as Parquet before the
lock, store/lake_add_files.py) and its transaction. --group-msgs takes a
comma list of group sizes (the collector's --fetch-batch) to compare;
--pin runs collector i of a run on CPU i.

    .venv/bin/python bench/bench_collect.py [--nodes 64 --seconds 120] [--reducers]
        [--store duckdb|lake|both] [--engine python|c|both] [--processes 2]
        [--group-msgs 2048,8192] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

from hushmon.store.ingest import ingest_spool
from hushmon.store.lake import is_lake
from hushmon.store.synthetic import Scenario, node_lines, write_spool
from hushmon.transport.collect_lake import LakeCollectorStore
from hushmon.transport.collect_store import CollectorStore, Message
from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    site_consumers,
)
from hushmon.transport.summary import Summary
from hushmon.transport.wire import (
    H_SEQ,
    SUM_RACK_PREFIX,
    batch_headers,
    parse_sensor_key,
    raw_subject,
)

EPOCH = 1


def batches(sc: Scenario) -> list[tuple[str, str, bytes, dict[str, str]]]:
    """One batch per node and period, in the order agents at 1 Hz send
    them: period after period, every node's batch of a period together.
    (Node after node, as this bench once published them, made each group
    hold a few nodes' whole runs, so every group met new series: a cost a
    running site pays only when a node starts.)"""
    per_node = []
    for node in range(sc.nodes):
        host = sc.host(node)
        periods: dict[int, list[str]] = {}
        for line in (raw.rstrip("\n") for raw in node_lines(sc, node)):
            periods.setdefault(int(line.rsplit(" ", 1)[1]), []).append(line)
        mine = []
        for seq, t in enumerate(sorted(periods), 1):
            data = ("\n".join(periods[t]) + "\n").encode()
            headers = batch_headers(host, EPOCH, seq, len(periods[t]))
            mine.append((f"r{node % 4}", host, data, headers))
        per_node.append(mine)
    return [b for period in zip(*per_node, strict=True) for b in period]


async def publish(url: str, items: list[tuple[str, str, bytes, dict[str, str]]]) -> float:
    nc = await nats.connect(url)
    js = nc.jetstream()
    started = time.perf_counter()
    window = 256  # acks in flight
    pending: list[asyncio.Future] = []
    for rack, host, data, headers in items:
        pending.append(
            asyncio.ensure_future(js.publish(raw_subject(rack, host), data, headers=headers))
        )
        if len(pending) >= window:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)
    seconds = time.perf_counter() - started
    await nc.close()
    return seconds


def rack_partials(items: list[tuple[str, str, bytes, dict[str, str]]]) -> list[Message]:
    """The rack reducers' partials of the synthetic job: per (rack, period)
    every sensor over the rack's nodes, with the batches as sources."""
    groups: dict[tuple[str, int], list[tuple[str, bytes, dict[str, str]]]] = {}
    for rack, host, data, headers in items:
        t = int(data.split(b"\n", 1)[0].rsplit(b" ", 1)[1])
        groups.setdefault((rack, t), []).append((host, data, headers))
    out = []
    for (rack, t), members in sorted(groups.items(), key=lambda g: (g[0][1], g[0][0])):
        values: dict[str, list[float]] = {}
        job = ""
        for _host, data, _h in members:
            for line in data.decode().splitlines():
                key, fields, _t = line.rsplit(" ", 2)
                if key.startswith("job,"):
                    job = key.split("job=", 1)[1].split(",", 1)[0]
                    continue
                for f in fields.split(","):
                    name, v = f.split("=", 1)
                    values.setdefault(f"{key} {name}", []).append(float(v.rstrip("i")))
        sensors: dict[str, object] = {}
        for text, vs in values.items():
            k = parse_sensor_key(text)
            assert not isinstance(k, str), k
            sensors[k.wire()] = Summary.of(vs).to_json()
        sources = [[h, EPOCH, int(x[H_SEQ])] for h, _d, x in members]
        payload = {"v": 1, "level": "rack", "rack": rack, "job": job, "time_ns": t,
                   "sources": sources, "sensors": sensors}  # fmt: skip
        out.append(
            Message(
                SUM_RACK_PREFIX + rack, {"Nats-Msg-Id": f"{rack}:{t}"}, json.dumps(payload).encode()
            )
        )
    return out


def summary_rate(db: Path, partials: list[Message], group: int = 64) -> float:
    """Summaries per CPU-s of the collector's summary path into db."""
    store = LakeCollectorStore(db) if is_lake(db) else CollectorStore(db)
    try:
        cpu0 = time.process_time()
        for i in range(0, len(partials), group):
            store.write_summaries(partials[i : i + group])
        cpu = time.process_time() - cpu0
        assert store.stats.summaries_stored == len(partials), store.stats
    finally:
        store.close()
    return len(partials) / cpu


def reducers_rate() -> float:
    """The rack reducer's node-batches per CPU-s from bench_reduce.py --quick."""
    script = Path(__file__).with_name("bench_reduce.py")
    done = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, check=True
    )
    found = re.search(r"([\d,]+) node-batches per reducer CPU-s", done.stdout)
    if found is None:
        raise SystemExit(f"bench_reduce.py --quick printed no reducer rate:\n{done.stdout}")
    return float(found.group(1).replace(",", ""))


def reducer_on_stream(tmp: Path, items: list[tuple[str, str, bytes, dict[str, str]]]) -> float:
    """The rack reducers on this bench's own stream: the batches published
    to a fresh server, then each rack's ``hushmon-reduce --rack`` drains its
    share, one after the other (bench_reduce.py's drain flags); node-batches
    per reducer CPU-s over all of them."""
    from bench_reduce import DRAIN_FLAGS, DRAIN_MAX_ACK_PENDING, Reducer, drained

    from hushmon.procstat import process_cpu_s

    racks = sorted({rack for rack, _h, _d, _x in items})
    tmp.mkdir()
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=tmp / "js"), tmp)
    server.start()
    batches_done = cpu_s = 0.0
    try:
        consumers = site_consumers(racks, reduce_max_ack_pending=DRAIN_MAX_ACK_PENDING)
        ensure_streams(server.url, consumers=consumers)
        asyncio.run(publish(server.url, items))
        for rack in racks:
            n = sum(1 for r, _h, _d, _x in items if r == rack)
            red = Reducer(
                server.url, tmp / f"reduce-{rack}.log", *DRAIN_FLAGS, level=("--rack", rack)
            )
            asyncio.run(drained(server.url, n, time.monotonic(), consumer=f"reduce-{rack}"))
            cpu_s += process_cpu_s(f"/proc/{red.proc.pid}/stat")
            time.sleep(0.5)  # the last partials go out
            batches_done += red.stop().get("batches", 0.0)
    finally:
        server.stop()
    if batches_done != len(items):
        raise SystemExit(f"rack reducers took {batches_done:.0f} of {len(items)} batches")
    return batches_done / cpu_s


def collect_run(
    tmp: Path, items: list[tuple[str, str, bytes, dict[str, str]]], kind: str
) -> tuple[float, dict, float, Path]:
    """Publishes the batches to a fresh server and collects them with
    ``hushmon collect --once`` into a fresh store of that kind: publish
    seconds, the collector's report, its process CPU and the store."""
    tmp.mkdir()
    db = tmp / ("collected.lake" if kind == "lake" else "collected.duckdb")
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=tmp / "js"), tmp)
    server.start()
    try:
        ensure_streams(server.url)
        pub_s = asyncio.run(publish(server.url, items))
        cmd = [sys.executable, "-m", "hushmon.cli", "collect", "--url", server.url,
               "--db", str(db), "--once", "--json", "-"]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        process_cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    finally:
        server.stop()
    return pub_s, json.loads(done.stdout), process_cpu_s, db


# Groups as the Python collector's: 2048 messages, 64 MiB; a group that is
# not full closes after FETCH_TIMEOUT_S (the last of a run waits it once:
# short, so the wall time is the work's).
GROUP_MSGS, GROUP_BYTES, FETCH_TIMEOUT_S = 2048, 64 << 20, 0.25


def c_worker(url: str, lake: Path, duckdb_threads: int, group_msgs: int, cpu: int) -> dict:
    """One C collector: pull, append to the lake, ack, until a pull finds
    nothing; its CPU and wall time over the loop (not the start-up). It
    starts when a line comes on stdin, so several start together. cpu >= 0:
    it runs on that CPU only."""
    from hushmon.transport.fastcollect import FastSource
    from hushmon.transport.lake_writer import LakeWriter

    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    writer = LakeWriter(lake)
    if duckdb_threads:
        writer.con.execute(f"SET threads = {int(duckdb_threads)}").fetchall()
    source = FastSource(url)
    source.note_stored(writer.newest_seqs())
    print("ready", flush=True)
    sys.stdin.readline()
    stored = values = groups = 0
    started_s, cpu0 = time.time(), time.process_time()
    ended_s, cpu1 = started_s, cpu0
    phase = {"fetch": 0.0, "append": 0.0, "ack": 0.0}
    try:
        while True:
            t0 = time.process_time()
            group = source.fetch_group(group_msgs, GROUP_BYTES, FETCH_TIMEOUT_S)
            if source.messages == 0:
                break
            t1 = time.process_time()
            appended, _events = writer.append(group)
            t2 = time.process_time()
            source.ack_group()
            phase["fetch"] += t1 - t0
            phase["append"] += t2 - t1
            phase["ack"] += time.process_time() - t2
            stored += len(appended.kept)
            values += appended.values
            groups += 1
            ended_s, cpu1 = time.time(), time.process_time()
    finally:
        source.close()
        commits = writer.commits
        writer.close()
    # a writer from before the files were written outside the lock (a copy of
    # an older tree on PYTHONPATH, for a side-by-side run) has no split
    if hasattr(writer, "files_cpu_s"):
        phase["append: files"] = writer.files_cpu_s
        phase["append: transaction"] = writer.commit_cpu_s
    return {"batches_stored": stored, "values_stored": values, "groups": groups,
            "commits": commits.commits, "retries": commits.retries,
            "commit_wait_s": commits.waited_s,
            "lock_held_s": getattr(writer, "lock_held_s", None),
            "commit_wall_s": getattr(writer, "commit_wall_s", None),
            "cpu_seconds": cpu1 - cpu0, "start": started_s, "end": ended_s,
            "phases": phase}  # fmt: skip


def tree_env(tree: Path | None) -> dict[str, str] | None:
    """The environment of a collector run from another checkout (its Python
    package and its built libhushmon_collect), or None for this one."""
    if tree is None:
        return None
    lib = tree / "build" / "lib" / "libhushmon_collect.so"
    if not (tree / "python" / "hushmon").is_dir() or not lib.is_file():
        raise SystemExit(
            f"--baseline {tree}: expected python/hushmon and build/lib/libhushmon_collect.so there"
        )
    return {**os.environ, "PYTHONPATH": str(tree / "python"), "HUSHMON_COLLECT_LIB": str(lib)}


def c_workers(
    url: str,
    lake: Path,
    count: int,
    duckdb_threads: int,
    group_msgs: int,
    pin: bool,
    tree: Path | None = None,
) -> list[dict]:
    """count C collectors at once on one consumer and lake (fresh processes,
    started together once each has opened the lake and bound the consumer);
    pin: collector i on CPU i (of those this process may use); tree: the
    collectors run another checkout's code (--baseline)."""
    cpus = sorted(os.sched_getaffinity(0))
    env = tree_env(tree)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--c-worker",
                url,
                str(lake),
                str(duckdb_threads),
                str(group_msgs),
                str(cpus[i % len(cpus)] if pin else -1),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(count)
    ]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit("a C collector did not start")
    for p in procs:  # all at once: communicate() would wait for each to end first
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    out = []
    for p in procs:
        text, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a C collector failed (exit {p.returncode})")
        out.append(json.loads(text))
    return out


def python_workers(
    url: str,
    lake: Path,
    count: int,
    _duckdb_threads: int,
    group_msgs: int,
    _pin: bool,
    _tree: Path | None = None,
) -> list[dict]:
    """count ``hushmon collect --once`` at once (all but one --raw-only)."""
    base = [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--db", str(lake),
            "--once", "--json", "-", "--fetch-batch", str(group_msgs)]  # fmt: skip
    procs = [
        subprocess.Popen(base + (["--raw-only"] if i else []), stdout=subprocess.PIPE, text=True)
        for i in range(count)
    ]
    out = []
    for p in procs:
        text, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"a Python collector failed (exit {p.returncode})")
        rep = json.loads(text)
        out.append({"batches_stored": rep["batches_stored"], "cpu_seconds": rep["cpu_seconds"],
                    "seconds": rep["seconds"]})  # fmt: skip
    return out


def age_lake(lake: Path, snapshots: int) -> None:
    """A lake that has seen ``snapshots`` commits (one event row each, as a
    long-running site's catalog holds snapshots until compaction expires
    them): does a commit cost more in an older catalog?"""
    from hushmon.store.lake import lake_commit
    from hushmon.transport.collect_records import Event
    from hushmon.transport.lake_writer import LakeWriter, insert_events

    writer = LakeWriter(lake)
    try:
        event = [Event("bench", "none", "none", None, None, 1, "a snapshot")]
        for _ in range(snapshots):
            lake_commit(writer.con, lambda con: insert_events(con, event))
    finally:
        writer.close()


def engine_run(
    tmp: Path,
    items: list[tuple[str, str, bytes, dict[str, str]]],
    engine: str,
    count: int,
    duckdb_threads: int = 0,
    group_msgs: int = GROUP_MSGS,
    pin: bool = False,
    tree: Path | None = None,
    snapshots: int = 0,
) -> list[dict]:
    """Publishes the batches to a fresh server, then count collectors of the
    engine collect them into a fresh lake at once: the stream is full before
    they start, so the publisher does not compete with them for the CPUs."""
    tmp.mkdir()
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=tmp / "js"), tmp)
    server.start()
    try:
        ensure_streams(server.url, consumers=site_consumers(()))
        asyncio.run(publish(server.url, items))
        if snapshots:
            age_lake(tmp / "collected.lake", snapshots)
        run = c_workers if engine == "c" else python_workers
        reports = run(
            server.url, tmp / "collected.lake", count, duckdb_threads, group_msgs, pin, tree
        )
    finally:
        server.stop()
    stored = sum(r["batches_stored"] for r in reports)
    if stored != len(items):
        raise SystemExit(f"{engine} x{count}: stored {stored} of {len(items)} batches")
    return reports


def wall_s(reports: list[dict]) -> float:
    if all("start" in r for r in reports):
        return max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return max(r["seconds"] for r in reports)


def print_engines(runs: dict[tuple[str, int], list[dict]], reducer_rate: float | None) -> None:
    rate: dict[tuple[str, int], float] = {}
    for (engine, count), reports in runs.items():
        stored = sum(r["batches_stored"] for r in reports)
        cpu_s = sum(r["cpu_seconds"] for r in reports)
        rate[(engine, count)] = stored / cpu_s
        each = ", ".join(f"{r['batches_stored']}" for r in reports)
        wall = wall_s(reports)
        print(
            f"engine {engine} x{count} into a lake: {stored} batches ({each}) in {wall:.1f} s "
            f"= {stored / wall:,.0f} batches/s; CPU {cpu_s:.2f} s = "
            f"{1e6 * cpu_s / stored:.0f} us per batch = {stored / cpu_s:,.0f} batches per CPU-s"
        )
        if all("phases" in r for r in reports):
            split = {k: sum(r["phases"].get(k, 0.0) for r in reports) for k in reports[0]["phases"]}
            print(
                "  CPU per batch by phase: "
                + ", ".join(f"{k} {1e6 * v / stored:.0f} us" for k, v in split.items())
                + f"; lake commits {sum(r['commits'] for r in reports)}, retried "
                f"{sum(r['retries'] for r in reports)} (another writer's commit in the way), "
                f"{sum(r['commit_wait_s'] for r in reports):.1f} s waited"
            )
        if all(r.get("lock_held_s") is not None for r in reports):
            print(
                "  each collector's wall time: holding the commit lock "
                + ", ".join(f"{r['lock_held_s'] / wall:.0%}" for r in reports)
                + "; in lake_commit (waiting for the lock included) "
                + ", ".join(f"{r['commit_wall_s'] / wall:.0%}" for r in reports)
            )
    for engine in dict.fromkeys(k[0] for k in runs):
        ones = [k for k in runs if k[0] == engine and k[1] == 1]
        many = [k for k in runs if k[0] == engine and k[1] > 1]
        if ones and many:
            r1, rn = runs[ones[0]], runs[many[0]]
            t1 = sum(r["batches_stored"] for r in r1) / wall_s(r1)
            tn = sum(r["batches_stored"] for r in rn) / wall_s(rn)
            print(
                f"engine {engine}: {many[0][1]} processes / 1 = {tn / t1:.2f} x batches/s, "
                f"{rate[many[0]] / rate[ones[0]]:.2f} x batches per CPU-s"
            )
    if ("c", 1) in rate and ("python", 1) in rate:
        print(f"C / Python (batches per CPU-s, one process) = "
              f"{rate[('c', 1)] / rate[('python', 1)]:.2f}")  # fmt: skip
    if reducer_rate is not None:
        for (engine, count), r in rate.items():
            if count == 1:
                print(f"{engine} collector / rack reducer (per CPU-s) = {r / reducer_rate:.2f}")


def main() -> int:
    if len(sys.argv) == 7 and sys.argv[1] == "--c-worker":
        url, lake, threads, group, cpu = sys.argv[2:]
        print(json.dumps(c_worker(url, Path(lake), int(threads), int(group), int(cpu))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument(
        "--reducers", action="store_true", help="also run bench_reduce.py --quick for the ratio"
    )
    ap.add_argument(
        "--store",
        choices=("duckdb", "lake", "both"),
        default="duckdb",
        help="collect into the embedded DuckDB file, a lake, or both one after the other "
        "(the same stream published again; the lake's rate as a ratio of the file's)",
    )
    ap.add_argument(
        "--engine",
        choices=("python", "c", "both"),
        default="python",
        help="c: the C hot path (libhushmon_collect) into a lake; both: beside the Python "
        "collector on the same stream, as a ratio",
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=2,
        help="with --engine: also this many collectors of each engine sharing collect-raw",
    )
    ap.add_argument(
        "--duckdb-threads",
        type=int,
        default=0,
        help="with --engine c: also run the C collectors with the lake writer's DuckDB "
        "limited to this many threads (0: only as the writer is, DuckDB's default)",
    )
    ap.add_argument(
        "--group-msgs",
        default=str(GROUP_MSGS),
        help="with --engine: batches per group (a lake commit), a comma list to compare "
        "(the collector's --fetch-batch; default %(default)s)",
    )
    ap.add_argument(
        "--pin",
        action="store_true",
        help="with --engine: collector i of a run on CPU i (sched_setaffinity)",
    )
    ap.add_argument(
        "--baseline",
        metavar="TREE",
        help="with --engine c: also run the C collector of another checkout (its python/ and "
        "build/lib/libhushmon_collect.so) on the same stream, right after this one's: the "
        "before/after ratio",
    )
    ap.add_argument(
        "--snapshots",
        type=int,
        default=0,
        help="with --engine: each run's lake has seen this many one-row commits before "
        "the collectors start (a catalog holding a long run's snapshots)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="with --engine: run every configuration this many times, in turn",
    )
    args = ap.parse_args()
    if args.engine != "python":
        return engines_main(args)
    stores = ("duckdb", "lake") if args.store == "both" else (args.store,)
    sc = Scenario(nodes=args.nodes, seconds=args.seconds, job="bench")
    with tempfile.TemporaryDirectory(prefix="hm-bench-collect-") as tmp_name:
        tmp = Path(tmp_name)
        items = batches(sc)
        lines = sum(d.count(b"\n") for _r, _h, d, _x in items)
        runs = {kind: collect_run(tmp / kind, items, kind) for kind in stores}
        pub_s, report, process_cpu_s, db = runs[stores[0]]
        partials = rack_partials(items)
        sums_per_cpu_s = summary_rate(db, partials)
        write_spool(sc, tmp / "spool")
        ing = ingest_spool(tmp / "ingested.duckdb", tmp / "spool")
    load = os.getloadavg()
    reducer_rate = reducers_rate() if args.reducers else None
    print(
        f"synthetic job: {args.nodes} nodes x {args.seconds} s = {len(items)} batches, "
        f"{lines:,} lines, {ing.values_stored:,} values"
    )
    print(f"publish (nats-py, JetStream acks, 256 in flight): {len(items) / pub_s:,.0f} batches/s")
    for kind, (_p, rep, cpu_s, _db) in runs.items():
        print(
            f"hushmon collect --once into {kind}: {rep['batches_stored']} batches in "
            f"{rep['seconds']:.1f} s = {rep['batches_per_s']:,.0f} batches/s, "
            f"{rep['lines_per_s']:,.0f} lines/s, "
            f"{rep['values_stored'] / rep['seconds']:,.0f} values/s"
        )
        # a collector before issue 20 reports no CPU: its process's is all there is
        rate = rep.get("batches_per_cpu_s")
        call = (
            f"{rep['cpu_seconds']:.2f} s in the collect call = {rate:,.0f} batches per CPU-s; "
            if rate
            else ""
        )
        print(
            f"collector CPU ({kind}): {call}{cpu_s:.2f} s for the process with its start-up = "
            f"{rep['batches_stored'] / cpu_s:,.0f} batches per CPU-s"
        )
    if len(runs) == 2:
        file_rate, lake_rate = (r[1].get("batches_per_cpu_s") or 0.0 for r in runs.values())
        print(f"lake / duckdb file (batches per CPU-s of the collect call) = "
              f"{lake_rate / file_rate:.2f}")  # fmt: skip
    stored = report["batches_stored"]
    call_rate = report.get("batches_per_cpu_s")
    print(
        f"hushmon ingest (same lines as spool files): {ing.values_per_s:,.0f} values/s; "
        f"collect / ingest = {report['values_stored'] / report['seconds'] / ing.values_per_s:.2f}"
    )
    nsens = len(json.loads(partials[0].data)["sensors"])
    print(
        f"summaries ({stores[0]}): {len(partials)} rack partials of {nsens} sensors, groups of 64: "
        f"{sums_per_cpu_s:,.0f} per CPU-s ({len(partials) / len(items):.2f} per batch here)"
    )
    if reducer_rate is not None:
        print(
            f"rack reducer (bench_reduce.py --quick): {reducer_rate:,.0f} node-batches per CPU-s; "
            f"collector / reducer = {(call_rate or stored / process_cpu_s) / reducer_rate:.2f}"
        )
    print(
        f"load average while measured: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
        f"({os.cpu_count()} CPUs)"
    )
    return 0


def engines_main(args: argparse.Namespace) -> int:
    """The engines side by side: one process each, then --processes each;
    with --baseline, another checkout's C collector beside this one's on
    the same stream, run after run (--repeat)."""
    engines = ("python", "c") if args.engine == "both" else ("c",)
    baseline = Path(args.baseline).resolve() if args.baseline else None
    tree_env(baseline)  # a bad folder: one line, before anything runs
    sc = Scenario(nodes=args.nodes, seconds=args.seconds, job="bench")
    items = batches(sc)
    lines = sum(d.count(b"\n") for _r, _h, d, _x in items)
    runs: dict[tuple[str, int], list[dict]] = {}
    try:
        sizes = [int(g) for g in args.group_msgs.split(",")]
    except ValueError:
        raise SystemExit(
            f"--group-msgs {args.group_msgs!r}: expected numbers, e.g. 2048,8192"
        ) from None
    if not sizes or min(sizes) < 1:
        raise SystemExit("--group-msgs: each size must be at least 1")
    if args.repeat < 1 or args.snapshots < 0:
        raise SystemExit("--repeat: at least 1; --snapshots: not negative")
    load0 = os.getloadavg()
    loads: list[float] = []
    reducer_rate = None
    with tempfile.TemporaryDirectory(prefix="hm-bench-collect-") as tmp_name:
        tmp = Path(tmp_name)
        counts = (1, args.processes) if args.processes > 1 else (1,)
        for rep in range(args.repeat):
            again = "" if args.repeat == 1 else f" #{rep + 1}"
            for size in sizes:
                tag = ("" if len(sizes) == 1 else f" g{size}") + again
                for count in counts:
                    kinds: list[tuple[str, str, Path | None]] = [(e, e, None) for e in engines]
                    if baseline is not None:
                        kinds.append(("c-baseline", "c", baseline))
                    for name, engine, tree in kinds:
                        runs[(name + tag, count)] = engine_run(
                            tmp / f"{name}{count}-{size}{rep}",
                            items,
                            engine,
                            count,
                            group_msgs=size,
                            pin=args.pin,
                            tree=tree,
                            snapshots=args.snapshots,
                        )
                        loads.append(os.getloadavg()[0])
                    if args.duckdb_threads:
                        name = f"c-threads{args.duckdb_threads}{tag}"
                        runs[(name, count)] = engine_run(
                            tmp / f"{name}-{count}-{size}{rep}",
                            items,
                            "c",
                            count,
                            args.duckdb_threads,
                            group_msgs=size,
                            pin=args.pin,
                        )
        if args.reducers:
            reducer_rate = reducer_on_stream(tmp / "reducers", items)
    load = os.getloadavg()
    print(
        f"synthetic job: {args.nodes} nodes x {args.seconds} s = {len(items)} batches, "
        f"{lines:,} lines ({lines / len(items):.0f} per batch), published period after period"
    )
    print_engines(runs, reducer_rate)
    if baseline is not None:
        print_baseline(runs, baseline)
    print_side_by_side(runs, reducer_rate)
    print(
        f"load average while measured: {load0[0]:.1f} at the start, 1-min "
        f"{min(loads):.1f}-{max(loads):.1f} after each run, {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f} at the end ({os.cpu_count()} CPUs)"
    )
    return 0


def _per_cpu_s(reports: list[dict]) -> float:
    return sum(r["batches_stored"] for r in reports) / sum(r["cpu_seconds"] for r in reports)


def print_baseline(runs: dict[tuple[str, int], list[dict]], tree: Path) -> None:
    """This checkout's C collector / the baseline's, run by run."""
    for (name, count), reports in runs.items():
        if not name.startswith("c-baseline"):
            continue
        mine = runs.get(("c" + name[len("c-baseline") :], count))
        if mine is None:
            continue
        print(
            f"C collector x{count}{name[len('c-baseline') :]}: this tree / {tree} = "
            f"{_per_cpu_s(mine) / _per_cpu_s(reports):.2f} x batches per CPU-s "
            f"({_per_cpu_s(mine):,.0f} against {_per_cpu_s(reports):,.0f})"
        )


def print_side_by_side(runs: dict[tuple[str, int], list[dict]], reducer_rate: float | None) -> None:
    """Per group size (and run): one C collector, N sharing the stream and the
    rack reducers on the same stream, node-batches per CPU-s (and per wall s)."""
    names = [n for n in dict.fromkeys(k[0] for k in runs) if n == "c" or n.startswith("c ")]
    if not names:
        return
    red = f"{reducer_rate:,.0f}" if reducer_rate else "-"
    print("node-batches per CPU-s (per wall s), same stream:")
    for name in names:
        cells = []
        for (n, count), reports in runs.items():
            if n == name:
                cells.append(
                    f"{count} collector{'s' if count > 1 else ''} {_per_cpu_s(reports):,.0f} "
                    f"({sum(r['batches_stored'] for r in reports) / wall_s(reports):,.0f})"
                )
        print(f"  {name:12s} " + " | ".join(cells) + f" | rack reducers {red}")


if __name__ == "__main__":
    sys.exit(main())
