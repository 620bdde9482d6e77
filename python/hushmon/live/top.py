"""``hushmon top``'s frame: plain text from a snapshot (state.py), redrawn
each second with ANSI codes; ``--once`` prints one frame."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from hushmon.live.feed import connect, settle, subscribe
from hushmon.live.sensors import KEY_SENSORS
from hushmon.live.state import LiveState

CLEAR = "\x1b[H\x1b[2J"
CELL = 20  # one key sensor's "avg (min-max)" column


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


def _head(first: list[str], widths: list[int]) -> str:
    cells = [h.ljust(w) for h, w in zip(first, widths, strict=True)]
    return " ".join(cells + [h.ljust(CELL) for h in _heads()]).rstrip()


def _row(first: list[str], widths: list[int], sensors: list[dict[str, Any]]) -> str:
    by_label = {s["label"]: s for s in sensors}
    cells = [c.ljust(w) for c, w in zip(first, widths, strict=True)]
    cells += [cell(by_label[k.label]).ljust(CELL) if k.label in by_label else "-".ljust(CELL)
              for k in KEY_SENSORS]  # fmt: skip
    return " ".join(cells).rstrip()


def render(snap: dict[str, Any], url: str, job: str | None = None, width: int = 200) -> str:
    now = clock(snap["now_ns"])
    jobs = [j for j in snap["jobs"] if job is None or j["job"] == job]
    lines = [
        f"hushmon top  {url}  {now} UTC  jobs {len(jobs)}  "
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
        return "\n".join(ln[:width] for ln in lines) + "\n"
    lines.append("")
    widths = [8, 5, 8, 6]
    lines.append(_head(["JOB", "NODES", "PERIOD", "AGE"], widths))
    for j in jobs:
        first = [j["job"], str(len(j["nodes"])), clock(j["time_ns"]), f"{j['age_s']:.1f}s"]
        lines.append(_row(first, widths, j["sensors"]))
    for j in jobs:
        lines.append("")
        lines.append(
            f"job {j['job']}: {len(j['nodes'])} node(s) {' '.join(j['nodes'])}; period "
            f"{clock(j['time_ns'])} UTC, {j['lag_s']:.1f} s behind, "
            f"updated {j['age_s']:.1f} s ago, "
            f"{j['n_sensors']} sensors" + ("" if j["from"] == "job" else " (from rack partials)")
        )
        lines.append("  " + _head(["RACK", "NODES", "PERIOD"], [8, 14, 8]))
        for r in j["racks"]:
            nodes = ",".join(r["nodes"]) if len(r["nodes"]) <= 2 else f"{len(r['nodes'])} nodes"
            lines.append("  " + _row([r["rack"], nodes, clock(r["time_ns"])], [8, 14, 8],
                                     r["sensors"]))  # fmt: skip
        if j["app"]:
            lines.append("  application metrics (over ranks)")
            lines.append("  " + "  ".join(h.rjust(10) for h in ["RANKS", "MIN", "AVG", "MAX"])
                         + "  NAME")  # fmt: skip
            for a in j["app"]:
                vals = [str(a["ranks"])] + [num(a[k], a["unit"]) for k in ("min", "avg", "max")]
                unit = f" [{a['unit']}]" if a["unit"] else ""
                lines.append("  " + "  ".join(v.rjust(10) for v in vals) + f"  {a['name']}{unit}")
    return "\n".join(ln[:width] for ln in lines) + "\n"


async def run_top(
    url: str,
    job: str | None,
    once: bool,
    stale_s: float,
    out: TextIO = sys.stdout,
    interval_s: float = 1.0,
) -> int:
    import shutil

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
            width = shutil.get_terminal_size((200, 50)).columns
            frame = render(state.snapshot(time.time_ns(), stale_s), url, job, width)
            if not nc.is_connected:
                frame = f"(reconnecting to {url} ...)\n" + frame
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
