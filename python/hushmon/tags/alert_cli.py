"""``hushmon alert``: the live tag rules on the top reducer's job summaries."""

from __future__ import annotations

import argparse
import asyncio
import math
import re
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

_PREFIX = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "alert",
        help="live rules on the job summaries: idle allocations, memory near its limit",
        description="Evaluate the tag rules marked live = true (python/hushmon/tags/rules/) on "
        "each period's job summary from the top reducer (hm.sum.job.>), and publish each "
        "alert once per job and rule, until it clears, on PREFIX.<job> and to a webhook.",
    )
    p.add_argument("--url", required=True, help="NATS server URL (nats://hub:4222)")
    p.add_argument("--webhook", default="", metavar="URL",
                   help="POST each alert's JSON here (http:// or https://)")  # fmt: skip
    p.add_argument("--subject-prefix", default="hm.alert", metavar="P",
                   help="alerts go to P.<job> (default hm.alert)")  # fmt: skip
    p.add_argument("--rules", type=Path, metavar="DIR",
                   help="a site's rule folder (default $HUSHMON_TAG_RULES)")  # fmt: skip
    p.add_argument("--keep-s", type=float, default=600.0, metavar="S",
                   help="forget a job not heard from for S seconds (default 600)")  # fmt: skip
    p.add_argument("--json", metavar="FILE|-",
                   help="also append each alert here as one JSON line ('-' = stdout)")  # fmt: skip
    p.add_argument("--for-s", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hushmon.tags.alert import AlertOptions, alert_loop
    from hushmon.tags.rules import load_rules, site_folder

    if args.webhook and not args.webhook.startswith(("http://", "https://")):
        raise HushmonError(f"--webhook {args.webhook!r}: an http:// or https:// URL")
    if not _PREFIX.fullmatch(args.subject_prefix):
        raise HushmonError(f"--subject-prefix {args.subject_prefix!r}: NATS subject tokens only")
    if not args.keep_s > 0 or math.isinf(args.keep_s):
        raise HushmonError("--keep-s must be a positive number of seconds")
    if args.for_s is not None and not args.for_s > 0:
        raise HushmonError("--for-s must be a positive number of seconds")
    rules = load_rules(site_folder(args.rules))
    if not any(r.live for r in rules.rules):
        raise HushmonError("no rule is marked live = true")
    opts = AlertOptions(args.url, rules, args.webhook, args.subject_prefix, args.keep_s,
                        Path(args.json) if args.json else None, args.for_s)  # fmt: skip
    try:
        return asyncio.run(alert_loop(opts))
    except KeyboardInterrupt:
        return 130
