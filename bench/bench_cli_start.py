"""What a `hushmon` start costs before it does anything: the CPU-seconds
(user + system, the child's own rusage) and wall time of commands that stop
at their argument checks, next to a bare Python start and to importing the
modules a command may load only once it runs. The tests start the CLI
hundreds of times, so each CPU-second here is paid many times in make test.

    .venv/bin/python bench/bench_cli_start.py [--rounds 5]

Rounds alternate the cases (a, b, c, a, b, c, ...) so a change in the
machine's load falls on all of them; medians are printed with the load."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

PY = sys.executable
CASES: list[tuple[str, list[str]]] = [
    ("python -c pass", [PY, "-c", "pass"]),
    ("hushmon overhead --config 1-2-C (refused)",
     [PY, "-m", "hushmon.cli", "overhead", "--config", "1-2-C", "--out", "/nonexistent/x"]),
    ("import overhead.analysis + overhead.report (loaded once a study ran)",
     [PY, "-c", "import hushmon.overhead.analysis, hushmon.overhead.report"]),
    ("hushmon bench --np 0 (refused)", [PY, "-m", "hushmon.cli", "bench", "--np", "0"]),
    ("hushmon top --stale-s -1 (refused)",
     [PY, "-m", "hushmon.cli", "top", "--url", "nats://127.0.0.1:1", "--stale-s", "-1"]),
    ("hushmon --help (imports every command)", [PY, "-m", "hushmon.cli", "--help"]),
]  # fmt: skip


def run_once(argv: list[str]) -> tuple[float, float]:
    """(CPU-s, wall s) of one run of argv, output dropped."""
    start_s = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _pid, _status, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped by wait4
    return usage.ru_utime + usage.ru_stime, time.monotonic() - start_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each case (default 5)")
    args = parser.parse_args()
    if args.rounds < 1:
        print("bench_cli_start: --rounds must be 1 or more", file=sys.stderr)
        return 2
    load_start = os.getloadavg()
    cpu: dict[str, list[float]] = {name: [] for name, _ in CASES}
    wall: dict[str, list[float]] = {name: [] for name, _ in CASES}
    for _ in range(args.rounds):
        for name, argv in CASES:
            c, w = run_once(argv)
            cpu[name].append(c)
            wall[name].append(w)
    load_end = os.getloadavg()
    print(f"{args.rounds} rounds, load {load_start[0]:.2f} -> {load_end[0]:.2f} (1-min), "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'median CPU-s':>12} {'wall s':>8}  case")
    for name, _ in CASES:
        print(f"{statistics.median(cpu[name]):12.3f} {statistics.median(wall[name]):8.3f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
