"""What pytest-xdist workers buy `make test-py` on this machine: the same
tests run with each worker count in turn (alternating, --rounds times),
wall seconds and CPU seconds (pytest and every process it started), the
load average before and after each run, and each count's wall time as a
ratio of the first count's.

    .venv/bin/python bench/bench_test_workers.py --workers 0,3 tests/transport
    .venv/bin/python bench/bench_test_workers.py --workers 0,2,4 --rounds 2 tests/python/test_run.py

Workers 0 is one process (no xdist). Groups as in `make test-py`
(--dist loadgroup, tests/xdist_groups.py). Failures are counted, not fatal:
a figure from a run with failures says so."""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTEST = REPO / ".venv" / "bin" / "pytest"


@dataclass
class Run:
    workers: int
    wall_s: float
    cpu_s: float
    load_before: float
    load_after: float
    summary: str


def _load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(workers: int, paths: list[str]) -> Run:
    argv = [str(PYTEST), "-q", "-p", "no:cacheprovider", "-n", str(workers)]
    if workers > 0:
        argv += ["--dist", "loadgroup"]
    load_before, cpu_before = _load1(), _children_cpu_s()
    start = time.monotonic()
    done = subprocess.run([*argv, *paths], cwd=REPO, capture_output=True, text=True, check=False)
    wall_s = time.monotonic() - start
    cpu_s = _children_cpu_s() - cpu_before
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
    summary = re.sub(r" in [0-9.]+s.*", "", last.strip("= "))
    return Run(workers, wall_s, cpu_s, load_before, _load1(), summary)


def _counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or any(c < 0 for c in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma list of worker counts (0 = no xdist)")
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=_counts, default=[0, 3], help="comma list (default 0,3)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each count, alternating")
    ap.add_argument("paths", nargs="+", help="test files or folders, as pytest takes them")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        print("bench_test_workers: --rounds must be at least 1", file=sys.stderr)
        return 2
    if not PYTEST.exists():
        print(f"bench_test_workers: {PYTEST} missing: run 'make' first", file=sys.stderr)
        return 2
    print(f"{os.cpu_count()} CPUs; tests: {' '.join(args.paths)}")
    runs: list[Run] = []
    for _ in range(args.rounds):
        for workers in args.workers:
            r = run_once(workers, args.paths)
            runs.append(r)
            print(
                f"workers {r.workers}: {r.wall_s:7.1f} s wall, {r.cpu_s:7.1f} CPU-s, "
                f"load {r.load_before:.1f} -> {r.load_after:.1f}; {r.summary}",
                flush=True,
            )
    base = [r.wall_s for r in runs if r.workers == args.workers[0]]
    base_s = sorted(base)[len(base) // 2]
    print(f"\nmedian wall time per worker count, ratio to workers {args.workers[0]}:")
    for workers in args.workers:
        walls = sorted(r.wall_s for r in runs if r.workers == workers)
        median = walls[len(walls) // 2]
        print(f"  workers {workers}: {median:7.1f} s  x{median / base_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
