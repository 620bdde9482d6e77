"""``hushmon job ID``: a seff-like summary of a job for its user, from Slurm's
AdminComment (written at job end) or hushmon's store."""

from __future__ import annotations

import argparse
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args
from hushmon.display import printable
from hushmon.errors import HushmonError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "job",
        help="a job's summary (seff-like): efficiency, main finding, tags, report",
        description="Print a job's summary: CPU and GPU utilization, memory peak against "
        "the request, the main finding, tags and the report's link. Read from the "
        "AdminComment hushmon wrote into Slurm's record at job end (sacct, else scontrol), "
        "else from hushmon's store. --set-admin-comment writes it there (Slurm operators: "
        "from EpilogSlurmctld).",
    )
    p.add_argument("job", help="job ID")
    p.add_argument(
        "--from",
        dest="source",
        choices=("auto", "slurm", "store"),
        default="auto",
        help="auto: Slurm's AdminComment, else the store (default); slurm or store: only that",
    )
    p.add_argument(
        "--set-admin-comment",
        action="store_true",
        help="write the store's summary into the job's AdminComment (scontrol update; "
        "needs Slurm operator rights) and print it",
    )
    add_data_dir_options(p)
    p.add_argument("--json", metavar="FILE|-", help="the summary as JSON ('-' = stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hushmon.jobsum.at_end import summary_for_comment
    from hushmon.jobsum.fromstore import summary_from_store
    from hushmon.jobsum.slurm import set_admin_comment, summary_from_slurm
    from hushmon.jobsum.summary import seff_lines

    dd, db = from_args(args)
    human = jsonio.human_stream(args.json)
    if args.set_admin_comment:
        summary = summary_for_comment(dd, db, args.job)
        why = set_admin_comment(args.job, summary.to_comment())
        if why:
            raise HushmonError(f"job {args.job}: Slurm refused the AdminComment: {why}")
        print(f"job {args.job}: AdminComment set ({len(summary.to_comment())} characters)",
              file=human)  # fmt: skip
    else:
        from_slurm = summary_from_slurm(args.job) if args.source != "store" else None
        if from_slurm is None and args.source == "slurm":
            raise HushmonError(f"job {args.job}: Slurm holds no hushmon AdminComment for it")
        summary = from_slurm or summary_from_store(dd, db, args.job)
    for line in seff_lines(summary):
        print(printable(line), file=human)
    if args.json:
        jsonio.emit(args.json, summary.to_json())
    return 0
