"""What the bed's Slurm accounting (slurmdbd + MariaDB, testbed/accounting.py)
adds to `hushmon testbed up`: a 2-node bed brought up and down --rounds
times with and without --no-accounting, alternating, so both see the same
load; prints each up's wall seconds and the CPU seconds of the up command
and its waited-for children (the daemons it leaves running are not
counted), the medians and their ratio, and the load average before and
after. The first up with accounting on a machine also makes the template
database (dbtemplate.py); --fresh-template times that one apart.

Needs root and the bed lock:
  flock /tmp/hushmon-bed.lock .venv/bin/python bench/bench_bed_startup.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
DATA_PARENT = Path("/var/tmp")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def up_down(extra: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one `testbed up`; the bed is taken down after."""
    data = Path(tempfile.mkdtemp(prefix="hushmon-bench-bed-", dir=DATA_PARENT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    up = subprocess.run(
        [*HUSHMON, "testbed", "up", "--nodes", "2", "--racks", "1", *extra, "--data-dir",
         str(data)], capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    wall_s = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([*HUSHMON, "testbed", "down"], capture_output=True, env=env, check=False)
    shutil.rmtree(data, ignore_errors=True)
    if up.returncode != 0:
        last = (up.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"bench_bed_startup: testbed up {' '.join(extra)} failed: {last}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall_s, cpu_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="ups of each kind (default 5)")
    ap.add_argument(
        "--fresh-template",
        action="store_true",
        help="first time one up that has to make the template database (in a new cache folder)",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_bed_startup: the bed needs root", file=sys.stderr)
        return 2
    env = dict(os.environ)
    print(f"load before: {load()}")
    if args.fresh_template:
        cache = tempfile.mkdtemp(prefix="hushmon-bench-dbcache-", dir=DATA_PARENT)
        wall, cpu = up_down([], {**env, "HUSHMON_TESTBED_CACHE": cache})
        shutil.rmtree(cache, ignore_errors=True)
        print(f"up making the template database: {wall:.2f} s wall, {cpu:.2f} CPU-s")
    up_down([], env)  # the machine's template exists from here on
    runs: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
    for i in range(args.rounds):
        for kind, extra in (("without", ["--no-accounting"]), ("with", [])):
            wall, cpu = up_down(extra, env)
            runs[kind].append((wall, cpu))
            print(f"round {i + 1} {kind:7s} accounting: {wall:.2f} s wall, {cpu:.2f} CPU-s")
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in runs.items()}  # fmt: skip
    for kind, (wall, cpu) in med.items():
        print(f"median {kind:7s} accounting: {wall:.2f} s wall, {cpu:.2f} CPU-s")
    print(
        f"with/without: wall x{med['with'][0] / med['without'][0]:.2f} "
        f"(+{med['with'][0] - med['without'][0]:.2f} s), "
        f"CPU x{med['with'][1] / med['without'][1]:.2f}"
    )
    print(f"load after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
