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
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import numpy as np
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.store.lake import CommitStats, lake_commit, open_lake, open_lake_readonly


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


def _reader(lake: str, rows: int, stop: mp.Event, out: mp.Queue) -> None:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--groups", type=int, default=20, help="groups per writer")
    ap.add_argument("--rows", type=int, default=200_000, help="values per group (x1000)")
    args = ap.parse_args()
    if args.writers < 1 or args.groups < 1 or args.rows < 1000 or args.rows % 1000:
        sys.exit("bench_lake_commits: --writers, --groups >= 1, --rows a multiple of 1000")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    with tempfile.TemporaryDirectory(prefix="hm-lake-bench-") as tmp:
        print(f"{args.writers} writers at once on a fresh lake, a reader counting:")
        many = run(Path(tmp, "many.lake"), args.writers, args.groups, args.rows, True)
        print("1 writer alone:")
        one = run(Path(tmp, "one.lake"), 1, args.groups, args.rows, False)
    print(f"{args.writers} writers / 1 writer, commits per second: {many / one:.2f}")
    print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
