"""Figures of hushmon-bench on this machine: how accurate, how fast, how far
the loop method (what IMB and OSU do) is from the synchronized one.

Prints, for N ranks (default 2):

1. Timer and schedule check for each clock-sync algorithm: WaitPatternUp
   (true time n us) and WaitPatternNull (true time 0) measured by the local
   time (max over ranks) and the global time (synchronized clock), their
   error against the true value, and the residual clock offset after sync
   and at the end of the run (drift).
2. Wall time of a sweep of ALL operations over 8 message sizes with the
   synchronized method, next to the same sweep with the loop method, as a
   ratio (what the accuracy costs in time).
3. Bcast per message size: synchronized mean vs the loop and loop+barrier
   means, as ratios (the loop method's systematic error), median and range
   over the repeats.

Not a test: nothing is asserted; the figures go to docs/bench-results.md.

    .venv/bin/python bench/bench_hushmon_bench.py [--np 2] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.bench.checks import TRUE_TIME_S, loop_vs_sync
from hushmon.bench.plots import format_bytes
from hushmon.bench.results import BenchRun
from hushmon.bench.run import BenchRunner
from hushmon.errors import HushmonError

US = 1e6
SYNC_ALGORITHMS = ("linear", "ring", "tree")
SWEEP_SIZES = "1:16K:x4"  # 1, 4, 16, 64, 256, 1K, 4K, 16K: 8 sizes
BCAST_SIZES = SWEEP_SIZES


def load_text() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


def run_bench(nprocs: int, args: Sequence[str], work: Path, label: str) -> tuple[BenchRun, float]:
    runner = BenchRunner(
        nprocs=nprocs, bench_args=[*args, "--quiet"], out_dir=work / label, timeout_s=1800
    )
    run, provenance = runner.run()
    return run, float(provenance["wall_time_s"])


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:.{digits}f}"


def pct(measured: float | None, true: float) -> str:
    if measured is None or true == 0.0:
        return "-"
    return f"{(measured - true) / true:+.1%}"


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def us_text(seconds: float | None) -> str:
    return fmt(None if seconds is None else seconds * US)


def error_text(measured: float | None, true: float) -> str:
    """Relative error for a pattern with a true time, the time itself (us) for the null one."""
    return pct(measured, true) if true else us_text(measured)


def timer_check(nprocs: int, repeats: int, timer: str, work: Path) -> list[dict[str, Any]]:
    figures = []
    for algo in SYNC_ALGORITHMS:
        for rep in range(repeats):
            args = ["--op", "waitpatternup,waitpatternnull", "--method", "sync"]
            args += ["--timer", timer, "--sync", algo]
            run, _ = run_bench(nprocs, args, work, f"timer-{algo}-{rep}")
            for r in run.results:
                figures.append(
                    {
                        "sync": algo,
                        "repeat": rep,
                        "op": r.op,
                        "true_s": TRUE_TIME_S[r.op](r.nprocs),
                        "mean_s": r.mean,
                        "global_mean_s": r.global_mean,
                        "offset_residual_s": run.meta.clock_offset_residual_max_s,
                        "offset_residual_end_s": run.meta.clock_offset_residual_end_max_s,
                        "drift_s": run.meta.clock_drift_max_s,
                    }
                )
    print_table(
        f"1. Timer and schedule check: {nprocs} ranks, timer {timer} "
        "(err: relative for Up, the time itself in us for Null, whose true time is 0)",
        [
            "sync",
            "run",
            "op",
            "true us",
            "local us",
            "local err",
            "global us",
            "global err",
            "offset us",
            "offset end us",
            "drift us",
        ],
        [
            [
                f["sync"],
                str(f["repeat"]),
                f["op"],
                us_text(f["true_s"]),
                us_text(f["mean_s"]),
                error_text(f["mean_s"], f["true_s"]),
                us_text(f["global_mean_s"]),
                error_text(f["global_mean_s"], f["true_s"]),
                us_text(f["offset_residual_s"]),
                us_text(f["offset_residual_end_s"]),
                us_text(f["drift_s"]),
            ]
            for f in figures
        ],
    )
    summary_rows = []
    for algo in SYNC_ALGORITHMS:
        for op in ("waitpatternup", "waitpatternnull"):
            runs = [f for f in figures if f["sync"] == algo and f["op"] == op]
            if not runs:
                continue
            true = runs[0]["true_s"]
            local = statistics.median(f["mean_s"] for f in runs)
            glob = [f["global_mean_s"] for f in runs if f["global_mean_s"] is not None]
            global_median = statistics.median(glob) if glob else None
            offsets = [f["offset_residual_s"] for f in runs if f["offset_residual_s"] is not None]
            summary_rows.append(
                [
                    algo,
                    op,
                    error_text(local, true),
                    error_text(global_median, true),
                    us_text(statistics.median(offsets) if offsets else None),
                ]
            )
    print_table(
        f"   median of {repeats} runs",
        ["sync", "op", "local err", "global err", "offset us"],
        summary_rows,
    )
    return figures


def sweep_time(nprocs: int, timer: str, work: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {"sizes": SWEEP_SIZES}
    for method in ("sync", "loop"):
        run, wall_s = run_bench(
            nprocs,
            ["--op", "all", "--sizes", SWEEP_SIZES, "--method", method, "--timer", timer],
            work,
            f"sweep-{method}",
        )
        figures[method] = {"wall_s": wall_s, "results": len(run.results), "ops": len(run.ops())}
    ratio = figures["sync"]["wall_s"] / figures["loop"]["wall_s"]
    figures["sync_over_loop"] = ratio
    print_table(
        f"2. Sweep of all operations over 8 sizes ({SWEEP_SIZES}), {nprocs} ranks",
        ["method", "ops", "results", "wall time s"],
        [
            [m, str(figures[m]["ops"]), str(figures[m]["results"]), fmt(figures[m]["wall_s"], 1)]
            for m in ("sync", "loop")
        ],
    )
    print(f"   synchronized / loop wall time: {ratio:.2f}x")
    return figures


def bcast_loop_vs_sync(nprocs: int, repeats: int, timer: str, work: Path) -> list[dict[str, Any]]:
    per_key: dict[tuple[int, str], list[tuple[float, float, float]]] = {}
    for rep in range(repeats):
        run, _ = run_bench(
            nprocs,
            [
                "--op",
                "bcast",
                "--sizes",
                BCAST_SIZES,
                "--method",
                "sync,loop,loop_barrier",
                "--timer",
                timer,
            ],
            work,
            f"bcast-{rep}",
        )
        for pair in loop_vs_sync(run):
            per_key.setdefault((pair.size, pair.loop_method), []).append(
                (pair.sync.mean, pair.loop.mean, pair.ratio)
            )
    figures = []
    for (size, method), values in sorted(per_key.items()):
        ratios = [v[2] for v in values]
        figures.append(
            {
                "size": size,
                "loop_method": method,
                "sync_mean_s": statistics.median(v[0] for v in values),
                "loop_mean_s": statistics.median(v[1] for v in values),
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        )
    print_table(
        f"3. Bcast, loop vs synchronized, {nprocs} ranks, median of {repeats} runs "
        "(ratio = loop mean / synchronized mean)",
        ["size B", "loop method", "sync us", "loop us", "ratio", "ratio range"],
        [
            [
                format_bytes(f["size"]),
                f["loop_method"],
                fmt(f["sync_mean_s"] * US),
                fmt(f["loop_mean_s"] * US),
                f"{f['ratio_median']:.2f}",
                f"{f['ratio_min']:.2f}-{f['ratio_max']:.2f}",
            ]
            for f in figures
        ],
    )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--np", type=int, default=2, help="MPI processes (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration")
    parser.add_argument("--timer", default="monotonic", help="hushmon-bench --timer")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    parser.add_argument("--keep", type=Path, help="keep every run's output under this folder")
    args = parser.parse_args(argv)
    if args.np < 1 or args.repeats < 1:
        parser.error("--np and --repeats must be at least 1")
    print(
        f"hushmon-bench figures: {args.np} ranks on {socket.gethostname()}, "
        f"{os.cpu_count()} CPUs, load average {load_text()} at the start"
    )
    try:
        with tempfile.TemporaryDirectory(prefix="hushmon-bench-figures-") as tmp:
            work = args.keep or Path(tmp)
            figures = {
                "nprocs": args.np,
                "timer": args.timer,
                "cpus": os.cpu_count(),
                "load_start": os.getloadavg(),
                "timer_check": timer_check(args.np, args.repeats, args.timer, work),
                "sweep": sweep_time(args.np, args.timer, work),
                "bcast": bcast_loop_vs_sync(args.np, args.repeats, args.timer, work),
                "load_end": os.getloadavg(),
            }
    except HushmonError as exc:
        print(f"bench_hushmon_bench: {exc}", file=sys.stderr)
        return exc.exit_code
    print(
        f"\nload average {load_text()} at the end (a load above the CPU count means other "
        "processes competed with the ranks: synchronized times then grow)"
    )
    if args.json:
        jsonio.write_atomic(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
