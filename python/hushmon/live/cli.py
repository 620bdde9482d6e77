"""The ``hushmon top`` and ``hushmon serve`` commands (live view)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

DESCRIPTION_TOP = (
    "A top-like terminal view of the reduced stream (docs/live.md): jobs, racks/nodes x key "
    "sensors (avg and min-max over nodes), application metrics, redrawn every second from "
    "hm.sum.job.> and hm.sum.rack.> on NATS. Ctrl-C ends it."
)
DESCRIPTION_SERVE = (
    "Serve a live web page (plots updated by server-sent events, no network needed in the "
    "browser) from the same summaries as 'hushmon top' (docs/live.md)."
)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="NATS server URL (nats://hub:4222)")
    p.add_argument(
        "--stale-s",
        type=float,
        default=300.0,
        metavar="S",
        help="hide jobs whose newest period is older than S seconds (default 300; 0 = never)",
    )


def register_top(subparsers: Any) -> None:
    p = subparsers.add_parser("top", help="live terminal view of the reduced summaries",
                              description=DESCRIPTION_TOP)  # fmt: skip
    _common(p)
    p.add_argument("--job", metavar="N", help="show only this job")
    p.add_argument("--once", action="store_true", help="print one frame and exit")
    p.set_defaults(func=run_top)


def register_serve(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="live web page of the reduced summaries",
                              description=DESCRIPTION_SERVE)  # fmt: skip
    _common(p)
    p.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0 = any)")
    p.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: use a tunnel)"
    )
    p.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="the token every request must carry, first line of FILE (mode 0600); default: "
        "one made at the start and printed once on stderr, in the page's URL",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the Host header may give besides localhost and the bound address "
        "(a reverse proxy's; repeatable)",
    )
    p.add_argument(
        "--history-s",
        type=float,
        default=300.0,
        metavar="S",
        help="read the job summaries of the last S seconds at start, so the plots start "
        "filled (default 300; 0 = from now on)",
    )
    p.set_defaults(func=run_serve)


def _stale(args: argparse.Namespace) -> float:
    from hushmon.errors import HushmonError

    if args.stale_s < 0 or math.isnan(args.stale_s):
        raise HushmonError("--stale-s must be 0 or positive")
    return math.inf if args.stale_s == 0 else args.stale_s


def run_top(args: argparse.Namespace) -> int:
    from hushmon.live.top import top

    return top(args.url, args.job, args.once, _stale(args))


def run_serve(args: argparse.Namespace) -> int:
    from hushmon.errors import HushmonError
    from hushmon.live.serve import ServeOptions, read_token_file, serve

    if not 0 <= args.port <= 65535:
        raise HushmonError(f"--port {args.port} is not a TCP port")
    if not args.history_s >= 0:
        raise HushmonError("--history-s must be 0 or positive")
    if args.token_file is not None:
        read_token_file(args.token_file)  # a bad file is refused before connecting
    opts = ServeOptions(args.url, args.host, args.port, _stale(args), args.history_s,
                        args.token_file, args.allow_host)  # fmt: skip
    return serve(opts)
