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
    "browser) from the same summaries as 'hushmon top', and the job history from the store: "
    "search, each job's report, comparisons (docs/live.md). Users see their own jobs only "
    "(per-user tokens: 'hushmon serve token', or a trusted proxy's X-Remote-User)."
)


def _common(p: argparse.ArgumentParser, url_required: bool = True) -> None:
    p.add_argument(
        "--url",
        required=url_required,
        default="",
        help="NATS server URL (nats://hub:4222)"
        + ("" if url_required else "; without it, the job history only"),
    )
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
    _common(p, url_required=False)
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
    from hushmon.datadir import add_data_dir_options

    add_data_dir_options(p)
    p.add_argument(
        "--tokens-dir",
        type=Path,
        metavar="DIR",
        help="per-user tokens made by 'hushmon serve token' (mode 0700): a request with "
        "one sees that user's jobs only",
    )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="an IP address whose X-Remote-User header names the user (the site's reverse "
        "proxy, Open OnDemand; repeatable); from any other address the header is ignored",
    )
    p.add_argument(
        "--unix",
        type=Path,
        metavar="PATH",
        help="also listen on this unix socket for the proxy: its X-Remote-User is believed "
        "(let only the proxy reach the socket's folder)",
    )
    p.add_argument(
        "--user-header",
        default="X-Remote-User",
        metavar="NAME",
        help="the header a trusted proxy names the user in (default X-Remote-User)",
    )
    p.add_argument(
        "--admin",
        action="append",
        default=[],
        metavar="USER",
        help="a user who sees every job (repeatable); the operator's token always does",
    )
    p.set_defaults(func=run_serve)
    sub = p.add_subparsers(dest="serve_action", metavar="{token,index}")
    t = sub.add_parser(
        "token",
        help="make a user's token for hushmon serve --tokens-dir",
        description="Make a new token for USER (replacing theirs), print it once on stdout and "
        "keep only its SHA-256 in DIR/USER (0600). Give it to the user; delete the file to "
        "revoke it (a running hushmon serve notices within a second).",
    )
    t.add_argument("--user", required=True, help="the user's login name")
    t.add_argument("--tokens-dir", type=Path, required=True, metavar="DIR", dest="token_dir")
    t.set_defaults(func=run_serve_token)
    i = sub.add_parser(
        "index",
        help="record the stored jobs nobody recorded (for the job history)",
        description="Append a job record for each job in the store's recent activity that has "
        "none (jobs that ran without hushmon run): owner, name and state from Slurm when it "
        "knows the job, nodes and span from the samples, findings from its digest. Run it "
        "from a timer; a job seen in the last --settle-s seconds waits for the next run.",
    )
    add_data_dir_options(i)
    i.add_argument(
        "--since-days",
        type=float,
        default=7.0,
        metavar="D",
        help="look at the activity of the last D days (default 7)",
    )
    i.add_argument(
        "--settle-s",
        type=float,
        default=120.0,
        metavar="S",
        help="a job seen in the last S seconds waits for the next run (default 120)",
    )
    i.set_defaults(func=run_serve_index)


def _stale(args: argparse.Namespace) -> float:
    from hushmon.errors import HushmonError

    if args.stale_s < 0 or math.isnan(args.stale_s):
        raise HushmonError("--stale-s must be 0 or positive")
    return math.inf if args.stale_s == 0 else args.stale_s


def run_top(args: argparse.Namespace) -> int:
    from hushmon.live.top import top

    return top(args.url, args.job, args.once, _stale(args))


def run_serve(args: argparse.Namespace) -> int:
    import ipaddress

    from hushmon.datadir import from_args
    from hushmon.errors import HushmonError
    from hushmon.live.auth import UserTokens, check_user_name
    from hushmon.live.jobs_http import History
    from hushmon.live.serve import ServeOptions, read_token_file, serve

    if not 0 <= args.port <= 65535:
        raise HushmonError(f"--port {args.port} is not a TCP port")
    if not args.history_s >= 0:
        raise HushmonError("--history-s must be 0 or positive")
    if args.token_file is not None:
        read_token_file(args.token_file)  # a bad file is refused before connecting
    if args.tokens_dir is not None:
        UserTokens(args.tokens_dir).load()
    for addr in args.trusted_proxy:
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise HushmonError(f"--trusted-proxy {addr!r} is not an IP address") from None
    for name in args.admin:
        check_user_name(name)
    dd, db = from_args(args)
    explicit = db if getattr(args, "db", None) else None
    opts = ServeOptions(args.url, args.host, args.port, _stale(args), args.history_s,
                        args.token_file, args.allow_host)  # fmt: skip
    opts.history = History(dd, explicit, live=bool(args.url))
    opts.tokens_dir = args.tokens_dir
    opts.trusted_proxies = [str(ipaddress.ip_address(a)) for a in args.trusted_proxy]
    opts.unix = args.unix
    opts.admins = list(args.admin)
    opts.user_header = args.user_header
    return serve(opts)


def run_serve_token(args: argparse.Namespace) -> int:
    import sys

    from hushmon.live.auth import make_user_token

    token = make_user_token(args.token_dir, args.user)
    print(token)
    print(f"hushmon serve: a new token for {args.user} (its hash in {args.token_dir / args.user}); "
          "give it to them: they open http://SERVER/jobs?token=TOKEN once, or send "
          "'Authorization: Bearer TOKEN'", file=sys.stderr)  # fmt: skip
    return 0


def run_serve_index(args: argparse.Namespace) -> int:
    import sys

    from hushmon.datadir import from_args, owner_only
    from hushmon.errors import HushmonError
    from hushmon.history.index import index_jobs

    if not args.since_days > 0 or not args.settle_s >= 0:
        raise HushmonError("--since-days must be positive and --settle-s 0 or more")
    dd, db = from_args(args)
    import duckdb

    with owner_only():
        try:
            report = index_jobs(db, dd, args.since_days, args.settle_s)
        except duckdb.Error as exc:
            raise HushmonError(f"indexing {db}: {str(exc).splitlines()[0]}") from exc
    print(f"hushmon serve index: {report.line()}", file=sys.stderr)
    return 0
