"""``hushmon digest JOB``: the job's report, digest.json and vector exports."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data
from hushmon.display import printable
from hushmon.errors import HushmonError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "digest",
        help="analyze a job from the store: what limits its scalability",
        description="Build a job's digest from the store: min/avg/max of every sensor across "
        "nodes, states, dependencies and the factors that limit scalability (network "
        "bandwidth, topology, disk and swap, imbalance, idle CPUs; on GPU nodes idle GPUs, "
        "GPU memory near full, throttling, PCIe transfers). Writes report.html, "
        "digest.json and the vectors as CSV, Parquet and ARFF.",
    )
    p.add_argument("job", help="job ID (see 'hushmon ingest --list')")
    add_data_dir_options(p)
    p.add_argument("--out", type=Path, help="output folder (default <data>/reports/JOB)")
    p.add_argument("--json", metavar="FILE|-", help="also write digest.json here ('-' = stdout)")
    p.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="Slurm's topology.conf: which nodes share a rack and the uplinks' speed "
        "(default: the folder of $SLURM_CONF, then /etc/slurm; else what an earlier digest "
        "of the job recorded)",
    )
    p.add_argument(
        "--max-bins",
        type=int,
        metavar="N",
        help="read a job with more periods than N as per-node bins (default: [resolution] "
        "max_bins in factors/parameters.toml, 720); a large N reads every period",
    )
    p.add_argument(
        "--from-summaries",
        action="store_true",
        help="from the job-wide summaries hushmon collect stored (cluster mode), not raw data: "
        "min/avg/max per sensor over nodes per period; states what that loses",
    )
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    # imported here: matplotlib and scipy would slow every hushmon command's start
    from hushmon.digest.build import build_digest

    dd, db = from_args(args)
    if args.max_bins is not None and args.max_bins < 2:
        raise HushmonError(f"--max-bins must be at least 2, not {args.max_bins}")
    if args.from_summaries:
        from hushmon.digest.sumdigest import digest_from_summaries

        small = digest_from_summaries(db, args.job, args.out or dd.reports(args.job))
        human = jsonio.human_stream(args.json)
        for line in small.summary_lines():
            print(printable(line), file=human)
        if args.json:
            jsonio.emit(args.json, json.loads(small.json_path.read_text(encoding="utf-8")))
        return 0
    digest = build_digest(
        db, args.job, args.out or dd.reports(args.job), args.topology, args.max_bins
    )
    human = jsonio.human_stream(args.json)
    for line in digest.summary_lines():
        print(printable(line), file=human)
    if args.json:
        jsonio.emit(args.json, json.loads(digest.json_path.read_text(encoding="utf-8")))
    return 0
