"""Synthetic spool files: many nodes, known patterns, for tests and benchmarks.

The generator writes what hushmon-agent writes (docs/formats.md): one batch
of lines per node and period, scheduled timestamps shared by all nodes, one
``job`` line per node and period. A :class:`Scenario` says which patterns the
job shows, so an analyzer's answer is known in advance:

- ``network="saturated"``: per node, InfiniBand transmit + receive stays at a
  constant ceiling while the split between them moves (the seed's butterfly
  with 10^8-byte messages);
- ``network="light"``: little traffic, transmit and receive rise together;
- ``swap_phases``: spans of seconds where the nodes swap, the disk is busy and
  user CPU time and FLOPS fall;
- ``slow_node``: one node carries twice the work, the others wait idle;
- ``io_phases``: spans of heavy file I/O (busy disk, CPUs waiting) without swapping;
- ``omit``: measurements left out (a node without a PMU, without swap data).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

CPU_FIELDS = [
    "user_pct",
    "nice_pct",
    "system_pct",
    "idle_pct",
    "iowait_pct",
    "irq_pct",
    "softirq_pct",
    "steal_pct",
]
PMU_FIELDS = [
    "flops_per_s",
    "instructions_per_s",
    "cycles_per_s",
    "cache_misses_per_s",
    "branch_misses_per_s",
    "llc_misses_per_s",
    "ipc",
    "score_cpu",
    "mem_stall_pct",
    "mux_ratio",
]

START_NS = 1_732_270_000_000_000_000
GIB = 1 << 30


@dataclass
class Scenario:
    nodes: int = 4
    seconds: int = 120
    job: str = "synthetic"
    cpus: int = 3
    network: str = "light"  # "saturated", "light" or "none"
    ceiling_bytes_per_s: float = 1.1e9
    swap_phases: list[tuple[int, int]] = field(default_factory=list)
    slow_node: int | None = None
    start_ns: int = START_NS
    period_ns: int = 1_000_000_000
    seed: int = 1
    lines_per_file: int = 200_000
    omit: tuple[str, ...] = ()  # measurements this node does not publish (e.g. "pmu")
    busy_pct: float = 88.0  # user CPU of a computing node
    io_phases: list[tuple[int, int]] = field(default_factory=list)  # file I/O, no swapping

    def host(self, node: int) -> str:
        return f"node{node:03d}"


def _node_series(sc: Scenario, node: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every measurement's field matrix (seconds x fields) for one node."""
    t = sc.seconds
    swapping = np.zeros(t, dtype=bool)
    for a, b in sc.swap_phases:
        swapping[max(a, 0) : min(b, t)] = True
    busy = np.full(t, sc.busy_pct) + rng.normal(0, 2.0, t)
    if sc.slow_node is not None:
        busy = np.full(t, 97.0 if node == sc.slow_node else 45.0) + rng.normal(0, 1.5, t)
    io = np.zeros(t, dtype=bool)
    for a, b in sc.io_phases:
        io[max(a, 0) : min(b, t)] = True
    busy = np.where(swapping, 14.0 + rng.normal(0, 3.0, t), busy)
    busy = np.where(io & ~swapping, 40.0 + rng.normal(0, 3.0, t), busy)
    busy = np.clip(busy, 0.5, 99.0)
    iowait = np.where(swapping, 45.0 + rng.normal(0, 5.0, t), rng.uniform(0, 0.5, t))
    iowait = np.where(io & ~swapping, 30.0 + rng.normal(0, 3.0, t), iowait)
    system = np.clip(2.0 + rng.normal(0, 0.4, t), 0, None)
    idle = np.clip(100.0 - busy - iowait - system - 0.3, 0, None)
    cpu_total = np.column_stack(
        [busy, np.zeros(t), system, idle, iowait, np.full(t, 0.1), np.full(t, 0.2), np.zeros(t)]
    )
    out: dict[str, np.ndarray] = {"cpu,cpu=total": cpu_total}
    for c in range(sc.cpus):
        jitter = rng.normal(0, 1.0, (t, 1)) * np.array([[1, 0, 0.1, -1.1, 0, 0, 0, 0]])
        out[f"cpu,cpu=cpu{c}"] = np.clip(cpu_total + jitter, 0, 100)
    load1 = busy / 100 * sc.cpus + rng.normal(0, 0.05, t)
    out["load"] = np.column_stack(
        [load1, load1 * 0.98, load1 * 0.95, np.round(load1), np.where(swapping, 2.0, 0.0)]
    )
    total = 64 * GIB
    used = np.where(swapping, 0.99, 0.55) * total
    swap_total = 16 * GIB
    swap_used = np.cumsum(np.where(swapping, 64 << 20, 0)).clip(0, swap_total)
    out["mem"] = np.column_stack(
        [
            np.full(t, total),
            total - used,
            total - used + 1 * GIB,
            np.full(t, 200 << 20),
            np.full(t, 2 * GIB),
            used / total * 100,
            np.full(t, swap_total),
            swap_total - swap_used,
            np.full(t, 16 << 20),
        ]
    )
    swap_pages = np.where(swapping, rng.uniform(3000, 9000, t), 0.0)
    out["vm"] = np.column_stack(
        [
            swap_pages * 4 + rng.uniform(0, 50, t),
            swap_pages * 4 + rng.uniform(0, 80, t),
            swap_pages * 0.5,
            swap_pages * 0.5,
            rng.uniform(1000, 3000, t),
            np.where(swapping, swap_pages * 0.3, 0.0),
        ]
    )
    disk_bytes = np.where(swapping, swap_pages * 4096, rng.uniform(0, 2e5, t))
    disk_bytes = np.where(io & ~swapping, rng.uniform(1.5e8, 2.5e8, t), disk_bytes)
    out["disk,device=sda"] = np.column_stack(
        [
            disk_bytes * 0.5,
            disk_bytes * 0.5 + rng.uniform(0, 1e5, t),
            disk_bytes / 65536,
            disk_bytes / 65536 + 2,
            np.where(swapping | io, 92.0, 1.0) + rng.uniform(0, 3, t),
        ]
    )
    if sc.network == "saturated":
        share = 0.5 + 0.2 * np.sin(np.arange(t) / 7.0 + node) + rng.normal(0, 0.05, t)
        share = share.clip(0.25, 0.75)
        total_rate = sc.ceiling_bytes_per_s * (1 + rng.normal(0, 0.004, t))
        ib_tx, ib_rx = total_rate * share, total_rate * (1 - share)
    elif sc.network == "light":
        level = rng.uniform(0.02, 0.12, t) * sc.ceiling_bytes_per_s
        ib_tx = level * (1 + rng.normal(0, 0.05, t))
        ib_rx = level * (1 + rng.normal(0, 0.05, t))
    else:
        ib_tx = ib_rx = np.zeros(t)
    out["ib,device=mlx5_0,port=1"] = np.column_stack([ib_rx, ib_tx, ib_rx / 4096, ib_tx / 4096])
    eth = rng.uniform(1e3, 2e4, (t, 2))
    out["net,iface=eth0"] = np.column_stack(
        [eth[:, 0], eth[:, 1], eth[:, 0] / 800, eth[:, 1] / 800, np.zeros(t), np.zeros(t)]
    )
    lo = rng.uniform(1e2, 1e3, (t, 2))
    out["net,iface=lo"] = np.column_stack(
        [lo[:, 0], lo[:, 0], lo[:, 0] / 500, lo[:, 0] / 500, np.zeros(t), np.zeros(t)]
    )
    out[f"cgroup,job={sc.job},cgroup=/hushmon/{sc.job}"] = np.column_stack(
        [
            busy * sc.cpus,
            busy * sc.cpus * 0.97,
            system * sc.cpus,
            used * 0.9,
            swap_used,
            disk_bytes * 0.5,
            disk_bytes * 0.5,
        ]
    )
    out["perf_sw"] = np.column_stack(
        [busy * sc.cpus, rng.uniform(500, 2000, t), rng.uniform(0, 20, t), rng.uniform(1e3, 5e3, t)]
    )
    flops = busy / 100 * 2.4e9 * sc.cpus * (1 + rng.normal(0, 0.03, t))
    cycles = busy / 100 * 2.5e9 * sc.cpus
    instr = cycles * np.where(swapping, 0.6, 1.8)
    out["pmu,cpu=total"] = np.column_stack(
        [
            flops,
            instr,
            cycles,
            rng.uniform(1e6, 5e6, t),
            rng.uniform(1e5, 5e5, t),
            rng.uniform(1e5, 1e6, t),
            instr / np.maximum(cycles, 1),
            np.where(swapping, 80.0, 35.0) + rng.normal(0, 2, t),
            np.where(swapping, 55.0, 20.0) + rng.normal(0, 2, t),
            np.full(t, 0.5),
        ]
    )
    out["hushmon_agent"] = np.column_stack(
        [
            rng.uniform(80, 150, t),
            rng.exponential(20, t),
            np.full(t, 6 << 20),
            np.zeros(t),
            np.full(t, 1000.0),
        ]
    )
    return out


FIELDS: dict[str, list[str]] = {
    "cpu": CPU_FIELDS,
    "load": ["load1", "load5", "load15", "procs_running", "procs_blocked"],
    "mem": [
        "total_bytes",
        "free_bytes",
        "available_bytes",
        "buffers_bytes",
        "cached_bytes",
        "used_pct",
        "swap_total_bytes",
        "swap_free_bytes",
        "dirty_bytes",
    ],
    "vm": [
        "pgpgin_per_s",
        "pgpgout_per_s",
        "pswpin_per_s",
        "pswpout_per_s",
        "pgfault_per_s",
        "pgmajfault_per_s",
    ],
    "disk": ["read_bytes_per_s", "write_bytes_per_s", "reads_per_s", "writes_per_s", "busy_pct"],
    "ib": ["rx_bytes_per_s", "tx_bytes_per_s", "rx_packets_per_s", "tx_packets_per_s"],
    "net": [
        "rx_bytes_per_s",
        "tx_bytes_per_s",
        "rx_packets_per_s",
        "tx_packets_per_s",
        "rx_errors_per_s",
        "tx_errors_per_s",
    ],
    "cgroup": [
        "cpu_usage_pct",
        "cpu_user_pct",
        "cpu_system_pct",
        "mem_current_bytes",
        "mem_swap_bytes",
        "io_read_bytes_per_s",
        "io_write_bytes_per_s",
    ],
    "perf_sw": [
        "task_clock_pct",
        "context_switches_per_s",
        "cpu_migrations_per_s",
        "page_faults_per_s",
    ],
    "pmu": PMU_FIELDS,
    "hushmon_agent": ["cpu_us", "jitter_us", "rss_bytes", "samples_dropped", "period_ms"],
}

_INTEGER_FIELDS = frozenset(("total_bytes", "rss_bytes", "samples_dropped", "swap_total_bytes"))


def _line_formats(series: dict[str, np.ndarray], host: str) -> list[tuple[str, np.ndarray]]:
    formats = []
    for key, values in series.items():
        measurement, _, tags = key.partition(",")
        names = FIELDS[measurement]
        parts = [f"{n}=%di" if n in _INTEGER_FIELDS else f"{n}=%.6g" for n in names]
        prefix = f"{measurement},host={host}" + (f",{tags}" if tags else "")
        formats.append((prefix + " " + ",".join(parts) + " %d\n", values))
    return formats


def node_lines(sc: Scenario, node: int) -> Iterator[str]:
    """The node's spool lines, one period after the other."""
    rng = np.random.default_rng(sc.seed * 100_003 + node)
    host = sc.host(node)
    series = {
        k: v for k, v in _node_series(sc, node, rng).items() if k.split(",")[0] not in sc.omit
    }
    formats = _line_formats(series, host)
    job_line = f"job,host={host},job={sc.job} active=1i %d\n"
    for i in range(sc.seconds):
        ts = sc.start_ns + i * sc.period_ns
        for fmt, values in formats:
            yield fmt % (*values[i], ts)
        yield job_line % ts


def values_per_node_period(sc: Scenario) -> int:
    """How many values one node writes per period (the job line's counts too)."""
    rng = np.random.default_rng(0)
    small = Scenario(**{**sc.__dict__, "seconds": 2})
    return (
        sum(
            v.shape[1]
            for k, v in _node_series(small, 0, rng).items()
            if k.split(",")[0] not in sc.omit
        )
        + 1
    )


def write_spool(sc: Scenario, spool_dir: Path) -> list[Path]:
    """Write the scenario as closed spool files (``<host>-<start_ns>-<seq>.lp``)."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for node in range(sc.nodes):
        host = sc.host(node)
        seq = 0
        buf: list[str] = []

        def flush(buf: list[str] = buf, host: str = host) -> None:
            nonlocal seq
            if not buf:
                return
            path = spool_dir / f"{host}-{sc.start_ns}-{seq}.lp"
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(buf), encoding="ascii")
            os.replace(tmp, path)
            written.append(path)
            seq += 1
            buf.clear()

        for line in node_lines(sc, node):
            buf.append(line)
            if len(buf) >= sc.lines_per_file:
                flush()
        flush()
    return written


def synthetic_store(sc: Scenario, folder: Path, db: Path | None = None) -> Path:
    """Write the scenario's spool under ``folder`` and ingest it into ``db``
    (default ``folder/hushmon.duckdb``); returns the store path."""
    from hushmon.store.ingest import ingest_spool

    spool = folder / f"spool-{sc.job}"
    write_spool(sc, spool)
    db = db or folder / "hushmon.duckdb"
    report = ingest_spool(db, spool)
    if report.rejected_lines:
        raise RuntimeError(f"synthetic spool has corrupt lines: {report.rejected[:3]}")
    return db


@dataclass
class _Moments:
    """Across-node count, mean, M2, min, max per (sensor key, period), merged
    chunk by chunk (Chan et al., as the reducers merge their partials)."""

    keys: list[tuple[str, str, str]]
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def add(self, values: np.ndarray) -> None:
        """``values``: nodes x keys x periods of one chunk."""
        n_b = values.shape[0]
        mean_b = values.mean(axis=0)
        m2_b = ((values - mean_b) ** 2).sum(axis=0)
        n = self.count + n_b
        delta = mean_b - self.mean
        self.mean = self.mean + delta * n_b / n
        self.m2 = self.m2 + m2_b + delta**2 * self.count * n_b / n
        self.count = n
        self.lo = np.minimum(self.lo, values.min(axis=0))
        self.hi = np.maximum(self.hi, values.max(axis=0))


def _rollups(ids: np.ndarray, values: np.ndarray, times: np.ndarray) -> dict[str, np.ndarray]:
    """samples_1m rows (series x minute: count, sum, min, max) of series x periods values."""
    minute_ns = 60_000_000_000
    minutes = times // minute_ns
    starts = np.flatnonzero(np.diff(minutes, prepend=minutes[0] - 1))
    counts = np.diff(np.append(starts, len(times)))
    n_min = len(starts)
    return {
        "series_id": np.repeat(ids, n_min),
        "minute_ns": np.tile(minutes[starts] * minute_ns, len(ids)),
        "count": np.tile(counts, len(ids)).astype(np.int64),
        "sum": np.add.reduceat(values, starts, axis=1).ravel(),
        "min": np.minimum.reduceat(values, starts, axis=1).ravel(),
        "max": np.maximum.reduceat(values, starts, axis=1).ravel(),
    }


def write_store(
    sc: Scenario,
    store: Path,
    nodes_per_insert: int = 32,
    summaries: bool = False,
    raw: bool = True,
) -> Path:
    """Write the scenario straight into a store (the DuckDB file, or a lake:
    a ``*.lake`` folder) as ``hushmon ingest`` would have stored its spool:
    the same series, samples and job periods, without the text in between
    (values keep full precision; the spool rounds them to 6 digits). A lake
    gets the 1-minute rollups its compaction would build (``samples_1m``).
    ``summaries``: also the job-wide summaries the collector stores
    (``job_summaries``: count, sum, mean, M2, min, max over the nodes per
    period and sensor, merged as the reducers merge; the quantile sketch is
    left empty). ``raw=False``: no raw samples, as after retention expired
    them (a lake then keeps the rollups).

    For jobs whose spool is too big to write here (4096 nodes x 1 h is about
    40 GB of line protocol). Rows go in as Arrow tables of
    ``nodes_per_insert`` nodes each, so memory stays bounded by that chunk.
    """
    from hushmon.store.lake import is_lake, series_id_of
    from hushmon.store.schema import open_store
    from hushmon.store.transaction import in_transaction

    lake = is_lake(store)
    con = open_store(store)
    moments: _Moments | None = None
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        rollups = "samples_1m" in tables
        row = con.execute("SELECT max(series_id) FROM series").fetchone()
        next_id = int(row[0]) + 1 if row and row[0] is not None else 1
        times = sc.start_ns + np.arange(sc.seconds, dtype=np.int64) * sc.period_ns
        for first in range(0, sc.nodes, nodes_per_insert):
            names: list[tuple[str, str, str, str]] = []
            columns: list[np.ndarray] = []
            hosts = [sc.host(n) for n in range(first, min(first + nodes_per_insert, sc.nodes))]
            keys: list[tuple[str, str, str]] = []
            for node, host in enumerate(hosts, start=first):
                rng = np.random.default_rng(sc.seed * 100_003 + node)
                for key, values in _node_series(sc, node, rng).items():
                    measurement, _, tags = key.partition(",")
                    if measurement in sc.omit:
                        continue
                    tags = ",".join(sorted(tags.split(","))) if tags else ""
                    for j, fname in enumerate(FIELDS[measurement]):
                        names.append((host, measurement, tags, fname))
                        if node == first:
                            keys.append((measurement, tags, fname))
                        col = values[:, j]
                        columns.append(np.round(col) if fname in _INTEGER_FIELDS else col)
            if lake:
                ids = np.array([series_id_of(*n) for n in names], dtype=np.int64)
            else:
                ids = np.arange(next_id, next_id + len(names), dtype=np.int64)
                next_id += len(names)
            matrix = np.vstack(columns).astype(np.float64)  # series x periods
            series_in = pa.table(
                {
                    "series_id": ids,
                    "host": [n[0] for n in names],
                    "measurement": [n[1] for n in names],
                    "tags": [n[2] for n in names],
                    "field": [n[3] for n in names],
                }
            )
            samples_in = pa.table(
                {
                    "series_id": np.repeat(ids, sc.seconds),
                    "time_ns": np.tile(times, len(ids)),
                    "value": matrix.ravel(),
                }
            )
            activity_in = pa.table(
                {
                    "job": [sc.job] * (len(hosts) * sc.seconds),
                    "host": np.repeat(np.asarray(hosts, dtype=object), sc.seconds),
                    "time_ns": np.tile(times, len(hosts)),
                }
            )
            if summaries:
                per_node = matrix.reshape(len(hosts), len(keys), sc.seconds)
                if moments is None:
                    zeros = np.zeros((len(keys), sc.seconds))
                    moments = _Moments(
                        keys, zeros, zeros.copy(), zeros.copy(), zeros + np.inf, zeros - np.inf
                    )
                moments.add(per_node)
            if rollups:
                con.register("rollups_in", pa.table(_rollups(ids, matrix, times)))
            con.register("series_in", series_in)
            con.register("samples_in", samples_in)
            con.register("activity_in", activity_in)
            table = "series_rows" if lake else "series"

            def insert(c: Any, table: str = table) -> None:
                c.execute(f"INSERT INTO {table} SELECT * FROM series_in").fetchall()
                if raw:
                    c.execute("INSERT INTO samples SELECT * FROM samples_in").fetchall()
                c.execute("INSERT INTO job_activity SELECT * FROM activity_in").fetchall()
                if rollups:
                    c.execute("INSERT INTO samples_1m SELECT * FROM rollups_in").fetchall()

            in_transaction(con, insert)
            if rollups:
                con.unregister("rollups_in")
            for name in ("series_in", "samples_in", "activity_in"):
                con.unregister(name)
        if moments is not None:
            _insert_summaries(con, sc, moments, times)
    finally:
        con.close()
    return store


def _insert_summaries(con: Any, sc: Scenario, m: _Moments, times: np.ndarray) -> None:
    k, t = len(m.keys), len(times)
    rows = pa.table(
        {
            "job": [sc.job] * (k * t),
            "time_ns": np.tile(times, k),
            "measurement": np.repeat([key[0] for key in m.keys], t),
            "tags": np.repeat([key[1] for key in m.keys], t),
            "field": np.repeat([key[2] for key in m.keys], t),
            "count": m.count.ravel().astype(np.int64),
            "sum": (m.mean * m.count).ravel(),
            "mean": m.mean.ravel(),
            "m2": m.m2.ravel(),
            "min": m.lo.ravel(),
            "max": m.hi.ravel(),
            "sketch": ["{}"] * (k * t),
            "origin": ["synthetic"] * (k * t),
        }
    )
    con.register("summaries_in", rows)
    con.execute("INSERT INTO job_summaries BY NAME SELECT * FROM summaries_in").fetchall()
    con.unregister("summaries_in")
