"""The summary collector's store alone (no server): its resident size over
many summary groups on one lake, with the lake writer's reopen every
REOPEN_EVERY_COMMITS transactions (this tree) and without it (the limit
set past the run), both at once in two processes.

Each group is one period's messages as the reducers send them
(bench_summary_collect.messages: a rack partial per rack and a summary per
job), written by ``LakeCollectorStore.write_summaries`` in one commit, as a
collector that keeps up writes a group a period. Printed every 60 groups
per side: resident MiB, the data files and snapshots in the catalog, the
reopens so far; the difference shows what a connection that is never
opened again keeps (DuckLake's per-connection stats cache: lake_writer.py).

    .venv/bin/python bench/bench_lake_writer_memory.py [--groups 600]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_795_000_000_000_000_000


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker(lake: Path, groups: int, reopen_every: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_summary_collect as summary_bench

    from hushmon.transport import lake_writer
    from hushmon.transport.collect_lake import LakeCollectorStore
    from hushmon.transport.collect_store import Message

    lake_writer.REOPEN_EVERY_COMMITS = reopen_every
    shape = argparse.Namespace(racks=4, racks_per_job=2, sensor_nodes=8)
    periods = summary_bench.messages(shape, 200, 60)
    store = LakeCollectorStore(lake)
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
                print(
                    f"{p} {rss_mib():.1f} {files} {snaps} {store.writer.reopens}",
                    flush=True,
                )
    finally:
        store.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=600)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(Path(a.worker[0]), int(a.worker[1]), int(a.worker[2]))
        return 0
    if a.groups < 2:
        print("bench_lake_writer_memory: --groups must be at least 2", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT / "python"))
    from hushmon.transport.lake_writer import REOPEN_EVERY_COMMITS

    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"# bench_lake_writer_memory: {a.groups} groups; /proc/loadavg before: {load}")
    sides = {"reopen": REOPEN_EVERY_COMMITS, "never": 10**9}
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
                ],
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT / "python")},
            )
            for name, every in sides.items()
        }
        outs = {name: p.communicate()[0].split("\n") for name, p in procs.items()}
        if any(p.returncode != 0 for p in procs.values()):
            print("bench_lake_writer_memory: a worker failed", file=sys.stderr)
            return 1
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"# /proc/loadavg after: {load}")
    print(
        f"{'group':>6} {'files':>6}  resident MiB: reopen every {REOPEN_EVERY_COMMITS} "
        "(reopens so far) / never"
    )
    rows = zip(*(o for o in outs.values() if o), strict=False)
    for a_line, b_line in rows:
        if not a_line or not b_line:
            continue
        g, mib_a, files, _snaps, reopens = a_line.split()
        mib_b = b_line.split()[1]
        print(f"{g:>6} {files:>6}  {float(mib_a):8.1f} ({reopens}) / {float(mib_b):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
