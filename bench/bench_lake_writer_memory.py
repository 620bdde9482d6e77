"""The summary collector's store alone (no server): its resident size over
many summary groups on one lake, with the lake writer's reopen every
REOPEN_EVERY_COMMITS transactions (this tree) and without it (the limit
set past the run), both at once in two processes.

Each group is one period's messages as the reducers send them
(bench_summary_collect.messages: a rack partial per rack and a summary per
job), written by ``LakeCollectorStore.write_summaries`` in one commit, as a
collector that keeps up writes a group a period (``--every-s``: that
pace; 0, as fast as it can). ``--raw-writer`` adds, beside each side, a
process that commits a 2,000-row data file to the same lake every 0.5 s, as
the raw collectors do at a site: each of the summary writer's
transactions then meets a new snapshot of a growing catalog. Printed every
60 groups per side: resident MiB, the data files in the catalog, the
reopens so far, glibc's bytes in use and DuckDB's own allocator's resident
MiB (store/duckdb_heap.py); the difference shows what a connection that is
never opened again keeps (DuckLake's per-connection caches: lake_writer.py).

    .venv/bin/python bench/bench_lake_writer_memory.py [--groups 600] [--every-s 1] [--raw-writer]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_795_000_000_000_000_000
RAW_EVERY_S = 0.5
STARTUP_S = 5.0


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def raw_writer(lake: Path) -> None:
    """A 2,000-row file into ``samples`` every 0.5 s until killed (the raw
    collectors' commits, as far as the catalog sees them)."""
    from hushmon.store.lake import lake_commit, open_lake

    con = open_lake(lake)
    started, n = time.monotonic(), 0
    while True:
        sql = (
            f"INSERT INTO samples SELECT range % 97, {n}::BIGINT * 1000000000 + range, "
            "random() FROM range(2000)"
        )
        lake_commit(con, lambda c, sql=sql: c.execute(sql).fetchall())
        n += 1
        time.sleep(max(0.0, started + n * RAW_EVERY_S - time.monotonic()))


def worker(lake: Path, groups: int, reopen_every: int, every_s: float) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_summary_collect as summary_bench

    from hushmon.store import duckdb_heap
    from hushmon.transport import lake_writer
    from hushmon.transport.collect_lake import LakeCollectorStore
    from hushmon.transport.collect_store import Message
    from hushmon.transport.memdump import malloc_mib

    lake_writer.REOPEN_EVERY_COMMITS = reopen_every
    shape = argparse.Namespace(racks=4, racks_per_job=2, sensor_nodes=8)
    periods = summary_bench.messages(shape, 200, 60)
    store = LakeCollectorStore(lake)
    started = time.monotonic()
    try:
        for p in range(groups):
            t = T0 + p * 10**9
            msgs = []
            for i, (subject, _headers, data) in enumerate(periods[p % len(periods)]):
                obj = json.loads(data)
                obj["time_ns"] = t
                for source in obj["sources"]:
                    source[2] = p + 1
                msg_id = f"{subject}:{obj['job']}:{t}"
                payload = json.dumps(obj).encode()
                msgs.append(Message(subject, {"Nats-Msg-Id": msg_id}, payload, p * 100 + i + 1))
            store.write_summaries(msgs)
            if p % 60 == 0 or p == groups - 1:
                cat = sqlite3.connect(f"file:{lake}/catalog.sqlite?mode=ro", uri=True)
                files = cat.execute(
                    "SELECT count(*) FROM ducklake_data_file WHERE end_snapshot IS NULL"
                ).fetchone()[0]
                snaps = cat.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0]
                cat.close()
                glibc, duck = malloc_mib(), duckdb_heap.stats_mib()
                in_use = glibc["in_use"] if glibc else float("nan")
                duck_mib = duck["resident"] if duck else float("nan")
                print(
                    f"{p} {rss_mib():.1f} {files} {snaps} {store.writer.reopens} "
                    f"{in_use:.1f} {duck_mib:.1f}",
                    flush=True,
                )
            time.sleep(max(0.0, started + (p + 1) * every_s - time.monotonic()))
    finally:
        store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=600)
    ap.add_argument("--every-s", type=float, default=0.0, help="a group every S seconds")
    ap.add_argument("--raw-writer", action="store_true", help="a raw-like writer beside each")
    ap.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--raw-worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(Path(a.worker[0]), int(a.worker[1]), int(a.worker[2]), float(a.worker[3]))
        return 0
    if a.raw_worker:
        raw_writer(Path(a.raw_worker))
        return 0
    if a.groups < 2 or a.every_s < 0:
        print("bench_lake_writer_memory: --groups must be at least 2, --every-s >= 0",
              file=sys.stderr)  # fmt: skip
        return 2
    sys.path.insert(0, str(ROOT / "python"))
    from hushmon.transport.lake_writer import REOPEN_EVERY_COMMITS

    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(
        f"# bench_lake_writer_memory: {a.groups} groups, every {a.every_s:g} s, "
        f"{'a raw writer beside each' if a.raw_writer else 'no raw writer'}; "
        f"/proc/loadavg before: {load}"
    )
    sides = {"reopen": REOPEN_EVERY_COMMITS, "never": 10**9}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    with tempfile.TemporaryDirectory(prefix="hm-lake-mem-") as tmp_name:
        tmp = Path(tmp_name)
        procs = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(tmp / f"{name}.lake"),
                    str(a.groups),
                    str(every),
                    str(a.every_s),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for name, every in sides.items()
        }
        writers = []
        if a.raw_writer:
            time.sleep(STARTUP_S)  # each side makes its lake first
            writers = [
                subprocess.Popen(
                    [sys.executable, __file__, "--raw-worker", str(tmp / f"{name}.lake")], env=env
                )
                for name in sides
            ]
        try:
            outs = {name: p.communicate()[0].split("\n") for name, p in procs.items()}
        finally:
            for w in writers:
                w.kill()
                w.wait()
        if any(p.returncode != 0 for p in procs.values()):
            print("bench_lake_writer_memory: a worker failed", file=sys.stderr)
            return 1
        if any(w.returncode not in (0, -9) for w in writers):
            print("bench_lake_writer_memory: a raw writer failed", file=sys.stderr)
            return 1
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"# /proc/loadavg after: {load}")
    print(
        f"{'group':>6} {'files':>6}  MiB resident, glibc in use, DuckDB's allocator resident: "
        f"reopen every {REOPEN_EVERY_COMMITS} (reopens so far) / never"
    )
    rows = zip(*(o for o in outs.values() if o), strict=False)
    for a_line, b_line in rows:
        if not a_line or not b_line:
            continue
        g, mib_a, files, _snaps, reopens, glibc_a, duck_a = a_line.split()
        _g, mib_b, _f, _s, _r, glibc_b, duck_b = b_line.split()
        print(
            f"{g:>6} {files:>6}  {float(mib_a):7.1f} {float(glibc_a):5.1f} {float(duck_a):5.1f}"
            f" ({reopens}) / {float(mib_b):7.1f} {float(glibc_b):5.1f} {float(duck_b):5.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
