"""``hushmon digest JOB``: the job's report, digest.json and vector exports."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hushmon.datadir import data_dir


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "digest",
        help="analyze a job from the store: what limits its scalability",
        description="Build a job's digest from the store: min/avg/max of every sensor across "
        "nodes, states, dependencies and the factors that limit scalability (network "
        "bandwidth, topology, disk and swap, imbalance, idle CPUs). Writes report.html, "
        "digest.json and the vectors as CSV, Parquet and ARFF.",
    )
    p.add_argument("job", help="job ID (see 'hushmon ingest --list')")
    p.add_argument(
        "--data-dir", help="hushmon data folder (default $HUSHMON_DATA or ~/.local/share/hushmon)"
    )
    p.add_argument("--db", type=Path, help="store file (default <data>/hushmon.duckdb)")
    p.add_argument("--out", type=Path, help="output folder (default <data>/reports/JOB)")
    p.add_argument("--json", metavar="FILE", help="also write digest.json here ('-' = stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: matplotlib and scipy would slow every hushmon command's start
    from hushmon.digest.build import build_digest

    dd = data_dir(args.data_dir)
    digest = build_digest(args.db or dd.database, args.job, args.out or dd.reports(args.job))
    for line in digest.summary_lines():
        print(line)
    if args.json:
        text = digest.json_path.read_text(encoding="utf-8")
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
    return 0
