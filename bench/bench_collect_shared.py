"""Several ``hushmon collect`` on one durable consumer into one lake.

The synthetic job of bench_collect.py (--nodes x --seconds at 1 Hz, the
agent's field set, one batch per node and period) is published to HM_RAW of
a fresh local nats-server, then drained by 1 collector, and (a fresh server
and lake, the same batches) by --collectors collectors at once sharing
``collect-raw`` (all but one ``--raw-only``). Printed per run: wall seconds,
the collectors' CPU (their collect calls, summed), batches per CPU-s and per
wall second, and the check that every batch is stored once. The last
line is the N-collector rate over the 1-collector rate, per CPU-s and per
wall second. The machine is shared: the load average is printed with them.

    .venv/bin/python bench/bench_collect_shared.py [--nodes 256 --seconds 60] [--collectors 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_collect import batches, publish

from hushmon.store.lake import open_lake
from hushmon.store.schema import open_store_readonly
from hushmon.store.synthetic import Scenario
from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
)


def drain(tmp: Path, items: list, collectors: int) -> dict:
    """Publishes the batches to a fresh server, drains them with that many
    collectors at once into a fresh lake; their figures and the store's check."""
    tmp.mkdir()
    lake = tmp / "c.lake"
    server = LocalNatsServer(NatsServerConfig(name="bench", store_dir=tmp / "js"), tmp)
    server.start()
    try:
        ensure_streams(server.url)
        asyncio.run(publish(server.url, items))
        argv = [sys.executable, "-m", "hushmon.cli", "collect", "--url", server.url,
                "--db", str(lake), "--once", "--json", "-"]  # fmt: skip
        open_lake(lake).close()  # made first: the collectors' time is their work
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                argv + (["--raw-only"] if i else []),
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for i in range(collectors)
        ]
        reports = [json.loads(p.communicate()[0]) for p in procs]
        wall_s = time.perf_counter() - started
        if any(p.returncode for p in procs):
            raise SystemExit("a collector failed")
    finally:
        server.stop()
    con = open_store_readonly(lake)
    try:
        rows, identities = con.execute(
            "SELECT count(*), count(DISTINCT (host, epoch, seq)) FROM transport_batches"
        ).fetchall()[0]
    finally:
        con.close()
    return {
        "wall_s": wall_s,
        "cpu_s": sum(r["cpu_seconds"] for r in reports),
        "stored": sum(r["batches_stored"] for r in reports),
        "per_collector": [r["batches_stored"] for r in reports],
        "rows": int(rows),
        "identities": int(identities),
    }


def _once(run: dict, batches: int) -> str:
    return "once each" if run["rows"] == run["identities"] == batches else "NOT once each"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--collectors", type=int, default=2)
    args = ap.parse_args()
    items = batches(Scenario(nodes=args.nodes, seconds=args.seconds, job="bench"))
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hm-bench-shared-") as tmp_name:
        tmp = Path(tmp_name)
        runs = {n: drain(tmp / f"x{n}", items, n) for n in (1, args.collectors)}
    load = os.getloadavg()
    print(f"synthetic job: {args.nodes} nodes x {args.seconds} s = {len(items)} batches")
    for n, r in runs.items():
        print(
            f"{n} collector(s): {r['stored']} batches stored ({r['per_collector']}) in "
            f"{r['wall_s']:.1f} s, {r['cpu_s']:.2f} CPU-s = {r['stored'] / r['cpu_s']:,.0f} "
            f"batches per CPU-s, {r['stored'] / r['wall_s']:,.0f} per s; lake: {r['rows']} rows "
            f"for {r['identities']} identities ({_once(r, len(items))})"
        )
    one, many = runs[1], runs[args.collectors]
    print(
        f"{args.collectors} / 1 collector: per CPU-s "
        f"{(many['stored'] / many['cpu_s']) / (one['stored'] / one['cpu_s']):.2f}, "
        f"per wall second {(many['stored'] / many['wall_s']) / (one['stored'] / one['wall_s']):.2f}"
    )
    print(
        f"load average before: {load_before[0]:.1f}; after: {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f} ({os.cpu_count()} CPUs)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
