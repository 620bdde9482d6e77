"""Run-to-run spread of hushmon-bench's default synchronized method against
the OSU 7.x procedure (hushmon-bench --method osu stands in for OSU), in
interleaved rounds at (about) equal wall time.

Each round runs both procedures once each, in alternating order, as two
separate mpirun launches (a whole run is what a user repeats). For every
operation and size it prints, over the rounds, the median of each
procedure's figure (sync: its reported value, the median over passes when
the defaults use several; osu: OSU's Avg Latency), the spread
(max - min) / median of each, and the ratio of the medians; then the
median spread over all points at <= 512 B, the goal being sync <= osu.

Equal wall time: by default the synchronized method runs with the
program's defaults and the script reports both wall times; with
--match-wall the script sets the synchronized --budget-ms each round so
that its run takes as long as the osu run of the same round did.

Not a test: nothing is asserted; figures go to docs/bench-results.md.

    .venv/bin/python bench/bench_bench_repeat.py [--np 2] [--rounds 10]
        [--ops LIST] [--sizes LIST] [--sync-args "--passes 3"] [--match-wall] [--json FILE]
"""

from __future__ import annotations

import argparse
import math
import os
import shlex
import socket
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.bench.plots import format_bytes
from hushmon.bench.results import BenchRun
from hushmon.bench.run import BenchRunner
from hushmon.errors import HushmonError

OPS = "bcast,reduce,allreduce,allgather,alltoall,gather"
SIZES = "1:256K:x4"
SMALL_BYTES = 512


def load_text() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(nprocs: int, args: list[str], out: Path) -> tuple[BenchRun, float]:
    runner = BenchRunner(nprocs=nprocs, bench_args=[*args, "--quiet"], out_dir=out, timeout_s=1800)
    run, provenance = runner.run()
    return run, float(provenance["wall_time_s"])


def figures(run: BenchRun) -> dict[tuple[str, int], float]:
    """One value per (op, size): the median over passes when there are points."""
    if run.points:
        return {(p.op, p.size): p.median for p in run.points}
    return {(r.op, r.size): r.mean for r in run.results}


def spread(values: list[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    if len(vals) < 2:
        return math.nan
    med = statistics.median(vals)
    return (max(vals) - min(vals)) / med if med > 0 else math.nan


def run_factors(per_point: dict[tuple[str, int], list[float]]) -> list[float]:
    """Per round, the median over points of the round's value over the point's median."""
    rounds = max((len(v) for v in per_point.values()), default=0)
    out = []
    for rnd in range(rounds):
        ratios = []
        for vals in per_point.values():
            clean = [v for v in vals if not math.isnan(v)]
            if rnd < len(vals) and not math.isnan(vals[rnd]) and clean:
                ratios.append(vals[rnd] / statistics.median(clean))
        out.append(statistics.median(ratios) if ratios else math.nan)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--ops", default=OPS)
    parser.add_argument("--sizes", default=SIZES)
    parser.add_argument("--sync-args", default="", help="extra hushmon-bench args for sync")
    parser.add_argument("--match-wall", action="store_true")
    parser.add_argument("--json", metavar="FILE|-")
    args = parser.parse_args(argv)
    common = ["--op", args.ops, "--sizes", args.sizes]
    sync_extra = shlex.split(args.sync_args)
    values: dict[str, dict[tuple[str, int], list[float]]] = {"sync": {}, "osu": {}}
    walls: dict[str, list[float]] = {"sync": [], "osu": []}
    loads: list[str] = []
    budget_ms: float | None = None
    print(f"host {socket.gethostname()}, {args.np} ranks, {args.rounds} rounds, load {load_text()}")
    with tempfile.TemporaryDirectory(prefix="bench-repeat-") as tmp:
        for rnd in range(args.rounds):
            order = ["osu", "sync"] if rnd % 2 == 0 else ["sync", "osu"]
            loads.append(load_text())
            for method in order:
                extra = ["--method", "osu"] if method == "osu" else list(sync_extra)
                if method == "sync" and args.match_wall and budget_ms is not None:
                    extra += ["--budget-ms", f"{budget_ms:.3f}"]
                try:
                    run, wall = run_once(args.np, [*common, *extra], Path(tmp) / f"{rnd}-{method}")
                except HushmonError as exc:
                    print(f"round {rnd} {method}: {exc}", file=sys.stderr)
                    return 1
                walls[method].append(wall)
                for key, value in figures(run).items():
                    values[method].setdefault(key, []).append(value)
                if method == "osu" and args.match_wall:
                    # Budget per point and pass so that sync takes this long too.
                    npoints = len(figures(run))
                    passes = int(run.meta.params.get("passes", 1) or 1)
                    passes = max(passes, _passes_in(sync_extra))
                    budget_ms = max(0.0, 0.8 * wall * 1e3 / (npoints * passes))
            print(
                f"round {rnd}: osu {walls['osu'][-1]:.2f} s, sync {walls['sync'][-1]:.2f} s, "
                f"load {loads[-1]}",
                file=sys.stderr,
            )
    factors = {m: run_factors(values[m]) for m in ("sync", "osu")}
    for method in ("sync", "osu"):
        # A shift of a whole run (every point slower) against spread point by point.
        print(f"{method} run factors (median over points of value / the point's median): "
              + " ".join(f"{f:.2f}" for f in factors[method]))  # fmt: skip
    rows: list[dict[str, Any]] = []
    print(f"\n{'op':<10} {'size':>6} {'sync_med_us':>11} {'sync_spread%':>12} "
          f"{'osu_med_us':>10} {'osu_spread%':>11} {'osu/sync':>8}")  # fmt: skip
    for key in values["osu"]:
        s_vals, o_vals = values["sync"].get(key, []), values["osu"][key]
        s_med = statistics.median([v for v in s_vals if not math.isnan(v)] or [math.nan])
        o_med = statistics.median([v for v in o_vals if not math.isnan(v)] or [math.nan])
        s_spread, o_spread = spread(s_vals), spread(o_vals)
        ratio = o_med / s_med if s_med and not math.isnan(s_med) else math.nan
        row: dict[str, Any] = {
            "op": key[0], "size": key[1], "sync_median_s": s_med, "sync_spread": s_spread,
            "osu_median_s": o_med, "osu_spread": o_spread, "ratio": ratio,
        }  # fmt: skip
        rows.append(row)
        print(f"{key[0]:<10} {format_bytes(key[1]):>6} {s_med * 1e6:11.3f} "
              f"{s_spread * 100:12.1f} {o_med * 1e6:10.3f} "
              f"{o_spread * 100:11.1f} {ratio:8.2f}")  # fmt: skip
    small = [r for r in rows if r["size"] <= SMALL_BYTES]
    med_sync = statistics.median(
        [r["sync_spread"] for r in small if not math.isnan(r["sync_spread"])] or [math.nan]
    )
    med_osu = statistics.median(
        [r["osu_spread"] for r in small if not math.isnan(r["osu_spread"])] or [math.nan]
    )
    print(f"\nmedian spread at <= {SMALL_BYTES} B over {len(small)} points: "
          f"sync {med_sync:.1%}, osu {med_osu:.1%} "
          f"({'goal met' if med_sync <= med_osu else 'goal NOT met'}: sync <= osu)")  # fmt: skip
    sync_args = args.sync_args or "(defaults)"
    print(f"wall time per run, median: sync {statistics.median(walls['sync']):.2f} s, "
          f"osu {statistics.median(walls['osu']):.2f} s; sync args: {sync_args}"
          f"{' + matched --budget-ms' if args.match_wall else ''}")  # fmt: skip
    if args.json:
        small_spread = {"sync": med_sync, "osu": med_osu}
        per_round = {m: [{"op": k[0], "size": k[1], "values_s": v} for k, v in values[m].items()]
                     for m in ("sync", "osu")}  # fmt: skip
        jsonio.emit(args.json, {"rows": rows, "walls": walls, "loads": loads,
                                "per_round": per_round, "run_factors": factors,
                                "small_median_spread": small_spread, "sync_args": args.sync_args,
                                "match_wall": args.match_wall})  # fmt: skip
    return 0


def _passes_in(extra: list[str]) -> int:
    if "--passes" in extra:
        i = extra.index("--passes")
        if i + 1 < len(extra) and extra[i + 1].isdigit():
            return int(extra[i + 1])
    return 1


if __name__ == "__main__":
    sys.exit(main())
