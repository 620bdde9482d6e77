"""``hushmon compare RUN...``: which factor's influence grows as the job grows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare runs of one program at several sizes: which factor grows",
        description="Compare jobs of the same program run at different process counts or "
        "problem sizes (which factor grows with the size), or runs of the same size side by "
        "side (which factor differs, and why). RUN is JOB or JOB@SIZE (SIZE defaults to the "
        "job's node count). With two runs (before and after removing a limit), each finding "
        "of the first that is gone or smaller in the second is shown with the run time its "
        "digest predicted removing it would save against the change measured: hit or miss.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="JOB, JOB@SIZE or JOB@SIZE=NAME")
    p.add_argument(
        "--size-is",
        choices=("processes", "problem"),
        default="processes",
        help="what SIZE counts: processes (work per process falls as SIZE grows) or "
        "problem size at a fixed process count",
    )
    add_data_dir_options(p)
    p.add_argument("--out", type=Path, help="output folder (default <data>/reports/compare-...)")
    p.add_argument("--json", metavar="FILE|-", help="also write compare.json here ('-' = stdout)")
    p.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="Slurm's topology.conf (default: as hushmon digest looks for it)",
    )
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    from hushmon.digest.compare import compare_runs, parse_run

    dd, db = from_args(args)
    jobs = [parse_run(r)[0] for r in args.runs]
    out = args.out or dd.reports("compare-" + "-".join(jobs))
    cmp = compare_runs(
        db,
        args.runs,
        out,
        size_label="processes" if args.size_is == "processes" else "problem size",
        work_per_process_falls_with_size=args.size_is == "processes",
        topology=args.topology,
        reports=dd.reports_root,
    )
    human = jsonio.human_stream(args.json)
    for line in cmp.summary_lines():
        print(line, file=human)
    if args.json:
        jsonio.emit(args.json, json.loads(cmp.json_path.read_text(encoding="utf-8")))
    return 0
