"""``hushmon export --cc-archive DIR JOB...``: stored jobs for other tools."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data
from hushmon.display import printable
from hushmon.errors import HushmonError

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# meta.json's "shared" (archive version 3; version 2's "exclusive" 1, 2, 0)
SHARED = ("none", "single_user", "multi_user")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export",
        help="stored jobs in another tool's format (ClusterCockpit's job archive)",
        description="Write stored jobs in ClusterCockpit's job-archive layout "
        "(DIR/<cluster>/<id/1000>/<id%%1000>/<start>/meta.json and data.json, DIR/version.txt, "
        "DIR/<cluster>/cluster.json when absent), for cc-backend to load.",
    )
    p.add_argument("jobs", nargs="*", metavar="JOB", help="job IDs (integers: Slurm's)")
    p.add_argument("--all", action="store_true", help="every job in the store")
    p.add_argument("--cc-archive", type=Path, required=True, metavar="DIR",
                   help="the job archive's root folder")  # fmt: skip
    p.add_argument("--cluster", default="hushmon", help="the cluster's name (default hushmon)")
    p.add_argument("--subcluster", default="main", help="the sub-cluster's (default main)")
    p.add_argument("--shared", choices=SHARED, default="none",
                   help="how the jobs' nodes were shared: none (exclusive, default), "
                   "single_user, multi_user")  # fmt: skip
    add_data_dir_options(p)
    p.add_argument("--json", metavar="FILE|-", help="what was written, as JSON ('-' = stdout)")
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    from hushmon.export.ccarchive import job_number
    from hushmon.export.ccarchive_write import export_jobs
    from hushmon.store.schema import open_store_readonly
    from hushmon.tags.tagger import stored_jobs

    if bool(args.jobs) == bool(args.all):
        raise HushmonError("name jobs or give --all (not both)")
    for what, value in (("--cluster", args.cluster), ("--subcluster", args.subcluster)):
        if not _NAME.fullmatch(value):
            raise HushmonError(f"{what} {value!r}: letters, digits and _.- only")
    _dd, db = from_args(args)
    if args.all:
        con = open_store_readonly(db)
        try:
            jobs = stored_jobs(con)
        finally:
            con.close()
    else:
        jobs = list(dict.fromkeys(args.jobs))
        for job in jobs:
            job_number(job)  # refused before anything is written
    human = jsonio.human_stream(args.json)
    out = export_jobs(db, args.cc_archive, jobs, args.cluster, args.subcluster, args.shared,
                      lambda line: print(printable(line), file=human))  # fmt: skip
    print(f"exported {len(out.folders)} job(s) to {args.cc_archive}"
          f"{f', {len(out.skipped)} skipped' if out.skipped else ''}", file=human)  # fmt: skip
    if args.json:
        jsonio.emit(args.json, {
            "archive": str(args.cc_archive),
            "jobs": {j: str(p) for j, p in out.folders.items()},
            "skipped": out.skipped,
            "cluster_json": str(out.cluster_json) if out.cluster_json else None,
        })  # fmt: skip
    return 0 if out.folders or not out.skipped else 1
