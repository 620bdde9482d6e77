"""``hushmon collect``: the store side of the online transport."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args, writes_job_data

# Messages per fetched group (collector.FETCH_BATCH, not imported here: the
# CLI starts light), and for a --raw-only C collector, whose per-batch cost
# is low enough that the lake's fixed commit cost is a third of it at 2048.
FETCH_BATCH = 2048
RAW_ONLY_C_FETCH_BATCH = 8192


def default_fetch_batch(engine: str, raw_only: bool) -> int:
    """The group size when --fetch-batch is not given."""
    return RAW_ONLY_C_FETCH_BATCH if raw_only and engine == "c" else FETCH_BATCH


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "collect",
        help="store raw batches and summaries from NATS into the store (cluster mode)",
        description="Durable pull consumers (collect-raw on HM_RAW, collect-sum on HM_SUM) write "
        "raw batches and summaries into the store in transactions and ack after the commit. "
        "The store is a lake (default <data>/hushmon.lake; --db DIR.lake) that several "
        "collectors write and readers read meanwhile, or an embedded DuckDB file "
        "(--db FILE.duckdb: this process only). A batch already stored (same host, epoch, seq) "
        "changes nothing. Runs until SIGTERM/SIGINT, or with --once until nothing is left. "
        "SIGUSR2 writes a memory report to stderr (HUSHMON_TRACEMALLOC=1 at start adds "
        "Python's heap). docs/transport.md.",
    )
    p.add_argument("--url", required=True, help="NATS server URL (nats://host:4222)")
    add_data_dir_options(p)
    p.add_argument("--once", action="store_true", help="collect what is there, then exit")
    p.add_argument(
        "--wait", action="store_true", help="wait for the server instead of failing when it is down"
    )
    p.add_argument(
        "--forward-lp",
        metavar="URL",
        help="also post the raw batches' line protocol to URL/write (VictoriaMetrics, InfluxDB)",
    )
    p.add_argument(
        "--max-batch-bytes",
        type=int,
        metavar="N",
        help="reject raw batches larger than N bytes (default: the streams' message limit)",
    )
    p.add_argument(
        "--fetch-batch",
        type=int,
        metavar="N",
        help=f"messages fetched and stored per transaction (default {RAW_ONLY_C_FETCH_BATCH} "
        f"for --raw-only --engine c, else {FETCH_BATCH}): a lake commit costs DuckLake a "
        "fixed ~35-40 ms whatever it holds, so larger groups cost less CPU per batch (the C "
        "engine: 20-26 k batches per CPU-s at 8192, 15-18 k at 2048); a collector that also "
        "takes the summaries keeps 2048, or its raw groups wait unacked behind summary work "
        "(docs/transport.md)",
    )
    p.add_argument(
        "--memory-mib",
        type=int,
        default=512,
        metavar="N",
        help="the embedded store's memory bound in MiB (DuckDB's memory_limit; default 512)",
    )
    p.add_argument(
        "--raw-only",
        action="store_true",
        help="raw batches only (collect-raw): for each collector of a lake but one, which "
        "takes the summaries too",
    )
    p.add_argument(
        "--summaries-only",
        action="store_true",
        help="the reducers' summaries only (collect-sum, which several such collectors "
        "share), into a lake that --raw-only collectors fill: raw batches are never held "
        'unacked behind summary work (docs/transport.md, "Summaries with several collectors")',
    )
    p.add_argument(
        "--engine",
        choices=("python", "c"),
        default="python",
        help="raw path: python (nats-py and the ingest parser) or c (libhushmon_collect: "
        "2-3x less CPU per batch; a lake only, no --forward-lp)",
    )
    p.add_argument("--json", metavar="FILE|-", help="write the final report as JSON ('-' = stdout)")
    p.set_defaults(func=run)


@writes_job_data
def run(args: argparse.Namespace) -> int:
    from hushmon.errors import HushmonError
    from hushmon.store.lake import is_lake
    from hushmon.transport.collector import CollectOptions, collect
    from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES

    _dd, db = from_args(args, default="lake")
    if Path(db).is_dir() and not is_lake(Path(db)):
        raise HushmonError(f"--db {db} is a folder, not a store: a lake's name ends in .lake")
    if args.max_batch_bytes is not None and args.max_batch_bytes <= 0:
        raise HushmonError("--max-batch-bytes must be positive")
    if args.fetch_batch is None:
        args.fetch_batch = default_fetch_batch(args.engine, args.raw_only)
    if args.fetch_batch <= 0:
        raise HushmonError("--fetch-batch must be positive")
    if args.memory_mib < 64:
        raise HushmonError("--memory-mib must be at least 64")
    if args.engine == "c" and (not is_lake(Path(db)) or args.forward_lp):
        raise HushmonError("--engine c collects into a lake (--db DIR.lake), without --forward-lp")
    if args.summaries_only:
        # the raw path's options would be silently unused: say so instead
        if args.raw_only:
            raise HushmonError("--summaries-only and --raw-only exclude each other")
        if args.engine != "python" or args.forward_lp:
            raise HushmonError(
                "--engine and --forward-lp are the raw path's: a --summaries-only collector "
                "takes no raw batches"
            )
        if not is_lake(Path(db)):
            raise HushmonError(
                "--summaries-only writes a lake (--db DIR.lake) that --raw-only collectors "
                "fill: an embedded DuckDB file takes one process"
            )
    human = jsonio.human_stream(args.json)
    opts = CollectOptions(
        url=args.url,
        db=Path(db),
        once=args.once,
        wait=args.wait,
        forward_lp=args.forward_lp,
        max_batch_bytes=args.max_batch_bytes or MAX_PAYLOAD_BYTES,
        fetch_batch=args.fetch_batch,
        memory_mib=args.memory_mib,
        raw_only=args.raw_only,
        summaries_only=args.summaries_only,
        engine=args.engine,
        progress=sys.stderr,  # progress always on stderr; the final report where --json says
    )
    report = collect(opts)
    for line in report.summary_lines():
        print(line, file=human)
    if args.json:
        jsonio.emit(args.json, report.to_json())
    return 0
