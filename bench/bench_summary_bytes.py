"""Bytes of the summaries tier per running job and day, for the sizing rule.

A job of --nodes nodes x --seconds periods at 1 Hz in racks of 40 (~100
sensors with their quantile sketches, bench_summary_read.py's builder) is
stored as the collector stores it since store schema 3 (rack partials),
then ``hushmon store compact`` stores its closed periods merged and a second
compaction flushes what the first left inlined; ``store status``'s
summaries tier then gives the bytes, over the periods: bytes per job-period
and per running job-day, and per stored row. The same job written merged
from the start (the layout before schema 3) is printed beside it. The load
average is printed with the figures.

    .venv/bin/python bench/bench_summary_bytes.py [--nodes 80] [--seconds 600]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import bench_summary_read as builder

from hushmon.store.lake_status import lake_status

NS_PER_S = 1_000_000_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=80)
    ap.add_argument("--seconds", type=int, default=600)
    args = ap.parse_args()
    if args.nodes < 1 or args.seconds < 1:
        raise SystemExit("bench_summary_bytes: --nodes and --seconds must be at least 1")
    nodes_per_rack = 40
    racks = -(-args.nodes // nodes_per_rack)
    tpl = builder.template(nodes_per_rack)
    now_ns = builder.T0 + (args.seconds + 7200) * NS_PER_S  # every period closed
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="hm-sumbytes-") as name:
        for layout in ("partials", "merged"):
            lake = Path(name) / f"{layout}.lake"
            builder.build(lake, layout, tpl, racks, args.nodes, args.seconds)
            for _ in range(2):  # store merged, then flush what that left inlined
                builder.compact_lake(lake, now_ns)
            tier = lake_status(lake, None, now_ns=now_ns)["tiers"]["summaries"]
            per_period = tier["bytes"] / args.seconds
            print(
                f"{layout:8s} -> compacted: {tier['bytes']:,} B in {tier['files']} files, "
                f"{tier['rows']:,} rows ({tier['bytes'] / max(1, tier['rows']):.1f} B per row); "
                f"{per_period:,.0f} B per job-period = "
                f"{per_period * 86_400 / 1e6:,.1f} MB per running job-day at 1 Hz "
                f"({args.nodes} nodes, {racks} racks)"
            )
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
