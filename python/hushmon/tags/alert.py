"""``hushmon alert``: live rules on the job summaries, alerts to NATS and a webhook.

Subscribes to ``hm.sum.job.>`` (core NATS: alerts are about now, nothing is
replayed), feeds :class:`~hushmon.tags.live.LiveRules`, and for each alert
publishes its JSON on ``<prefix>.<job>`` (default ``hm.alert.<job>``) and
POSTs it to the webhook, if one is given. A webhook that fails is one line
on stderr and the alert is not retried (it is on NATS all the same)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hushmon.live.feed import JOB_SUBJECTS, connect
from hushmon.live.state import Parsed, parse_payload
from hushmon.tags.live import Alert, LiveRules
from hushmon.tags.rules import RuleSet

WEBHOOK_TIMEOUT_S = 5.0
EXPIRE_EVERY_S = 30.0
_SUBJECT_SAFE = re.compile(r"[A-Za-z0-9_+=,@-]")


def subject_token(job: str) -> str:
    """A job id as one NATS subject token ('.', '*', '>' and spaces would split
    or widen it): other characters as %XX."""
    return (
        "".join(
            c if _SUBJECT_SAFE.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode())
            for c in job
        )
        or "%"
    )


@dataclass(frozen=True)
class AlertOptions:
    url: str
    rules: RuleSet
    webhook: str = ""
    prefix: str = "hm.alert"
    keep_s: float = 600.0
    json_lines: Path | None = None  # also append each alert here ('-': stdout)
    stop_after_s: float | None = None  # for tests and benches: run this long


def post_webhook(url: str, alert: Alert) -> str:
    """'' on success, else why not."""
    body = json.dumps(alert.to_json()).encode()
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=WEBHOOK_TIMEOUT_S) as answer:
            return "" if 200 <= answer.status < 300 else f"HTTP {answer.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(getattr(exc, "reason", exc))


def _writer(target: Path | None) -> Callable[[Alert], None]:
    if target is None:
        return lambda _a: None
    if str(target) == "-":
        return lambda a: print(json.dumps(a.to_json()), flush=True)

    def append(a: Alert) -> None:
        with target.open("a", encoding="utf-8") as f:
            f.write(json.dumps(a.to_json()) + "\n")

    return append


async def alert_loop(opts: AlertOptions) -> int:
    live = LiveRules(opts.rules, opts.keep_s)
    nc = await connect(opts.url)
    write = _writer(opts.json_lines)
    queue: asyncio.Queue[Alert] = asyncio.Queue()

    async def on_msg(msg: Any) -> None:
        parsed = parse_payload(msg.subject, msg.data, live.keep)
        if not isinstance(parsed, Parsed):
            print(f"hushmon alert: skipped {parsed}", file=sys.stderr)
            return
        for alert in live.add(parsed, time.time_ns()):
            queue.put_nowait(alert)

    async def deliver() -> None:
        while True:
            alert = await queue.get()
            print(f"alert {alert.state}: job {alert.job} {alert.tag} ({alert.rule}): "
                  f"{alert.hint}", file=sys.stderr, flush=True)  # fmt: skip
            write(alert)
            subject = f"{opts.prefix}.{subject_token(alert.job)}"
            await nc.publish(subject, json.dumps(alert.to_json()).encode())
            await nc.flush()
            if opts.webhook:
                why = await asyncio.to_thread(post_webhook, opts.webhook, alert)
                if why:
                    print(f"hushmon alert: webhook {opts.webhook}: {why}", file=sys.stderr)

    await nc.subscribe(JOB_SUBJECTS, cb=on_msg)
    sender = asyncio.create_task(deliver())
    names = ", ".join(r.name for r in live.rules) or "none"
    print(f"hushmon alert: live rules {names} on {JOB_SUBJECTS}", file=sys.stderr, flush=True)
    start = time.monotonic()
    try:
        while opts.stop_after_s is None or time.monotonic() - start < opts.stop_after_s:
            await asyncio.sleep(1.0 if opts.stop_after_s is None else 0.2)
            if time.monotonic() - start > EXPIRE_EVERY_S:
                live.expire(time.time_ns())
        while not queue.empty():
            await asyncio.sleep(0.05)
    finally:
        sender.cancel()
        await nc.drain()
    return 0
