"""``hushmon ingest``: load spool files into the store; list and export jobs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data
from hushmon.display import printable
from hushmon.errors import HushmonError

EXPORT_FORMATS = ("parquet", "csv")  # hushmon.store.query.EXPORT_FORMATS (kept light to import)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "ingest",
        help="load agent spool files into the store (DuckDB); list or export jobs",
        description="Load line-protocol spool files into the DuckDB store. Loading the same "
        "files twice changes nothing; corrupt lines are reported with file:line and skipped.",
    )
    add_data_dir_options(p)
    p.add_argument("--spool", type=Path, help="spool folder (default <data>/spool)")
    p.add_argument("--list", action="store_true", help="list the jobs in the store, do not ingest")
    p.add_argument("--export", metavar="JOB", help="export a job's samples, do not ingest")
    p.add_argument("--format", choices=EXPORT_FORMATS, default="parquet", help="export format")
    p.add_argument("--out", type=Path, help="export file (default <data>/reports/JOB/samples.FMT)")
    p.add_argument(
        "--json",
        metavar="FILE|-",
        help="write the ingest report, the job list or the export's summary as JSON ('-' = stdout)",
    )
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    # imported here so that 'hushmon --help' does not load duckdb and pyarrow
    from hushmon.store.ingest import ingest_spool
    from hushmon.store.query import export_job, job_info, list_jobs
    from hushmon.store.schema import open_store_readonly

    # reading (--list, --export): the lake when a collector writes one;
    # ingesting: the embedded file (a lake is the collectors' to write)
    dd, db = from_args(args, default="store" if args.list or args.export else "database")
    human = jsonio.human_stream(args.json)
    if args.list:
        con = open_store_readonly(db)
        try:
            jobs = [job_info(con, j) for j in list_jobs(con)]
        finally:
            con.close()
        for j in jobs:
            hosts = ",".join(j.hosts[:8])
            line = f"{j.job}\t{len(j.hosts)} node(s)\t{j.duration_s:.0f} s\t{hosts}"
            print(printable(line), file=human)
        if args.json:
            jsonio.emit(args.json, {"jobs": [j.__dict__ for j in jobs]})
        return 0
    if args.export:
        out = args.out or dd.reports(args.export) / f"samples.{args.format}"
        rows = export_job(db, args.export, out, args.format)
        print(f"exported {rows:,} samples of job {args.export} to {out}", file=human)
        if args.json:
            summary = {"job": args.export, "format": args.format, "path": out, "samples": rows}
            jsonio.emit(args.json, summary)
        return 0
    from hushmon.store.lake import is_lake

    if is_lake(Path(db)):
        raise HushmonError(
            f"--db {db} is a lake: hushmon ingest writes the embedded store (a .duckdb file); "
            "a lake is written by hushmon collect"
        )
    spool = args.spool or dd.spool
    if not spool.is_dir():
        raise HushmonError(f"spool folder {spool} does not exist")
    report = ingest_spool(db, spool)
    for line in report.summary_lines():
        print(printable(line), file=human)
    if args.json:
        jsonio.emit(args.json, report.to_json())
    return 0
