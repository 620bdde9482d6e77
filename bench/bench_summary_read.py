"""What reading a job's summaries costs now that the rack partials are merged
when read (store/summary_view.py), next to the same job stored merged.

Two lakes hold the same job of --nodes nodes x --seconds periods at 1 Hz, in
racks of --nodes-per-rack, ~100 sensors each with its quantile sketch (one
rack's values from hushmon.store.synthetic, the same for every rack of a
period, scaled a little from period to period):

- ``partials``: what the collector writes since store schema 3, a row per
  rack, period and sensor in ``summary_rows``, merged by the view;
- ``compacted``: ``partials`` after ``hushmon store compact`` stored its
  closed periods merged (store/lake_summaries_compact.py);
- ``merged``: the same job as a collector before it left it, a row per
  period and sensor in ``job_summaries`` (sketch as JSON).

Each is digested by ``hushmon digest JOB --from-summaries`` in a fresh
process (Python start included): wall seconds, CPU-seconds (every thread)
and peak RSS, and the ratio; the two digests' sensors must agree. The load
average is printed with the figures.

    .venv/bin/python bench/bench_summary_read.py [--nodes 1024] [--seconds 3600]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

JOB = "1024"
T0 = 1_795_000_000_000_000_000


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def template(nodes_per_rack: int) -> pa.Table:
    """One rack's sensors in one period, as summary_rows columns."""
    from bench_summary_collect import rack_sensors  # type: ignore[import-not-found]

    from hushmon.transport.summary_rows import fast_rows

    rows = fast_rows(json.loads(json.dumps(rack_sensors(nodes_per_rack, 1)[0])))
    assert rows is not None
    return pa.table(
        {
            "measurement": [k.measurement for k in rows.keys],
            "tags": [k.tags for k in rows.keys],
            "field": [k.field for k in rows.keys],
            "count": pa.array(rows.count, pa.int64()),
            "sum": rows.sum,
            "mean": rows.mean,
            "m2": rows.m2,
            "min": rows.min,
            "max": rows.max,
            "alpha": rows.alpha,
            "zero": pa.array(rows.zero, pa.int64()),
            "pos_keys": rows.pos.arrow()[0],
            "pos_counts": rows.pos.arrow()[1],
            "neg_keys": rows.neg.arrow()[0],
            "neg_counts": rows.neg.arrow()[1],
        }
    )


# a period's scale: the same for every rack of the period
_F = "(1 + 0.01 * ((p * 7) % 11) / 11.0)"


def build(lake: Path, layout: str, tpl: pa.Table, racks: int, nodes: int, seconds: int) -> None:
    from hushmon.store.lake import open_lake

    con = open_lake(lake)
    try:
        con.register("tpl", tpl)
        con.execute("BEGIN TRANSACTION").fetchall()
        if layout == "partials":
            con.execute(
                f"""INSERT INTO summary_rows
                SELECT 'r' || r || ':' || p, 'rack', '{JOB}', {T0} + p * 1000000000,
                       measurement, tags, field, count, sum * {_F}, mean * {_F},
                       m2 * {_F} * {_F}, min * {_F}, max * {_F}, alpha, zero,
                       pos_keys, pos_counts, neg_keys, neg_counts
                FROM tpl, range({racks}) t(r), range({seconds}) s(p)"""
            ).fetchall()
        else:
            k = racks
            sketch = f"""to_json({{'alpha': alpha, 'zero': zero * {k},
                'pos': map(pos_keys, list_transform(pos_counts, c -> c * {k})),
                'neg': map(neg_keys, list_transform(neg_counts, c -> c * {k}))}})::VARCHAR"""
            con.execute(
                f"""INSERT INTO job_summaries
                SELECT '{JOB}', {T0} + p * 1000000000, measurement, tags, field,
                       count * {k}, sum * {_F} * {k}, mean * {_F}, m2 * {_F} * {_F} * {k},
                       min * {_F}, max * {_F}, {sketch}, 'merged'
                FROM tpl, range({seconds}) s(p)"""
            ).fetchall()
        con.execute(
            f"""INSERT INTO job_activity
            SELECT '{JOB}', 'n' || lpad(h::VARCHAR, 5, '0'), {T0} + p * 1000000000
            FROM range({nodes}) a(h), range({seconds}) s(p)"""
        ).fetchall()
        con.execute("COMMIT").fetchall()
    finally:
        con.close()


def compact_lake(lake: Path, now_ns: int) -> None:
    """``hushmon store compact`` in a fresh process (its own peak RSS: a
    child forked from this one would report this one's)."""
    import datetime as dt

    when = dt.datetime.fromtimestamp(now_ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    cmd = [sys.executable, "-m", "hushmon.cli", "store", "compact", "--db", str(lake),
           "--now", when]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise SystemExit(f"compact of {lake.name} failed: {err.strip()[-300:]}")
    print(f"compacted: {time.perf_counter() - t:.0f} s wall, "
          f"{usage.ru_utime + usage.ru_stime:.1f} CPU-s, "
          f"{usage.ru_maxrss / 2**20:.2f} GiB peak (load {_load()})", file=sys.stderr)  # fmt: skip


def digest(lake: Path, out: Path) -> dict[str, Any]:
    """``hushmon digest --from-summaries`` in a fresh process."""
    cmd = [sys.executable, "-m", "hushmon.cli", "digest", JOB, "--db", str(lake),
           "--from-summaries", "--out", str(out), "--json", str(out / "doc.json")]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        raise SystemExit(f"digest of {lake.name} failed: {err.strip()[-300:]}")
    doc = json.loads((out / "doc.json").read_text())
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "sensors": {s["name"]: (s["values"], round(s["avg"], 6), s["p50"]) for s in doc["sensors"]},
        "periods": doc["periods"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--nodes-per-rack", type=int, default=40)
    args = ap.parse_args()
    racks = -(-args.nodes // args.nodes_per_rack)
    tpl = template(args.nodes_per_rack)
    with tempfile.TemporaryDirectory(prefix="hm-sumread-") as name:
        tmp = Path(name)
        results = {}
        for layout in ("partials", "compacted", "merged"):
            lake = tmp / f"{layout}.lake"
            t = time.perf_counter()
            build(lake, "partials" if layout == "compacted" else layout, tpl, racks, args.nodes,
                  args.seconds)  # fmt: skip
            if layout == "compacted":
                compact_lake(lake, T0 + (args.seconds + 7200) * 1_000_000_000)
            print(f"{layout}: built in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        for layout in ("partials", "compacted", "merged"):
            out = tmp / f"out-{layout}"
            out.mkdir()
            load = _load()
            results[layout] = (digest(tmp / f"{layout}.lake", out), load)
    a, b = results["partials"][0], results["merged"][0]
    for other in (b, results["compacted"][0]):
        assert a["periods"] == other["periods"] == args.seconds, (a["periods"], other["periods"])
        for sensor, (n, avg, p50) in a["sensors"].items():
            n2, avg2, p502 = other["sensors"][sensor]
            assert n == n2 and abs(avg - avg2) <= 1e-6 * max(1.0, abs(avg)), (sensor, avg, avg2)
            assert p50 == p502, (sensor, p50, p502)
    print(f"digest --from-summaries of a {args.nodes}-node job x {args.seconds} s "
          f"({racks} racks x {len(tpl)} sensors; the three digests agree)")  # fmt: skip
    for layout, (r, load) in results.items():
        print(f"  {layout:9s} {r['wall_s']:6.1f} s wall  {r['cpu_s']:6.1f} CPU-s  "
              f"{r['peak_rss_bytes'] / 2**30:5.2f} GiB peak  (load {load})")  # fmt: skip
    print(f"  partials / merged: {a['wall_s'] / b['wall_s']:.2f}x wall, "
          f"{a['cpu_s'] / b['cpu_s']:.2f}x CPU, "
          f"{a['peak_rss_bytes'] / b['peak_rss_bytes']:.2f}x peak RSS")  # fmt: skip
    c = results["compacted"][0]
    print(f"  partials / compacted: {a['wall_s'] / c['wall_s']:.2f}x wall, "
          f"{a['cpu_s'] / c['cpu_s']:.2f}x CPU, "
          f"{a['peak_rss_bytes'] / c['peak_rss_bytes']:.2f}x peak RSS")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
