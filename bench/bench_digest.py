"""Digest time and peak memory at cluster scale, old path against new; ingest rate.

Synthetic jobs of --nodes (default 256,1024,4096) nodes x --seconds (3600)
periods x ~100 sensors at 1 Hz, a saturated network and a swapping phase,
written straight into stores with DuckDB/Arrow (hushmon.store.synthetic.
write_store: spool files of 4096 nodes x 1 h would be ~40 GB of text), cached
in --work-dir:

- ``N.duckdb``: the embedded store with every raw sample and the job-wide
  summaries (job_summaries, the reducers' moments; sketches left empty);
- ``N.lake``: a lake (DuckLake) with the 1-minute rollups and the summaries
  and no raw samples, as after retention expired them (a job's digest reads
  the rollups for bins of a minute or more whether raw data is there or not).

Each digest runs as a user runs it, ``hushmon digest`` in a fresh process
(Python start and imports included); wall time and the process's own peak
RSS (wait4). Paths:

- ``old``: every period of every node (``--max-bins`` above the periods: the
  code path of every job before bins), where it fits (--old-max-nodes);
- ``bins``: per-node bins from the raw samples (DuckDB store), the job's
  extremes from its summaries; ``bins-nosum``: the same store without
  summaries (extremes from the GROUP BY);
- ``rollups``: per-node bins from the lake's rollups;
- ``summaries``: ``--from-summaries`` (across-node factors only).

Goals (issue 20): 256 nodes <= 10 s, 4096 nodes <= 60 s within 4 GiB.
``--ingest`` also measures the spool path at --ingest-nodes (256): spool
files, ``hushmon ingest``, a second pass and the per-line alternatives, as
before. The machine is shared: the load average is printed with each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from hushmon import jsonio
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import Scenario, values_per_node_period, write_spool, write_store


def _spool(sc: Scenario, work: Path) -> Path:
    spool = work / f"spool-{sc.nodes}x{sc.seconds}"
    marker = spool / ".complete"
    if marker.exists():
        return spool
    shutil.rmtree(spool, ignore_errors=True)
    t = time.perf_counter()
    write_spool(sc, spool)
    marker.write_text("ok\n")
    print(f"generated {spool} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return spool


def _naive_parse(
    files: list[Path], max_lines: int
) -> tuple[list[tuple[str, str, int, float]], int]:
    rows: list[tuple[str, str, int, float]] = []
    lines = 0
    for f in files:
        with f.open() as fh:
            for line in fh:
                key, fields, ts = line.rstrip("\n").split(" ")
                t = int(ts)
                for kv in fields.split(","):
                    name, _, raw = kv.partition("=")
                    v = float(raw[:-1]) if raw.endswith("i") else float(raw)
                    rows.append((key, name, t, v))
                lines += 1
                if lines >= max_lines:
                    return rows, lines
    return rows, lines


def _naive_row_inserts(files: list[Path], max_lines: int, work: Path) -> float:
    db = work / "naive-rows.duckdb"
    db.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE s (k VARCHAR, f VARCHAR, t BIGINT, v DOUBLE)")
    start = time.perf_counter()
    rows, _ = _naive_parse(files, max_lines)
    con.executemany("INSERT INTO s VALUES (?, ?, ?, ?)", rows)
    elapsed = time.perf_counter() - start
    con.close()
    db.unlink(missing_ok=True)
    return len(rows) / elapsed


def _naive_bulk(files: list[Path], max_lines: int, work: Path) -> float:
    db = work / "naive-bulk.duckdb"
    db.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    start = time.perf_counter()
    rows, _ = _naive_parse(files, max_lines)
    cols = list(zip(*rows, strict=True))
    table = pa.table({"k": cols[0], "f": cols[1], "t": cols[2], "v": cols[3]})
    con.register("t", table)
    con.execute("CREATE TABLE s AS SELECT * FROM t").fetchall()
    elapsed = time.perf_counter() - start
    con.close()
    db.unlink(missing_ok=True)
    return len(rows) / elapsed


def _duckdb_read_csv(files: list[Path], work: Path) -> float:
    db = work / "duckdb-csv.duckdb"
    db.unlink(missing_ok=True)
    con = duckdb.connect(str(db))
    con.execute("SET enable_progress_bar = false")
    names = ", ".join(f"'{f}'" for f in files)
    start = time.perf_counter()
    con.execute(
        f"""CREATE TABLE s AS
        SELECT k, split_part(kv, '=', 1) AS f, t,
               TRY_CAST(rtrim(split_part(kv, '=', 2), 'i') AS DOUBLE) AS v
        FROM (SELECT k, t, unnest(string_split(fs, ',')) AS kv
              FROM read_csv([{names}], delim=' ', header=false, quote='', escape='',
                            columns={{'k': 'VARCHAR', 'fs': 'VARCHAR', 't': 'BIGINT'}}))"""
    ).fetchall()
    elapsed = time.perf_counter() - start
    n = con.execute("SELECT count(*) FROM s").fetchall()[0][0]
    con.close()
    db.unlink(missing_ok=True)
    return n / elapsed


def _store(sc: Scenario, work: Path, kind: str) -> Path:
    """The scenario's store of ``kind`` (duckdb | lake), written once and cached."""
    store = work / f"{sc.nodes}x{sc.seconds}.{kind}"
    marker = work / f"{store.name}.complete"
    if marker.exists():
        return store
    if store.is_dir():
        shutil.rmtree(store)
    store.unlink(missing_ok=True)
    t = time.perf_counter()
    write_store(sc, store, summaries=True, raw=kind == "duckdb")
    marker.write_text("ok\n")
    print(f"wrote {store} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return store


def _without_summaries(store: Path) -> Path:
    """A copy of the DuckDB store without job_summaries (cached)."""
    copy = store.with_name(store.stem + ".nosum.duckdb")
    marker = copy.with_name(copy.name + ".complete")
    if not marker.exists():
        shutil.copyfile(store, copy)
        con = duckdb.connect(str(copy))
        con.execute("DELETE FROM job_summaries").fetchall()
        con.close()
        marker.write_text("ok\n")
    return copy


def _load() -> float:
    return os.getloadavg()[0]


def _digest(store: Path, out: Path, *extra: str) -> dict[str, Any]:
    """``hushmon digest`` in a fresh process: wall s, the child's peak RSS, what it found."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "hushmon.cli", "digest", "bench", "--db", str(store)]
    cmd += ["--out", str(out), *extra]
    load = _load()
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        raise SystemExit(f"digest failed: {' '.join(cmd)}: {err.decode()[-400:]}")
    # what the digest wrote (not --json: re-emitting it indented is a cost of its own)
    name = "digest-summaries.json" if "--from-summaries" in extra else "digest.json"
    doc = json.loads((out / name).read_text())
    res = doc.get("resolution", {})
    return {
        "wall_s": wall,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
        "findings": sorted(f"{f['factor']}:{f['severity']}" for f in doc["findings"]),
        "source": res.get("source"),
        "step_s": res.get("step_s"),
        "steps": res.get("steps"),
        "load_before": load,
        "load_after": _load(),
    }


def _ingest_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The spool path at --ingest-nodes: ingest rate, second pass, alternatives."""
    sc = Scenario(
        nodes=args.ingest_nodes,
        seconds=args.seconds,
        job="bench",
        network="saturated",
        swap_phases=[(args.seconds // 3, args.seconds // 2)],
        lines_per_file=60_000,
    )
    per_node_period = values_per_node_period(sc)
    spool = _spool(sc, work)
    files = sorted(spool.glob("*.lp"))
    spool_bytes = sum(f.stat().st_size for f in files)
    db = work / "ingested.duckdb"
    db.unlink(missing_ok=True)
    rep = ingest_spool(db, spool)
    ingest_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    again = ingest_spool(db, spool)
    sample = files[: max(1, len(files) // max(1, sc.nodes) * 4)]  # about four nodes' files
    rows_rate = _naive_row_inserts(files, min(args.sample_lines // 100, 2_000), work)
    bulk_rate = _naive_bulk(files, args.sample_lines, work)
    csv_rate = _duckdb_read_csv(sample, work)
    ours = rep.values_per_s
    print(
        f"ingest job: {sc.nodes} nodes x {sc.seconds} s x {per_node_period - 1} sensors "
        f"+ job line = {rep.values_stored:,} values, spool {spool_bytes / 1e9:.2f} GB, "
        f"store {db.stat().st_size / 1e9:.2f} GB"
    )
    print(
        f"ingest:   {rep.seconds:7.1f} s  {ours / 1e6:6.2f} M values/s  "
        f"peak RSS {ingest_rss / 1e9:.2f} GB  (load {_load():.1f})"
    )
    print(
        f"again:    {again.seconds:7.1f} s  ({again.files_already_ingested} files skipped, "
        f"{again.values_stored} values stored)"
    )
    print("alternatives (values/s, hushmon ingest / alternative):")
    for label, rate in (
        ("per-line Python parser + row INSERTs", rows_rate),
        ("per-line Python parser + one bulk insert", bulk_rate),
        ("DuckDB read_csv + SQL split", csv_rate),
    ):
        print(f"  {label:42s} {rate / 1e6:7.3f} M/s   ratio {ours / rate:7.1f}x")
    return {
        "nodes": sc.nodes,
        "values_stored": rep.values_stored,
        "spool_bytes": spool_bytes,
        "store_bytes": db.stat().st_size,
        "ingest_s": rep.seconds,
        "ingest_values_per_s": ours,
        "ingest_peak_rss_bytes": ingest_rss,
        "reingest_s": again.seconds,
        "alt_naive_row_inserts_values_per_s": rows_rate,
        "alt_naive_bulk_values_per_s": bulk_rate,
        "alt_duckdb_read_csv_values_per_s": csv_rate,
    }


def _row(nodes: int, path: str, r: dict[str, Any], goal_s: float | None) -> str:
    res = f"{r['steps']} steps of {r['step_s']:g} s ({r['source']})" if r["source"] else ""
    goal = (
        ""
        if goal_s is None
        else f" goal {goal_s:g} s: {'met' if r['wall_s'] <= goal_s else 'NOT met'}"
    )
    return (
        f"{nodes:5d}  {path:9s} {r['wall_s']:7.1f} s  {r['peak_rss_bytes'] / 2**30:5.2f} GiB  "
        f"load {r['load_before']:.1f}-{r['load_after']:.1f}  {res}{goal}\n"
        f"                  findings: {', '.join(r['findings']) or 'none'}"
    )


GOALS_S = {256: 10.0, 4096: 60.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", default="256,1024,4096", help="comma-separated node counts")
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/hushmon-bench-digest"))
    ap.add_argument(
        "--old-max-nodes", type=int, default=256, help="run the old path up to this many nodes"
    )
    ap.add_argument(
        "--raw-max-nodes",
        type=int,
        default=4096,
        help="write the raw DuckDB store and digest it up to this many nodes",
    )
    ap.add_argument(
        "--paths",
        default="old,bins,bins-nosum,rollups,summaries",
        help="which paths to run (bins-nosum: raw bins from a copy of the store without "
        "job_summaries: the extremes then come from the GROUP BY)",
    )
    ap.add_argument("--ingest", action="store_true", help="also the spool ingest figures")
    ap.add_argument("--ingest-nodes", type=int, default=256)
    ap.add_argument(
        "--sample-lines",
        type=int,
        default=200_000,
        help="lines of the spool the per-line alternatives parse (rates only)",
    )
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON ('-' = stdout)")
    args = ap.parse_args()
    try:
        node_counts = [int(n) for n in args.nodes.split(",")]
    except ValueError:
        ap.error(f"--nodes takes numbers separated by commas, not {args.nodes!r}")
    paths = set(args.paths.split(","))
    unknown = paths - {"old", "bins", "bins-nosum", "rollups", "summaries"}
    if unknown:
        ap.error(f"unknown path(s): {', '.join(sorted(unknown))}")
    if min(node_counts) < 1 or args.seconds < 2:
        ap.error("--nodes >= 1 and --seconds >= 2")
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {"seconds": args.seconds, "cpus": os.cpu_count(), "runs": []}
    if args.ingest:
        figures["ingest"] = _ingest_figures(args, work)
    print(f"digest of a synthetic job, {args.seconds} periods of 1 s, on {os.cpu_count()} CPUs")
    print("nodes  path        wall      peak RSS  load       what the factors saw")
    for nodes in node_counts:
        sc = Scenario(
            nodes=nodes,
            seconds=args.seconds,
            job="bench",
            network="saturated",
            swap_phases=[(args.seconds // 3, args.seconds // 2)],
        )
        runs: dict[str, dict[str, Any]] = {}
        raw_ok = nodes <= args.raw_max_nodes
        if raw_ok and "old" in paths and nodes <= args.old_max_nodes:
            duck = _store(sc, work, "duckdb")
            runs["old"] = _digest(duck, work / "out-old", "--max-bins", str(10 * args.seconds))
        if raw_ok and "bins" in paths:
            runs["bins"] = _digest(_store(sc, work, "duckdb"), work / "out-bins")
        if raw_ok and "bins-nosum" in paths:
            store = _without_summaries(_store(sc, work, "duckdb"))
            runs["bins-nosum"] = _digest(store, work / "out-bins-nosum")
        if "rollups" in paths:
            runs["rollups"] = _digest(_store(sc, work, "lake"), work / "out-rollups")
        if "summaries" in paths:
            store = _store(sc, work, "lake")
            runs["summaries"] = _digest(store, work / "out-summaries", "--from-summaries")
        for path, r in runs.items():
            print(_row(nodes, path, r, GOALS_S.get(nodes) if path != "old" else None))
            figures["runs"].append({"nodes": nodes, "path": path, **r})
        old = runs.get("old")
        for path in ("bins", "bins-nosum", "rollups", "summaries"):
            if old and path in runs:
                new = runs[path]
                print(
                    f"       old / {path}: time {old['wall_s'] / new['wall_s']:.1f}x, "
                    f"peak RSS {old['peak_rss_bytes'] / new['peak_rss_bytes']:.1f}x"
                )
    figures["load_average"] = os.getloadavg()
    print(
        f"load average {figures['load_average'][0]:.1f} / {figures['load_average'][1]:.1f} / "
        f"{figures['load_average'][2]:.1f} on {figures['cpus']} CPUs "
        "(shared machine: figures are lower bounds)"
    )
    jsonio.emit(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
