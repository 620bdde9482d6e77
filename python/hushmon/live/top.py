"""``hushmon top``'s frame: plain text from a snapshot (state.py), redrawn
each second with ANSI codes; ``--once`` prints one frame. Every name in it
came over NATS, so every cell and line goes through
:func:`~hushmon.display.printable`: the only escape codes a frame holds are
top's own."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from hushmon.display import printable, without_credentials
from hushmon.live.feed import connect, settle, subscribe
from hushmon.live.sensors import KEY_SENSORS
from hushmon.live.state import LiveState

CLEAR = "\x1b[H\x1b[2J"


def num(x: float | None, unit: str = "") -> str:
    """Short: 3 significant digits, SI prefixes for rates and bytes."""
    if x is None:
        return "-"
    if unit in ("B/s", "B"):
        for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(x) >= scale:
                return f"{x / scale:.3g}{prefix}"
    return f"{x:.3g}"


def cell(s: dict[str, Any]) -> str:
    """avg, and the spread over nodes when there is one."""
    avg = num(s["avg"], s["unit"])
    if s["count"] <= 1 or s["min"] == s["max"]:
        return avg
    return f"{avg} ({num(s['min'], s['unit'])}-{num(s['max'], s['unit'])})"


def clock(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9, UTC).strftime("%H:%M:%S")


def _heads() -> list[str]:
    return [f"{k.label}{' ' + k.unit if k.unit else ''}" for k in KEY_SENSORS]


def _cells(sensors: list[dict[str, Any]]) -> list[str]:
    by_label = {s["label"]: s for s in sensors}
    return [cell(by_label[k.label]) if k.label in by_label else "-" for k in KEY_SENSORS]


def table(rows: list[list[str]], indent: str = "") -> list[str]:
    """Columns as wide as their widest cell, two spaces apart."""
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]  # fmt: skip


def render(snap: dict[str, Any], url: str, job: str | None = None, width: int = 200) -> str:
    now = clock(snap["now_ns"])
    jobs = [j for j in snap["jobs"] if job is None or j["job"] == job]
    lines = [
        f"hushmon top  {without_credentials(url)}  {now} UTC  jobs {len(jobs)}  "
        f"messages {snap['messages']} (bad {snap['bad']}, late {snap['late']})"
    ]
    if snap["stale_jobs"]:
        lines[0] += f"  stale jobs hidden {snap['stale_jobs']}"
    if snap["last_error"]:
        lines.append(f"last bad message: {snap['last_error']}")
    if not jobs:
        lines.append("")
        lines.append(
            f"no summaries yet for job {job}"
            if job is not None
            else "no summaries yet (hushmon-reduce publishes hm.sum.job.<job> each period)"
        )
        return _frame(lines, width)
    lines.append("")
    rows = [["JOB", "NODES", "PERIOD", "AGE", *_heads()]]
    for j in jobs:
        first = [j["job"], str(len(j["nodes"])), clock(j["time_ns"]), f"{j['age_s']:.1f}s"]
        rows.append(first + _cells(j["sensors"]))
    lines += table(rows)
    for j in jobs:
        lines.append("")
        lines.append(
            f"job {j['job']}: {len(j['nodes'])} node(s) {' '.join(j['nodes'])}; period "
            f"{clock(j['time_ns'])} UTC, {j['lag_s']:.1f} s behind, "
            f"updated {j['age_s']:.1f} s ago, "
            f"{j['n_sensors']} sensors" + ("" if j["from"] == "job" else " (from rack partials)")
        )
        rows = [["RACK", "NODES", "PERIOD", *_heads()]]
        for r in j["racks"]:
            nodes = ",".join(r["nodes"]) if len(r["nodes"]) <= 2 else f"{len(r['nodes'])} nodes"
            rows.append([r["rack"], nodes, clock(r["time_ns"]), *_cells(r["sensors"])])
        if len(rows) > 1:
            lines += table(rows, "  ")
        if j["app"]:
            older = j.get("app_time_ns", j["time_ns"]) != j["time_ns"]
            when = f", period {clock(j['app_time_ns'])}" if older else ""
            lines.append(f"  application metrics (over ranks{when})")
            rows = [["NAME", "RANKS", "MIN", "AVG", "MAX"]]
            for a in j["app"]:
                unit = f" [{a['unit']}]" if a["unit"] else ""
                vals = [num(a[k], a["unit"]) for k in ("min", "avg", "max")]
                rows.append([a["name"] + unit, str(a["ranks"]), *vals])
            lines += table(rows, "  ")
    return _frame(lines, width)


def _frame(lines: list[str], width: int) -> str:
    return "\n".join(printable(ln)[:width] for ln in lines) + "\n"


def terminal_width(out: TextIO) -> int:
    """The terminal's own width; $COLUMNS (often inherited and stale, as
    under tmux started from a script) only when ``out`` is no terminal."""
    import shutil

    try:
        return os.get_terminal_size(out.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return shutil.get_terminal_size((200, 50)).columns


async def run_top(
    url: str,
    job: str | None,
    once: bool,
    stale_s: float,
    out: TextIO = sys.stdout,
    interval_s: float = 1.0,
) -> int:
    state = LiveState()
    nc = await connect(url)
    try:
        caught_up = await subscribe(nc, state)
        if once:
            if not caught_up:
                await settle(state)  # no stream to read: wait for the next period
            out.write(render(state.snapshot(time.time_ns(), stale_s), url, job, 10_000))
            return 0
        while True:
            width = terminal_width(out)
            frame = render(state.snapshot(time.time_ns(), stale_s), url, job, width)
            if not nc.is_connected:
                frame = f"(reconnecting to {without_credentials(url)} ...)\n" + frame
            out.write(CLEAR + frame)
            out.flush()
            await asyncio.sleep(interval_s)
    finally:
        await nc.close()


def top(url: str, job: str | None, once: bool, stale_s: float) -> int:
    try:
        return asyncio.run(run_top(url, job, once, stale_s))
    except KeyboardInterrupt:
        return 0
