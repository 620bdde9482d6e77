"""``hushmon overhead``: the command line of the overhead study."""

from __future__ import annotations

import argparse
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

DEFAULT_CONFIG = "1-2-S"
REPORT_FILE = "report.html"


def _positive(kind: type, what: str) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}: not a number: {text!r}") from None
        if not value > 0 or value != value:
            raise argparse.ArgumentTypeError(f"{what}: must be positive, got {text}")
        return value

    return parse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "overhead",
        help="what monitoring costs NPB-like kernels: %% slowdown per mode (seed 003)",
        description=(
            "Runs NPB-like kernels (c/apps: ep cg mg ft is lu) in configurations "
            "NODES-PPN-CLASS, N times each in randomized interleaved order, without "
            "monitoring and with each monitoring agent, and prints the %% slowdown per "
            "kernel x configuration x mode with intervals; anomalous runs are detected "
            "and reported. See docs/overhead.md."
        ),
    )
    parser.add_argument("--kernels", default="ep,cg,is", metavar="LIST",
                        help="comma list of kernels (default ep,cg,is)")  # fmt: skip
    parser.add_argument(
        "--config", action="append", metavar="N-P-C",
        help=f"NODES-PPN-CLASS, repeatable (default {DEFAULT_CONFIG}); one node for now",
    )  # fmt: skip
    parser.add_argument("--runs", type=_positive(int, "--runs"), default=10, metavar="N",
                        help="runs per kernel x configuration x mode (default 10)")  # fmt: skip
    parser.add_argument(
        "--modes", default="none,hushmon", metavar="LIST",
        help="comma list, must include none (default none,hushmon); known: none, hushmon, "
        "hushmon_pmu, node_exporter, collectd, pcp",
    )  # fmt: skip
    parser.add_argument("--period-s", type=_positive(float, "--period-s"), default=1.0,
                        metavar="S", help="the agents' sampling period (default 1)")  # fmt: skip
    parser.add_argument(
        "--settle-s", type=float, default=1.0, metavar="S",
        help="wait after an agent starts before its first run (default 1)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="seed of the run order (default 1)")
    parser.add_argument("--level", type=float, default=0.95,
                        help="confidence level of the intervals (default 0.95)")  # fmt: skip
    parser.add_argument(
        "--out", metavar="DIR", help="output folder (default <data>/reports/overhead-<UTC time>)"
    )
    parser.add_argument("--json", metavar="FILE|-", help="write the results as JSON")
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from hushmon import jsonio
    from hushmon.datadir import data_dir
    from hushmon.overhead.execute import execute, stderr_ticker
    from hushmon.overhead.modes import BASELINE, MODES, get
    from hushmon.overhead.plan import plan
    from hushmon.overhead.spec import KERNELS, parse_config, parse_list
    from hushmon.paths import program

    kernels = parse_list(args.kernels, list(KERNELS), "--kernels")
    modes = parse_list(args.modes, list(MODES), "--modes")
    if BASELINE not in modes:
        raise HushmonError(f"--modes: must include {BASELINE} (the baseline)")
    configs = [parse_config(c) for c in (args.config or [DEFAULT_CONFIG])]
    if len(set(configs)) != len(configs):
        raise HushmonError("--config: the same configuration is given twice")
    if not 0.5 <= args.level < 1.0:
        raise HushmonError(f"--level must be in [0.5, 1), got {args.level:g}")
    if not 0.0 <= args.settle_s <= 60.0:
        raise HushmonError(f"--settle-s must be 0 .. 60, got {args.settle_s:g}")
    for k in kernels:
        program(k)  # built? (one line, exit 2, before anything starts)
    for m in modes:
        why = get(m).missing()
        if why:
            raise HushmonError(f"--modes {m}: {why}")

    human = jsonio.human_stream(args.json)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else data_dir().root / "reports" / f"overhead-{stamp}"
    work = out / "runs"
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HushmonError(f"--out: cannot create {work}: {exc.strerror}") from exc

    schedule = plan(kernels, configs, modes, args.runs, args.seed)
    load_start = os.getloadavg()
    t0 = time.monotonic()
    print(
        f"hushmon overhead: {len(schedule)} runs ({len(kernels)} kernels x {len(configs)} "
        f"configurations x {len(modes)} modes x {args.runs}), load {load_start[0]:.2f}",
        file=human,
        flush=True,
    )
    results, usage = execute(
        schedule, work, args.period_s, args.settle_s, stderr_ticker(len(schedule))
    )
    wall_s = time.monotonic() - t0
    load_end = os.getloadavg()
    # SciPy and the report's plotting take about 2 CPU-s to import: only a
    # study that ran gets them, not an argument error
    from hushmon.overhead.analysis import analyse, text_table
    from hushmon.overhead.report import write_report

    config_names = [str(c) for c in configs]
    analysis = analyse(results, kernels, config_names, modes, args.level, args.seed)
    notes = []
    if "hushmon_pmu" in modes:
        from hushmon.overhead.modes.hushmon_pmu import backend

        if backend() == "sim":
            notes.append(
                "hushmon_pmu ran on the simulated PMU (this machine has none): only the "
                "agent's own work is measured, not the cost of counting in the CPU."
            )
    notes += [
        note
        for u in usage.values()
        if u.mode != BASELINE and (note := u.too_short_note(args.period_s))
    ]
    notes.append(
        f"Load average (1, 5, 15 min): {load_start[0]:.2f} {load_start[1]:.2f} "
        f"{load_start[2]:.2f} at start, {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} "
        "at end; other programs on this machine are not controlled by the study."
    )
    doc: dict[str, Any] = {
        "tool": "hushmon overhead",
        "settings": {
            "kernels": kernels, "configs": config_names, "modes": modes,
            "mode_descriptions": {m: get(m).description for m in modes},
            "runs": args.runs, "period_s": args.period_s, "settle_s": args.settle_s,
            "seed": args.seed,
        },
        "environment": {
            "host": socket.gethostname(), "cpus": os.cpu_count(),
            "load_start": [round(x, 2) for x in load_start],
            "load_end": [round(x, 2) for x in load_end],
            "started": stamp, "wall_s": wall_s,
        },
        "analysis": analysis,
        "agent_usage": [
            {"mode": u.mode, "starts": u.starts, "up_s": u.up_s, "cpu_s": u.cpu_s,
             "cpu_pct": u.cpu_pct}
            for u in usage.values() if u.mode != BASELINE
        ],
        "runs": results,
        "notes": notes,
    }  # fmt: skip
    slowdowns = analysis["slowdowns"]
    assert isinstance(slowdowns, list)
    report = write_report(out / REPORT_FILE, jsonio.plain(doc), slowdowns)
    doc["report"] = str(report)
    jsonio.write_atomic(out / "overhead.json", doc)
    print(text_table(analysis), file=human)
    anomalies = analysis["anomalies"]
    assert isinstance(anomalies, list)
    for u in doc["agent_usage"]:
        print(
            f"{u['mode']}: {u['cpu_pct']:.3f} % of one CPU ({u['cpu_s']:.2f} CPU s in "
            f"{u['up_s']:.0f} s up, {u['starts']} starts)",
            file=human,
        )
    print(f"anomalous runs: {len(anomalies)} (listed in the report and the JSON)", file=human)
    for a in anomalies:
        print(
            f"  run {a['index']} {a['kernel']} {a['config']} {a['mode']}: {a['time_s']:.3f} s "
            f"vs median {a['cell_median_s']:.3f} s (z {a['modified_z']:+.1f})",
            file=human,
        )
    for note in notes:
        print(note, file=human)
    print(f"report: {report}", file=human)
    jsonio.emit(args.json, doc)
    failed = analysis["failed_runs"]
    assert isinstance(failed, list)
    if failed:
        for f in failed:
            print(f"hushmon overhead: run {f['index']} {f['kernel']} {f['config']} "
                  f"{f['mode']} failed: {f['error']}", file=human)  # fmt: skip
        return 1
    return 0
