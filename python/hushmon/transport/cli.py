"""``hushmon transport status``: loss accounting of the online transport."""

from __future__ import annotations

import argparse
from typing import Any

from hushmon import jsonio
from hushmon.datadir import add_data_dir_options, from_args
from hushmon.display import printable


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "transport",
        help="the online transport (NATS): per-node loss accounting",
        description="Cluster mode on NATS (docs/transport.md).",
    )
    sub = p.add_subparsers(dest="transport_command", metavar="SUBCOMMAND", required=True)
    s = sub.add_parser(
        "status",
        help="per node: last seen, lag, batches, replayed, dropped, gaps, duplicates, rejects",
        description="Per node, from what hushmon collect recorded in the store: last seen and "
        "its age, lag (now minus the newest batch's period), batches received and replayed, "
        "batches the agent dropped, missing sequence numbers, duplicates discarded, rejected "
        "batches with their reason, malformed lines. With --url also what the server still "
        "holds for the collector.",
    )
    s.add_argument("--url", help="NATS server URL: also show the collector's consumers")
    add_data_dir_options(s)
    s.add_argument("--json", metavar="FILE|-", help="write the status as JSON ('-' = stdout)")
    s.set_defaults(func=run_status)


def run_status(args: argparse.Namespace) -> int:
    from hushmon.transport.status import server_status, store_status

    _dd, db = from_args(args)
    status = store_status(db)
    if args.url:
        status.server = server_status(args.url)
    human = jsonio.human_stream(args.json)
    for line in status.table_lines():
        print(printable(line), file=human)
    if args.json:
        jsonio.emit(args.json, status.to_json())
    return 0
