"""Bytes per stored value: the lake against the embedded DuckDB file and PCP.

Writes N nodes x T seconds at 1 Hz with the agent's real field set into a lake
through the collector's append path (``lake_writer.LakeWriter.append`` of a
``RawGroup`` per --group node-batches: samples, new series, job activity and
a transport_batches row per node and second, in one commit), runs
``hushmon store compact``, and prints bytes per value and per node per day,
next to the embedded DuckDB store holding the same values and PCP's anchor
(about 10 MB per host per day at a 10 s interval). Bytes per value count the
samples' files; bytes per node per day count the whole lake (samples, series,
job activity, transport_batches, catalog) but not the rollups.

The field set is the real agent's: every series of one period in
tests/fixtures/spool/butterfly-1node (hushmon-agent on a 2-CPU VM: per-CPU
and total CPU, load, memory, vm, disks, network interfaces, perf_sw, the
agent's own; ``job`` lines are activity, not samples). The values follow that
fixture too: node n at second t takes the fixture's value of the same series
at period (t + shift_n) mod P; a series constant in the fixture (sizes, zero
counters) stays constant, and a varying one is jittered by --jitter (relative,
default 1 %) and rounded as the agent prints it (3 decimals, or an integer
where the fixture has one), so no two nodes repeat each other and the
dictionary cannot learn a short loop. --jitter 0 is the pure replay (an
optimistic bound: each series has only P distinct values).

Variants (--variants): the lake's settings (zstd 9, Parquet v1 pages, row
groups of 262,144 rows, sorted by series then time) and one change each:
zstd 3 and 19, Parquet v2 pages, row groups of 122,880 (DuckDB's default),
1M or 4M rows,
unsorted (rows as they arrive: second by second, node by node), sorted by
time then series, values stored as FLOAT (float32, 7 significant digits:
loses precision the agent writes; shown for the figure). DuckLake's default
codec (snappy) cannot be shown: a lake with a zstd level set refuses other
codecs.

    .venv/bin/python bench/bench_store_bytes.py [--nodes 32] [--seconds 3600] [--variants all]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np
import pyarrow as pa

from hushmon.store.lake import open_lake, series_id_of
from hushmon.store.lake_compact import compact, tier_bytes
from hushmon.store.schema import open_store
from hushmon.transport.lake_writer import LakeWriter
from hushmon.transport.raw_group import (
    ACTIVITY_SCHEMA,
    BATCHES_SCHEMA,
    SAMPLES_SCHEMA,
    SERIES_SCHEMA,
    RawGroup,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/spool/butterfly-1node"
PCP_BYTES_PER_HOST_DAY = 10e6  # the anchor: PCP archive at a 10 s interval
START_NS = 1_795_000_000_000_000_000
_LINE = re.compile(r"^(\S+?)((?:,\S+?)*) (\S+) (\d+)$")


@dataclass
class Series:
    measurement: str
    tags: str  # sorted k=v pairs without host
    field: str
    values: np.ndarray  # the fixture's values, one per period
    integer: bool


def fixture_series() -> list[Series]:
    """Every (measurement, tags, field) of the fixture with its values over time."""
    seen: dict[tuple[str, str, str], dict[int, float]] = {}
    integer: dict[tuple[str, str, str], bool] = {}
    for path in sorted(FIXTURE.glob("*.lp")):
        for line in path.read_text().splitlines():
            m = _LINE.match(line)
            if not m or m.group(1) == "job":
                continue
            tags = ",".join(
                sorted(t for t in m.group(2).split(",")[1:] if not t.startswith("host="))
            )
            t = int(m.group(4))
            for kv in m.group(3).split(","):
                name, text = kv.split("=", 1)
                is_int = text.endswith("i")
                try:
                    value = float(text.rstrip("i"))
                except ValueError:
                    continue  # a string field
                key = (m.group(1), tags, name)
                seen.setdefault(key, {})[t] = value
                integer[key] = integer.get(key, True) and (is_int or value == int(value))
    times = sorted({t for v in seen.values() for t in v})
    out = []
    for key, by_time in sorted(seen.items()):
        if len(by_time) < len(times) // 2:
            continue  # a series the agent wrote once or twice (start-up)
        values = np.array([by_time.get(t, np.nan) for t in times])
        values = np.where(np.isnan(values), np.nanmedian(values), values)
        out.append(Series(key[0], key[1], key[2], values, integer[key]))
    return out


def node_values(series: list[Series], node: int, seconds: int, jitter: float) -> np.ndarray:
    """(series x seconds) values of one node."""
    rng = np.random.default_rng(node)
    period = len(series[0].values)
    idx = (np.arange(seconds) + rng.integers(period)) % period
    out = np.empty((len(series), seconds))
    for i, s in enumerate(series):
        v = s.values[idx]
        if jitter > 0 and np.ptp(s.values) > 0:
            v = v * (1 + rng.normal(0, jitter, seconds))
        out[i] = np.round(v) if s.integer else np.round(v, 3)
    return out


@dataclass
class Variant:
    name: str
    options: dict[str, str | int]
    sort: str | None  # SET SORTED BY clause; None: RESET (unsorted)
    value_type: str = "DOUBLE"


BASE_SORT = "series_id ASC, time_ns ASC"
VARIANTS = {
    "lake": Variant("lake (zstd 9, v1, 256k rows, sorted)", {}, BASE_SORT),
    "zstd3": Variant("zstd 3", {"parquet_compression_level": 3}, BASE_SORT),
    "zstd19": Variant("zstd 19", {"parquet_compression_level": 19}, BASE_SORT),
    "v2": Variant("Parquet v2 pages", {"parquet_version": 2}, BASE_SORT),
    "rg122k": Variant(
        "row groups of 122,880 rows (DuckDB's)", {"parquet_row_group_size": 122_880}, BASE_SORT
    ),
    "rg1m": Variant("row groups of 1M rows", {"parquet_row_group_size": 1_048_576}, BASE_SORT),
    "rg4m": Variant("row groups of 4M rows", {"parquet_row_group_size": 4_194_304}, BASE_SORT),
    "unsorted": Variant("unsorted", {}, None),
    "timesort": Variant("sorted by time then series", {}, "time_ns ASC, series_id ASC"),
    "float": Variant("value FLOAT (float32)", {}, BASE_SORT, "FLOAT"),
}


def write_lake(
    lake: Path,
    variant: Variant,
    series: list[Series],
    nodes: int,
    seconds: int,
    group: int,
    jitter: float,
) -> tuple[int, float]:
    """Writes the data, compacts; returns (values, seconds spent writing)."""
    con = open_lake(lake)
    for name, value in variant.options.items():
        con.execute("CALL lake.set_option(?, ?)", [name, value]).fetchall()
    if variant.sort is None:
        con.execute("ALTER TABLE samples RESET SORTED BY").fetchall()
    else:
        con.execute(f"ALTER TABLE samples SET SORTED BY ({variant.sort})").fetchall()
    if variant.value_type != "DOUBLE":  # DuckLake only widens a column: make it anew
        con.execute("DROP TABLE samples").fetchall()
        con.execute(
            f"CREATE TABLE samples (series_id BIGINT, time_ns BIGINT, value {variant.value_type})"
        ).fetchall()
        con.execute(f"ALTER TABLE samples SET SORTED BY ({BASE_SORT})").fetchall()
    ids = np.array(
        [
            [series_id_of(f"n{n:05d}", s.measurement, s.tags, s.field) for s in series]
            for n in range(nodes)
        ],
        dtype=np.int64,
    )
    con.close()
    hosts = [f"n{n:05d}" for n in range(nodes)]
    series_rows = pa.table(
        {
            "series_id": pa.array(ids.ravel()),
            "host": pa.array(np.repeat(hosts, len(series))),
            "measurement": pa.array([s.measurement for s in series] * nodes),
            "tags": pa.array([s.tags for s in series] * nodes),
            "field": pa.array([s.field for s in series] * nodes),
        },
        schema=SERIES_SCHEMA,
    )
    values = np.stack([node_values(series, n, seconds, jitter) for n in range(nodes)])
    # groups of `group` node-batches, in arrival order (second by second)
    seconds_per_group = max(1, group // nodes)
    written = 0
    writer = LakeWriter(lake)  # the collector's append path
    began = time.perf_counter()
    for t0 in range(0, seconds, seconds_per_group):
        t1 = min(seconds, t0 + seconds_per_group)
        writer.append(_raw_group(ids, hosts, values, series_rows, t0, t1))
        written += (t1 - t0) * ids.size
    write_s = time.perf_counter() - began
    writer.close()
    # 'now' just after the data so nothing expires; no grace: measure what stays
    compact(lake, now_ns=START_NS + seconds * 1_000_000_000 + 600 * 10**9, grace_s=0)
    return written, write_s


def _raw_group(
    ids: np.ndarray,
    hosts: list[str],
    values: np.ndarray,
    series_rows: pa.Table,
    t0: int,
    t1: int,
) -> RawGroup:
    """Seconds [t0, t1) of every node as the collector's raw path hands them
    to the lake writer: one batch per node and second (its transport_batches
    row and its job line), values second by second, node by node."""
    span, nodes = t1 - t0, len(hosts)
    per_node = ids.shape[1]
    times = START_NS + np.arange(t0, t1, dtype=np.int64) * 1_000_000_000
    batch = np.arange(span * nodes, dtype=np.int32)  # batch = (second, node)
    samples = pa.table(
        {
            "series_id": np.tile(ids.ravel(), span),
            "time_ns": np.repeat(times, ids.size),
            "value": np.ascontiguousarray(values[:, :, t0:t1].transpose(2, 0, 1)).reshape(-1),
            "batch": np.repeat(batch, per_node),
        },
        schema=SAMPLES_SCHEMA,
    )
    batch_hosts = pa.array(hosts * span)
    batch_times = np.repeat(times, nodes)
    activity = pa.table(
        {"job": pa.array(["1"] * (span * nodes)), "host": batch_hosts,
         "time_ns": batch_times, "batch": batch},
        schema=ACTIVITY_SCHEMA,
    )  # fmt: skip
    now_us = int(time.time() * 1e6)
    batches = pa.table(
        {
            "host": batch_hosts,
            "epoch": pa.array(np.ones(span * nodes, dtype=np.int64)),
            "seq": pa.array(np.repeat(np.arange(t0, t1, dtype=np.int64), nodes)),
            "lines": pa.array(np.full(span * nodes, 16, dtype=np.int64)),
            "period_ns": pa.array(batch_times),
            "dropped": pa.array(np.zeros(span * nodes, dtype=np.int64)),
            "replay": pa.array(np.zeros(span * nodes, dtype=bool)),
            "subject": pa.array([f"hm.raw.r1.{h}" for h in hosts] * span),
            "stream_seq": pa.array(np.arange(t0 * nodes, t1 * nodes, dtype=np.int64)),
            "received_at": pa.array(np.full(span * nodes, now_us), pa.timestamp("us")),
        },
        schema=BATCHES_SCHEMA,
    )
    return RawGroup(samples=samples, series=series_rows, activity=activity, batches=batches)


def write_embedded(db: Path, series: list[Series], nodes: int, seconds: int, jitter: float) -> None:
    con = open_store(db)
    n_series = len(series)
    con.execute("BEGIN TRANSACTION").fetchall()
    series_tab = pa.table(
        {
            "series_id": pa.array(np.arange(nodes * n_series, dtype=np.int32)),
            "host": pa.array(np.repeat([f"n{n:05d}" for n in range(nodes)], n_series)),
            "measurement": pa.array([s.measurement for s in series] * nodes),
            "tags": pa.array([s.tags for s in series] * nodes),
            "field": pa.array([s.field for s in series] * nodes),
        }
    )
    con.register("s", series_tab)
    con.execute("INSERT INTO series SELECT * FROM s").fetchall()
    for n in range(nodes):
        v = node_values(series, n, seconds, jitter)
        sid = np.repeat(np.arange(n * n_series, (n + 1) * n_series, dtype=np.int32), seconds)
        tns = np.tile(START_NS + np.arange(seconds, dtype=np.int64) * 1_000_000_000, n_series)
        con.register("g", pa.table({"series_id": sid, "time_ns": tns, "value": v.reshape(-1)}))
        con.execute("INSERT INTO samples SELECT * FROM g ORDER BY time_ns, series_id").fetchall()
        con.unregister("g")
    con.execute("COMMIT").fetchall()
    con.execute("CHECKPOINT").fetchall()
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--group", type=int, default=2048, help="node-batches per commit")
    ap.add_argument("--jitter", type=float, default=0.01)
    ap.add_argument("--variants", default="all", help=f"comma list of {','.join(VARIANTS)} or all")
    ap.add_argument("--no-embedded", action="store_true")
    args = ap.parse_args()
    names = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    if any(n not in VARIANTS for n in names) or args.nodes < 1 or args.seconds < 1:
        sys.exit(
            f"bench_store_bytes: --variants from {','.join(VARIANTS)}; --nodes, --seconds >= 1"
        )
    series = fixture_series()
    n_values = args.nodes * args.seconds * len(series)
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(
        f"{args.nodes} nodes x {args.seconds} s at 1 Hz x {len(series)} values per node and "
        f"second (the agent's field set, {FIXTURE.name}) = {n_values:,} values; jitter "
        f"{args.jitter:g}"
    )
    print(
        f"{'store':34} {'B/value':>8} {'MB/node/day':>12} {'x PCP@10s':>10} {'samples B':>12} "
        f"{'files':>6} {'write s':>8}"
    )
    pcp_row = PCP_BYTES_PER_HOST_DAY / 1e6
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hm-bytes-") as tmp:
        for name in names:
            variant = VARIANTS[name]
            lake = Path(tmp, f"{name}.lake")
            written, write_s = write_lake(
                lake, variant, series, args.nodes, args.seconds, args.group, args.jitter
            )
            con = open_lake(lake, create=False)
            sizes = tier_bytes(con, lake, None)
            con.close()
            total = sizes.raw + sizes.other + sizes.catalog  # rollups are a later tier
            per_value = sizes.raw / written
            mb_node_day = total / args.nodes / (args.seconds / 86_400) / 1e6
            results[name] = per_value
            print(
                f"{variant.name:34} {per_value:8.3f} {mb_node_day:12.2f} "
                f"{mb_node_day / pcp_row:10.2f} {sizes.raw:12,} {sizes.files:6} {write_s:8.1f}"
            )
            series_minutes = args.nodes * len(series) * args.seconds / 60
            print(
                f"{'':34} rollups {sizes.rollups / series_minutes:.2f} B per series-minute; "
                f"catalog {sizes.catalog:,} B; series and other tables {sizes.other:,} B"
            )
        if not args.no_embedded:
            db = Path(tmp, "embedded.duckdb")
            write_embedded(db, series, args.nodes, args.seconds, args.jitter)
            size = db.stat().st_size
            mb_node_day = size / args.nodes / (args.seconds / 86_400) / 1e6
            print(
                f"{'embedded DuckDB file':34} {size / n_values:8.3f} {mb_node_day:12.2f} "
                f"{mb_node_day / pcp_row:10.2f} {size:12,} {1:6} {'':>8}"
            )
    print(
        f"PCP archive, 10 s interval (anchor): {pcp_row:.1f} MB/host/day; the same at 1 Hz "
        f"would be {pcp_row * 10:.0f} MB"
    )
    if "lake" in results:
        goal = "met" if results["lake"] <= 1.5 else "NOT met"
        print(
            f"goal <= 1.5 B/value: {goal} ({results['lake']:.3f} B/value with the lake's settings)"
        )
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


if __name__ == "__main__":
    main()
