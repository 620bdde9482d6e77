"""``hushmon metrics``: the Prometheus / OpenMetrics endpoint (docs/integration.md)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

DESCRIPTION = (
    "Serve the top reducer's job summaries (CPU, memory, network, disk, application metrics; "
    "labels job and user, never a node) and each agent's own cost (labels host, rack) as a "
    "Prometheus / OpenMetrics endpoint, GET /metrics (docs/integration.md)."
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("metrics", help="Prometheus / OpenMetrics endpoint",
                              description=DESCRIPTION)  # fmt: skip
    p.add_argument("--url", required=True, help="NATS server URL (nats://hub:4222)")
    p.add_argument("--port", type=int, default=9877, help="TCP port (default 9877; 0 = any)")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; 0.0.0.0: all)"
    )
    p.add_argument(
        "--keep-s",
        type=float,
        default=300.0,
        metavar="S",
        help="a job whose newest summary is older than S seconds (it ended) and a node not "
        "heard from for as long leave the answer (default 300)",
    )
    p.add_argument(
        "--no-node-cost",
        action="store_true",
        help="do not read the agents' batches (hm.raw.>) for their own cost per node",
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="require 'Authorization: Bearer TOKEN', the first line of FILE (mode 0600); "
        "Prometheus: authorization: {credentials_file: FILE}",
    )
    p.add_argument(
        "--once",
        action="store_true",
        help="print one answer (text format) on stdout after reading what is there, and exit",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hushmon.errors import HushmonError
    from hushmon.live.serve import read_token_file
    from hushmon.metrics.server import MetricsOptions, metrics

    if not 0 <= args.port <= 65535:
        raise HushmonError(f"--port {args.port} is not a TCP port")
    if not args.keep_s > 0 or math.isinf(args.keep_s):
        raise HushmonError("--keep-s must be a positive number of seconds")
    if args.token_file is not None:
        read_token_file(args.token_file)  # a bad file is refused before connecting
    opts = MetricsOptions(args.url, args.host, args.port, args.keep_s, not args.no_node_cost,
                          args.token_file, args.once)  # fmt: skip
    return metrics(opts)
