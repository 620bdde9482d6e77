"""The job history of ``hushmon serve`` at a site's size: 100,000 jobs.

Writes ``--jobs`` synthetic job records (200 users, names, states, start
times over a year in the order a site records them, findings and tags,
one job in ten recorded twice: RUNNING then its end) into the embedded
DuckDB file and a lake, then in a fresh process per store times each kind
of page the jobs page asks for as ``hushmon serve`` does (history/reader.py:
the embedded file opened per request, a lake kept open), the search, and
the page rendered as HTML. Prints per
query the median wall ms and CPU ms over ``--repeat`` runs, the rows it
matched, and the process's resident size before and after the queries
(peak). Side by side: the first page listed from the ``jobs`` view (a
GROUP BY over ``job_activity``, what ``hushmon ingest --list`` reads) for
the same jobs at ``--periods`` node-periods each, as a ratio.

    .venv/bin/python bench/bench_job_history.py [--jobs 100000] [--repeat 5] [--periods 240]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np
import pyarrow as pa

DAY_NS = 86_400 * 10**9
T0 = 1_767_225_600 * 10**9  # 2026-01-01 UTC
FACTORS = ("network_bandwidth", "topology", "disk_swap", "imbalance", "idle_cpu", "gpu_idle")
SEVERITIES = ("high", "medium", "low")
NAMES = ("vasp", "lammps", "gromacs", "cp2k", "wrf", "python", "bash", "openfoam", "namd", "qe")
STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY")


def _records(n: int, users: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = np.sort(T0 + rng.integers(0, 365 * DAY_NS, n))
    dur = rng.lognormal(np.log(3600), 1.2, n).astype(np.int64) * 10**9
    nodes = np.minimum(2 ** rng.integers(0, 9, n), 256).astype(np.int32)
    owner = np.array([f"user{u:03d}" for u in range(users)])[rng.zipf(1.3, n) % users]
    name = np.array(NAMES)[rng.integers(0, len(NAMES), n)]
    name = np.char.add(name, np.char.add("-", rng.integers(0, 50, n).astype(str)))
    state = np.array(STATES)[rng.choice(len(STATES), n, p=[0.7, 0.12, 0.1, 0.06, 0.02])]
    findings, worst, main, tags = [], [], [], []
    for _i in range(n):
        k = int(rng.integers(0, 4))
        picked = rng.choice(len(FACTORS), k, replace=False)
        sev = sorted(rng.integers(0, 3, k).tolist())
        items = [f"{FACTORS[p]}:{SEVERITIES[s]}" for p, s in zip(picked, sev, strict=True)]
        findings.append(f" {' '.join(items)} " if items else "")
        worst.append(SEVERITIES[sev[0]] if sev else "")
        main.append(FACTORS[picked[0]] if k else "")
        t = [FACTORS[p] for p, s in zip(picked, sev, strict=True) if s < 2]
        tags.append(f" {' '.join(t)} " if t else "")
    jobs = np.arange(1_000_000, 1_000_000 + n).astype(str)
    cols = {
        "job": jobs, "owner": owner, "uid": np.full(n, -1), "name": name, "state": state,
        "exit_code": np.zeros(n, np.int32), "start_ns": start, "end_ns": start + dur,
        "nodes": nodes, "hosts": np.full(n, ""), "findings": findings, "worst": worst,
        "main_finding": main, "tags": tags, "report": jobs, "source": np.full(n, "bench"),
        "recorded_ns": start + dur,
    }  # fmt: skip
    table = pa.table(cols)
    # one job in ten also has its RUNNING row, recorded when it started
    again = np.flatnonzero(rng.random(n) < 0.1)
    running = table.take(again).to_pydict()
    running["state"] = ["RUNNING"] * len(again)
    running["findings"] = running["tags"] = running["worst"] = running["main_finding"] = [""] * len(
        again
    )
    running["end_ns"] = [None] * len(again)
    running["recorded_ns"] = [int(s) for s in start[again]]
    return pa.concat_tables([table, pa.table(running, schema=table.schema)])


def _write(store: Path, table: pa.Table, chunks: int) -> None:
    from hushmon.history.records import CREATE_INDEX, CREATE_TABLE
    from hushmon.store.lake import is_lake, lake_commit
    from hushmon.store.schema import open_store

    table = table.sort_by("recorded_ns")  # in the order a site records them
    con = open_store(store)
    step = -(-table.num_rows // chunks)
    for i in range(chunks):
        part = table.slice(i * step, step)

        def body(c: object, part: pa.Table = part) -> None:
            con.execute(CREATE_TABLE).fetchall()
            con.register("part", part)
            con.execute("INSERT INTO job_records SELECT * FROM part").fetchall()
            con.unregister("part")

        if is_lake(store):
            lake_commit(con, body)
        else:
            body(con)
    if not is_lake(store):
        con.execute(CREATE_INDEX).fetchall()
    con.close()


def _activity(store: Path, n: int, periods: int) -> None:
    """job_activity for the ``jobs`` view: ``periods`` node-periods per job."""
    from hushmon.store.schema import open_store

    con = open_store(store)
    con.execute(
        f"""INSERT INTO job_activity
            SELECT (1000000 + j)::VARCHAR, 'n' || (p % 8)::VARCHAR,
                   {T0} + j * 300000000000 + p * 1000000000
            FROM range({n}) r(j), range({periods}) q(p)"""
    ).fetchall()
    con.close()


QUERIES = {
    "first page, newest first": {},
    "one user's jobs": {"user": "user007"},
    "a user's own view (viewer)": {"viewer": "user003"},
    "finding imbalance >= high": {"factor": "imbalance", "severity": "high"},
    "name contains 'lammps'": {"name": "lammps"},
    "tag idle_cpu": {"tag": "idle_cpu"},
    "started in one week": {"since": "2026-06-01", "until": "2026-06-08"},
    "state FAILED, sorted by worst": {"state": "FAILED", "sort": "worst"},
    "page 1000 of 50 rows": {"page": "1000"},
    "job id lookup": {"job": "1054321"},
}


def _child(store: str, repeat: int, jobs_view: bool) -> None:
    from hushmon.history.query import search
    from hushmon.history.reader import StoreReader
    from hushmon.live.auth import Viewer
    from hushmon.live.jobs_http import query_from
    from hushmon.live.jobs_page import jobs_html
    from hushmon.store.schema import open_store_readonly

    def rss_mib() -> float:
        return (
            int(Path("/proc/self/statm").read_text().split()[1])
            * os.sysconf("SC_PAGE_SIZE")
            / 2**20
        )

    factors = list(FACTORS)
    # as hushmon serve reads: the embedded file opened per request, a lake kept open
    reader = StoreReader(lambda: Path(store))
    with reader.connection():
        pass  # a lake opened (and the extensions loaded) before, as in a running server
    out: dict[str, object] = {"rss_before_mib": rss_mib()}
    rows = {}
    for label, params in QUERIES.items():
        viewer = Viewer(params.get("viewer", ""), "viewer" not in params, "bench")
        pairs = [(k, v) for k, v in params.items() if k != "viewer"]
        walls, cpus, opens = [], [], []
        for _ in range(repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            with reader.connection() as con:
                opened = time.perf_counter()
                page = search(con, query_from(pairs, viewer))
            jobs_html(page, viewer, factors, True)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            opens.append(opened - w0)
        rows[label] = {
            "wall_ms": 1000 * statistics.median(walls),
            "cpu_ms": 1000 * statistics.median(cpus),
            "open_ms": 1000 * statistics.median(opens),
            "matched": page.total,
        }
    out["queries"] = rows
    out["rss_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if jobs_view:
        con = open_store_readonly(Path(store))
        walls = []
        for _ in range(max(1, repeat // 2)):
            w0 = time.perf_counter()
            con.execute("SELECT * FROM jobs ORDER BY start_ns DESC LIMIT 50").fetchall()
            walls.append(time.perf_counter() - w0)
        con.close()
        out["jobs_view_first_page_ms"] = 1000 * statistics.median(walls)
    print(json.dumps(out))


def _report(store: Path, args: argparse.Namespace, jobs_view: bool) -> None:
    r = subprocess.run(
        [sys.executable, __file__, "--repeat", str(args.repeat), "--child", str(store),
         "1" if jobs_view else "0"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    res = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"  {'page':34} {'wall ms':>8} {'CPU ms':>7} {'open ms':>8} {'matched':>8}")
    for label, q in res["queries"].items():
        print(f"  {label:34} {q['wall_ms']:8.1f} {q['cpu_ms']:7.1f} {q['open_ms']:8.1f} "
              f"{q['matched']:8,}")  # fmt: skip
    print(f"  resident size: {res['rss_before_mib']:.0f} MiB before the queries, "
          f"peak {res['rss_peak_mib']:.0f} MiB (before the jobs view)")  # fmt: skip
    if "jobs_view_first_page_ms" in res:
        first = res["queries"]["first page, newest first"]["wall_ms"]
        view = res["jobs_view_first_page_ms"]
        print(f"  first page from the jobs view (GROUP BY job_activity): {view:.0f} ms, "
              f"{view / first:.1f}x the records' page")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--periods", type=int, default=240, help="node-periods per job (jobs view)")
    ap.add_argument("--stores", default="duckdb,lake")
    ap.add_argument("--child", nargs=2, metavar=("STORE", "JOBSVIEW"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child[0], args.repeat, args.child[1] == "1")
        return 0
    print(f"load average at start: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    t = time.perf_counter()
    table = _records(args.jobs, args.users)
    made_s = time.perf_counter() - t
    print(f"{args.jobs:,} jobs, {table.num_rows:,} record rows made in {made_s:.1f} s")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        for kind in args.stores.split(","):
            store = Path(tmp) / ("hushmon.lake" if kind == "lake" else "hushmon.duckdb")
            t = time.perf_counter()
            _write(store, table, chunks=100)
            print(f"\n{kind}: written in 100 appends in {time.perf_counter() - t:.1f} s")
            if kind == "lake":
                # as the hourly timer leaves it: the appends' files merged
                from hushmon.store.lake_compact import compact

                _report(store, args, False)
                t = time.perf_counter()
                compact(store, settle_s=0)
                print(f"\nlake after hushmon store compact ({time.perf_counter() - t:.1f} s):")
            jobs_view = kind == "duckdb" and args.periods > 0
            if jobs_view:
                t = time.perf_counter()
                _activity(store, args.jobs, args.periods)
                print(f"  + job_activity {args.jobs * args.periods:,} rows in "
                      f"{time.perf_counter() - t:.1f} s (for the jobs view)")  # fmt: skip
            _report(store, args, jobs_view)
    print(f"\nload average at end: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
