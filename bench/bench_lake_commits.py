"""Several processes on one lake: commits per second and retries.

Two (``--writers``) writer processes open the same fresh lake at the same
moment and append groups of ``--rows`` values (default 200,000: a collector's
group of ~2048 node batches) to ``samples``, each group in one
``lake_commit``, while a reader process counts the rows every 50 ms. Prints
per writer the commits, commits per second, retries and time spent waiting,
and for the reader how many counts it took, whether they only grew and
whether each was a whole number of groups (a half-written group would not
be). Then the same writers run one at a time, so the last line is the
two-writer rate over the one-writer rate.

    .venv/bin/python bench/bench_lake_commits.py [--writers 2] [--groups 20] [--rows 200000]

``--snapshots N`` measures instead how a commit's cost grows with the
snapshots the catalog holds (a running site's lake keeps every commit's
snapshot until ``store compact`` expires it): one process makes N commits
of ``--snapshot-rows`` rows into ``samples`` (1: the cheapest snapshot,
inlined in the catalog; over 100: a Parquet file each, as a collector's
group adds), flushing the inlined rows every
``--flush-every`` commits as the hourly compaction does (without expiring),
and every ``--probe-every`` snapshots prints the mean CPU and wall time of
the last window's aging commits and the median of ``--probes`` commits
of a ``--probe-rows`` group into ``samples`` (a Parquet file, as a
collector's group), with the catalog's size. At the end it expires every
snapshot but the newest and probes again.

    .venv/bin/python bench/bench_lake_commits.py --snapshots 20000 [--probe-every 2500]

Real commits cost 30-40 ms of CPU each (100-300 ms wall on a loaded
machine), so a day of a large site's snapshots (hundreds of thousands)
would take hours to make. ``--synthetic-snapshots 25000,100000,400000``
writes them straight into the SQLite catalog instead, each cumulative
count in turn, as a running site's catalog holds them: per snapshot a row
in ``ducklake_snapshot`` and ``ducklake_snapshot_changes`` (an insert into
``samples``) and ``--files-per-snapshot`` data files (3: a collector's
group adds samples, activity and batch files) that a later snapshot ended
(as the hourly merge ends them; their rows stay until their snapshots
expire), with their column statistics: copies of a real file's rows.
After each count it probes real commits as above (``--probes`` one-row
commits and group commits); at the end it expires every snapshot but the
newest as ``store compact`` does (by id, a chunk a commit) and probes
again. The copies name one real file, so the lake is for measuring only
(never cleaned up: the folder is deleted).

    .venv/bin/python bench/bench_lake_commits.py --synthetic-snapshots 25000,100000,400000
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import duckdb
import numpy as np
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.store.lake import CommitStats, lake_commit, open_lake, open_lake_readonly
from hushmon.store.lake_compact import expire_snapshots


def _group(writer: int, group: int, rows: int) -> pa.Table:
    """One group: 1000 series x (rows/1000) seconds of realistic-looking values."""
    rng = np.random.default_rng(writer * 100_003 + group)
    series = 1000
    per = rows // series
    sid = np.repeat(np.arange(series, dtype=np.int64) + writer * 1_000_000, per)
    t0 = (group * per) * 1_000_000_000
    time_ns = np.tile(np.arange(per, dtype=np.int64) * 1_000_000_000 + t0, series)
    value = np.round(rng.normal(50, 10, rows), 3)
    return pa.table({"series_id": sid, "time_ns": time_ns, "value": value})


def _writer(lake: str, writer: int, groups: int, rows: int, start: float, out: mp.Queue) -> None:
    time.sleep(max(0.0, start - time.time()))  # all open the fresh lake at once
    con = open_lake(Path(lake))
    stats = CommitStats()
    began = time.perf_counter()
    for g in range(groups):
        table = _group(writer, g, rows)

        def body(c: object, table: pa.Table = table) -> None:
            con.register("grp", table)
            con.execute("INSERT INTO samples SELECT series_id, time_ns, value FROM grp").fetchall()
            con.unregister("grp")

        lake_commit(con, body, stats)
    elapsed = time.perf_counter() - began
    con.close()
    out.put(("writer", writer, stats.commits, stats.retries, stats.waited_s, elapsed, stats.errors))


def _reader(lake: str, rows: int, stop: MpEvent, out: mp.Queue) -> None:
    while not Path(lake, "catalog.sqlite").exists():
        time.sleep(0.01)
    counts: list[int] = []
    while not stop.is_set():
        try:
            con = open_lake_readonly(Path(lake))
        except HushmonError:  # the lake is still being made
            time.sleep(0.05)
            continue
        while not stop.is_set():
            counts.append(int(con.execute("SELECT count(*) FROM samples").fetchone()[0]))
            time.sleep(0.05)
        counts.append(int(con.execute("SELECT count(*) FROM samples").fetchone()[0]))
        con.close()
    grew = all(b >= a for a, b in itertools.pairwise(counts))
    whole = all(c % rows == 0 for c in counts)
    out.put(("reader", len(counts), grew, whole, counts[-1] if counts else 0))


def run(lake: Path, writers: int, groups: int, rows: int, with_reader: bool) -> float:
    out: mp.Queue = mp.Queue()
    stop = mp.Event()
    start = time.time() + 1.0
    procs = [
        mp.Process(target=_writer, args=(str(lake), w, groups, rows, start, out))
        for w in range(writers)
    ]
    reader = mp.Process(target=_reader, args=(str(lake), rows, stop, out)) if with_reader else None
    for p in procs + ([reader] if reader else []):
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    stop.set()
    if reader:
        print(_reader_line(out.get()))
        reader.join()
    total_commits = 0
    longest_s = 0.0
    for _kind, w, commits, retries, waited_s, elapsed, errors in sorted(results):
        total_commits += commits
        longest_s = max(longest_s, elapsed)
        print(
            f"  writer {w}: {commits} commits in {elapsed:.2f} s = {commits / elapsed:.2f}/s, "
            f"{retries} retries, {waited_s:.2f} s waiting, {commits * rows / elapsed:,.0f} values/s"
        )
        for what, n in sorted(errors.items()):
            print(f"    retried {n}x: {what}")
    rate = total_commits / longest_s
    print(f"  all writers: {rate:.2f} commits/s, {rate * rows:,.0f} values/s")
    return rate


def _reader_line(result: tuple[object, ...]) -> str:
    _kind, n, grew, whole, last = result
    return (
        f"  reader: {n} counts, only grew: {grew}, each a whole number of groups: {whole}, "
        f"last {last:,}"
    )


def _probe(con: object, rows: int, probes: int, first_ns: int) -> tuple[float, float]:
    """Median CPU and wall seconds of ``probes`` commits of a ``rows`` group."""
    cpu: list[float] = []
    wall: list[float] = []
    for i in range(probes):
        table = _group(9, first_ns + i, rows)

        def body(c: object, table: pa.Table = table) -> None:
            con.register("grp", table)  # type: ignore[attr-defined]
            con.execute("INSERT INTO samples SELECT series_id, time_ns, value FROM grp").fetchall()  # type: ignore[attr-defined]
            con.unregister("grp")  # type: ignore[attr-defined]

        c0, w0 = time.process_time(), time.perf_counter()
        lake_commit(con, body)  # type: ignore[arg-type]
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return float(np.median(cpu)), float(np.median(wall))


def aging(
    lake: Path,
    snapshots: int,
    every: int,
    flush_every: int,
    rows: int,
    probes: int,
    snapshot_rows: int = 1,
) -> None:
    """Commit cost against the snapshots the catalog holds (module docstring)."""
    con = open_lake(lake)
    catalog = lake / "catalog.sqlite"
    probe_no = 0

    def line(made: int, window_cpu_s: float, window_wall_s: float, window: int) -> None:
        nonlocal probe_no
        cpu_s, wall_s = _probe(con, rows, probes, probe_no * probes)
        probe_no += 1
        one = (
            f"aging commit {window_cpu_s / window * 1e3:6.1f} ms CPU "
            f"{window_wall_s / window * 1e3:6.1f} ms wall"
            if window
            else "aging commit      -"
        )
        print(
            f"  {made:>7,} snapshots: {one}; {rows:,}-row group commit {cpu_s * 1e3:6.1f} ms "
            f"CPU {wall_s * 1e3:6.1f} ms wall; catalog {catalog.stat().st_size / 2**20:6.1f} MiB; "
            f"load {Path('/proc/loadavg').read_text().split()[0]}",
            flush=True,
        )

    line(0, 0.0, 0.0, 0)
    window_cpu = window_wall = 0.0
    window = 0
    for i in range(1, snapshots + 1):
        c0, w0 = time.process_time(), time.perf_counter()

        def aging_rows(c: duckdb.DuckDBPyConnection, i: int = i) -> None:
            sql = "INSERT INTO samples SELECT r, ?, r FROM range(?) t(r)"
            c.execute(sql, [i, snapshot_rows]).fetchall()

        lake_commit(con, aging_rows)
        window_cpu += time.process_time() - c0
        window_wall += time.perf_counter() - w0
        window += 1
        if i % flush_every == 0:
            lake_commit(con, lambda c: c.execute("CALL ducklake_flush_inlined_data('lake')"))
        if i % every == 0 or i == snapshots:
            line(i, window_cpu, window_wall, window)
            window_cpu = window_wall = 0.0
            window = 0
    c0 = time.perf_counter()
    expired = con.execute(
        "SELECT count(*) FROM ducklake_expire_snapshots('lake', older_than => now() + "
        "INTERVAL 1 DAY)"
    ).fetchone()
    print(
        f"  expired {expired[0] if expired else 0:,} snapshots in "
        f"{time.perf_counter() - c0:.1f} s wall; then:"
    )
    line(0, 0.0, 0.0, 0)
    con.close()


def _one_row_probe(con: object, probes: int, first: int) -> tuple[float, float]:
    """Median CPU and wall seconds of ``probes`` one-row (inlined) commits."""
    cpu: list[float] = []
    wall: list[float] = []
    for i in range(probes):
        c0, w0 = time.process_time(), time.perf_counter()

        def one_row(c: duckdb.DuckDBPyConnection, i: int = i) -> None:
            c.execute("INSERT INTO job_activity VALUES ('probe', 'n1', ?)", [first + i]).fetchall()

        lake_commit(con, one_row)  # type: ignore[arg-type]
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return float(np.median(cpu)), float(np.median(wall))


def _add_snapshots(catalog: Path, count: int, files_per: int) -> tuple[int, int]:
    """``count`` snapshots after the newest, each adding ``files_per`` copies
    of the newest samples file that the next snapshot ends; the catalog's
    snapshots and data file rows after."""
    db = sqlite3.connect(catalog)
    try:
        newest, schema_version, next_catalog_id, next_file_id = db.execute(
            "SELECT snapshot_id, schema_version, next_catalog_id, next_file_id "
            "FROM ducklake_snapshot ORDER BY snapshot_id DESC LIMIT 1"
        ).fetchone()
        table_id = db.execute(
            "SELECT table_id FROM ducklake_table WHERE table_name = 'samples' AND end_snapshot "
            "IS NULL"
        ).fetchone()[0]
        file_cols = [r[1] for r in db.execute("PRAGMA table_info(ducklake_data_file)")]
        template = dict(
            zip(
                file_cols,
                db.execute(
                    "SELECT * FROM ducklake_data_file WHERE table_id = ? AND end_snapshot IS NULL "
                    "ORDER BY data_file_id DESC LIMIT 1",
                    [table_id],
                ).fetchone(),
                strict=True,
            )
        )
        stats = db.execute(
            "SELECT * FROM ducklake_file_column_stats WHERE data_file_id = ?",
            [template["data_file_id"]],
        ).fetchall()
        now = db.execute(
            "SELECT snapshot_time FROM ducklake_snapshot WHERE snapshot_id = ?", [newest]
        )
        when = now.fetchone()[0]

        def files() -> Iterator[tuple[object, ...]]:
            for i in range(count):
                for f in range(files_per):
                    row = dict(template)
                    row.update(
                        data_file_id=next_file_id + i * files_per + f,
                        begin_snapshot=newest + 1 + i,
                        end_snapshot=newest + 2 + i,
                    )
                    yield tuple(row[c] for c in file_cols)

        db.executemany(
            "INSERT INTO ducklake_snapshot VALUES (?, ?, ?, ?, ?)",
            (
                (newest + 1 + i, when, schema_version, next_catalog_id,
                 next_file_id + (i + 1) * files_per)
                for i in range(count)
            ),
        )  # fmt: skip
        db.executemany(
            "INSERT INTO ducklake_snapshot_changes VALUES (?, ?, NULL, NULL, NULL)",
            ((newest + 1 + i, f"inserted_into_table:{table_id}") for i in range(count)),
        )
        marks = ",".join("?" * len(file_cols))
        db.executemany(f"INSERT INTO ducklake_data_file VALUES ({marks})", files())
        if stats:
            db.executemany(
                f"INSERT INTO ducklake_file_column_stats VALUES ({','.join('?' * len(stats[0]))})",
                ((next_file_id + n, *row[1:]) for n in range(count * files_per) for row in stats),
            )
        db.commit()
        snapshots = db.execute("SELECT count(*) FROM ducklake_snapshot").fetchone()[0]
        file_rows = db.execute("SELECT count(*) FROM ducklake_data_file").fetchone()[0]
        return int(snapshots), int(file_rows)
    finally:
        db.close()


def synthetic_aging(lake: Path, targets: list[int], files_per: int, rows: int, probes: int) -> None:
    """Commit cost with many snapshots written into the catalog (docstring)."""
    catalog = lake / "catalog.sqlite"
    con = open_lake(lake)
    probe_no = 0

    def line(what: str) -> None:
        nonlocal probe_no
        one_cpu, one_wall = _one_row_probe(con, probes, probe_no * probes)
        cpu_s, wall_s = _probe(con, rows, probes, probe_no * probes)
        probe_no += 1
        print(
            f"  {what}: one-row commit {one_cpu * 1e3:6.1f} ms CPU {one_wall * 1e3:6.1f} ms wall; "
            f"{rows:,}-row group commit {cpu_s * 1e3:6.1f} ms CPU {wall_s * 1e3:6.1f} ms wall; "
            f"catalog {catalog.stat().st_size / 2**20:7.1f} MiB; "
            f"load {Path('/proc/loadavg').read_text().split()[0]}",
            flush=True,
        )

    _probe(con, rows, 1, 10**6)  # a samples file to copy
    line("fresh lake")
    made = 0
    for target in targets:
        con.close()
        c0 = time.perf_counter()
        snapshots, file_rows = _add_snapshots(catalog, target - made, files_per)
        added_s = time.perf_counter() - c0
        made = target
        con = open_lake(lake)
        line(f"{snapshots:>7,} snapshots, {file_rows:>9,} file rows (written in {added_s:.0f} s)")
    # as `store compact` does: by id, EXPIRE_CHUNK a commit
    stats = CommitStats()
    c0, w0 = time.process_time(), time.perf_counter()
    expired = expire_snapshots(con, 1e-3, stats)
    print(
        f"  expired {expired:,} snapshots by id in {stats.commits} commit(s): "
        f"{time.process_time() - c0:.1f} CPU-s, {time.perf_counter() - w0:.1f} s wall",
        flush=True,
    )
    line("after expiry")
    con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--groups", type=int, default=20, help="groups per writer")
    ap.add_argument("--rows", type=int, default=200_000, help="values per group (x1000)")
    ap.add_argument("--snapshots", type=int, default=0, help="measure aging instead")
    ap.add_argument("--probe-every", type=int, default=2500, help="snapshots between probes")
    ap.add_argument(
        "--snapshot-rows",
        type=int,
        default=1,
        help="rows each aging commit adds to samples (over 100: a Parquet file, as a collector's)",
    )
    ap.add_argument("--flush-every", type=int, default=3600, help="commits between flushes")
    ap.add_argument("--probe-rows", type=int, default=20_000, help="values per probe group")
    ap.add_argument("--probes", type=int, default=5, help="probe commits per checkpoint")
    ap.add_argument(
        "--synthetic-snapshots",
        metavar="N,N,...",
        help="snapshots written into the catalog, cumulative counts (see the docstring)",
    )
    ap.add_argument("--files-per-snapshot", type=int, default=3)
    args = ap.parse_args()
    if args.writers < 1 or args.groups < 1 or args.rows < 1000 or args.rows % 1000:
        sys.exit("bench_lake_commits: --writers, --groups >= 1, --rows a multiple of 1000")
    if args.snapshots < 0 or min(args.probe_every, args.flush_every, args.probes) < 1:
        sys.exit(
            "bench_lake_commits: --snapshots >= 0; --probe-every, --flush-every, --probes >= 1"
        )
    if args.snapshot_rows < 1 or args.probe_rows < 1000 or args.probe_rows % 1000:
        sys.exit("bench_lake_commits: --snapshot-rows >= 1, --probe-rows a multiple of 1000")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    if args.synthetic_snapshots:
        try:
            targets = [int(x) for x in args.synthetic_snapshots.split(",")]
        except ValueError:
            sys.exit("bench_lake_commits: --synthetic-snapshots takes counts: 25000,100000")
        if targets != sorted(set(targets)) or targets[0] < 1 or args.files_per_snapshot < 0:
            sys.exit("bench_lake_commits: --synthetic-snapshots rising counts >= 1")
        with tempfile.TemporaryDirectory(prefix="hm-lake-synth-") as tmp:
            print(
                f"one process, snapshots written into the catalog with "
                f"{args.files_per_snapshot} ended file(s) each; probes of "
                f"{args.probes} commits (median):"
            )
            synthetic_aging(
                Path(tmp, "synth.lake"),
                targets,
                args.files_per_snapshot,
                args.probe_rows,
                args.probes,
            )
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
        return
    if args.snapshots:
        with tempfile.TemporaryDirectory(prefix="hm-lake-age-") as tmp:
            print(
                f"one process, {args.snapshots:,} commits of {args.snapshot_rows:,} row(s), "
                f"inlined rows flushed every "
                f"{args.flush_every:,}, probes of {args.probe_rows:,} rows:"
            )
            aging(
                Path(tmp, "age.lake"),
                args.snapshots,
                args.probe_every,
                args.flush_every,
                args.probe_rows,
                args.probes,
                args.snapshot_rows,
            )
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
        return
    with tempfile.TemporaryDirectory(prefix="hm-lake-bench-") as tmp:
        print(f"{args.writers} writers at once on a fresh lake, a reader counting:")
        many = run(Path(tmp, "many.lake"), args.writers, args.groups, args.rows, True)
        print("1 writer alone:")
        one = run(Path(tmp, "one.lake"), 1, args.groups, args.rows, False)
    print(f"{args.writers} writers / 1 writer, commits per second: {many / one:.2f}")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
