"""Store and digest at cluster scale: ingest rate and digest time.

A synthetic job of --nodes nodes x --seconds periods x 100 sensors at 1 Hz
(default 256 x 3600 = 92 M values, the issue's target) is written as agent
spool files (cached between runs in --work-dir), then:

- ``hushmon ingest`` of the whole spool: values per second, peak memory;
- the same spool again (idempotent pass: every file skipped);
- ``hushmon digest`` in a fresh process: wall time (target < 30 s), peak memory;

and, on a sample of the same files, what a user would write instead:

- a per-line Python parser with row-by-row INSERTs (executemany);
- the same parser with one bulk Arrow insert;
- DuckDB's read_csv splitting the lines in SQL (line protocol as a
  space-separated file, fields unnested with string_split).

Each alternative's rate is printed next to hushmon's as a ratio. The machine
is shared: the load average is printed with the figures.
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

import duckdb
import pyarrow as pa

from hushmon import jsonio
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import Scenario, values_per_node_period, write_spool


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/hushmon-bench-digest"))
    ap.add_argument(
        "--sample-lines",
        type=int,
        default=200_000,
        help="lines of the spool the per-line alternatives parse (rates only)",
    )
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON ('-' = stdout)")
    args = ap.parse_args()
    if args.nodes < 1 or args.seconds < 2:
        ap.error("--nodes >= 1 and --seconds >= 2")
    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    sc = Scenario(
        nodes=args.nodes,
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

    db = work / "bench.duckdb"
    db.unlink(missing_ok=True)
    rep = ingest_spool(db, spool)
    ingest_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    again = ingest_spool(db, spool)
    # The digest runs as a user runs it: `hushmon digest` in a fresh process
    # (Python start and imports included).
    t = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "hushmon.cli",
            "digest",
            "bench",
            "--db",
            str(db),
            "--out",
            str(work / "report"),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    digest_s = time.perf_counter() - t
    digest_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    digest_json = json.loads((work / "report" / "digest.json").read_text())
    report_bytes = (work / "report" / "report.html").stat().st_size

    sample = files[: max(1, len(files) // max(1, args.nodes) * 4)]  # about four nodes' files
    rows_rate = _naive_row_inserts(files, min(args.sample_lines // 100, 2_000), work)
    bulk_rate = _naive_bulk(files, args.sample_lines, work)
    csv_rate = _duckdb_read_csv(sample, work)
    ours = rep.values_per_s
    figures = {
        "nodes": args.nodes,
        "seconds": args.seconds,
        "values_per_node_period": per_node_period,
        "values_stored": rep.values_stored,
        "spool_bytes": spool_bytes,
        "store_bytes": db.stat().st_size,
        "ingest_s": rep.seconds,
        "ingest_values_per_s": ours,
        "ingest_peak_rss_bytes": ingest_rss,
        "reingest_s": again.seconds,
        "reingest_files_skipped": again.files_already_ingested,
        "digest_s": digest_s,
        "digest_peak_rss_bytes": digest_rss,
        "digest_findings": [f["factor"] for f in digest_json["findings"]],
        "digest_states": len(digest_json["states"]["states"]),
        "report_bytes": report_bytes,
        "alt_naive_row_inserts_values_per_s": rows_rate,
        "alt_naive_bulk_values_per_s": bulk_rate,
        "alt_duckdb_read_csv_values_per_s": csv_rate,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
    }
    print(
        f"job: {args.nodes} nodes x {args.seconds} s x {per_node_period - 1} sensors "
        f"+ job line = {rep.values_stored:,} values, spool {spool_bytes / 1e9:.2f} GB, "
        f"store {figures['store_bytes'] / 1e9:.2f} GB"
    )
    print(
        f"ingest:   {rep.seconds:7.1f} s  {ours / 1e6:6.2f} M values/s  "
        f"peak RSS {ingest_rss / 1e9:.2f} GB"
    )
    print(
        f"again:    {again.seconds:7.1f} s  ({again.files_already_ingested} files skipped, "
        f"{again.values_stored} values stored)"
    )
    print(
        f"digest:   {digest_s:7.1f} s  (target < 30 s)  peak RSS {digest_rss / 1e9:.2f} GB, "
        f"{len(figures['digest_findings'])} findings, {figures['digest_states']} states, "
        f"report {figures['report_bytes'] / 1e6:.1f} MB"
    )
    print("alternatives (values/s, hushmon ingest / alternative):")
    for label, rate in (
        ("per-line Python parser + row INSERTs", rows_rate),
        ("per-line Python parser + one bulk insert", bulk_rate),
        ("DuckDB read_csv + SQL split", csv_rate),
    ):
        print(f"  {label:42s} {rate / 1e6:7.3f} M/s   ratio {ours / rate:7.1f}x")
    print(
        f"load average {figures['load_average'][0]:.1f} on {figures['cpus']} CPUs "
        "(shared machine: figures are lower bounds)"
    )
    jsonio.emit(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
