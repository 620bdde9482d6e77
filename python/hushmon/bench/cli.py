"""``hushmon bench``: run hushmon-bench under mpirun and report; or rebuild a report.

    hushmon bench [--np N] [--op LIST] [--size LIST] [--method M] [--timer T]
                  [--sync S] [--repeat N] [--out DIR] [--json FILE|-] [-- hushmon-bench args]
    hushmon bench --demo
    hushmon bench report RESULTS.json [--html FILE] [--json FILE|-]

Values of --op, --size, --timer and --sync are passed to hushmon-bench as they
are: the C program owns their meaning and their validation, so the two can
not drift apart.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from hushmon import jsonio
from hushmon.bench.results import load_run
from hushmon.bench.run import (
    PROVENANCE_FILE,
    REPORT_FILE,
    BenchRunner,
    default_out_dir,
)
from hushmon.errors import HushmonError

# The short sweep of ``--demo`` and ``make demo``: a few collectives of
# different shapes (one-to-all, all-to-all reduce, all-to-all, sync), both
# methods so the loop error shows, and the two timer checks.
DEMO_NPROCS = 2
# hushmon bench launches every rank on this machine (mpirun, oversubscribed
# past the cores): beyond this many per CPU the machine thrashes or runs out
# of processes, and the timings mean nothing.
MAX_RANKS_PER_CPU = 64
DEMO_OPS = "bcast,allreduce,alltoall,barrier,waitpatternup,waitpatternnull"
DEMO_SIZES = "1:64K:x2"
DEMO_METHOD = "both"
DEMO_TIMEOUT_S = 600.0

METHOD_ALIASES = {"both": ("sync", "loop")}


def expand_methods(text: str) -> str:
    """``both`` -> ``sync,loop``; other names go to the program unchanged."""
    names: list[str] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise HushmonError(f"--method: empty name in '{text}'")
        names.extend(METHOD_ALIASES.get(item, (item,)))
    return ",".join(dict.fromkeys(names))


def bench_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    out: list[str] = []
    for flag, value in (
        ("--op", args.op),
        ("--sizes", args.size),
        ("--timer", args.timer),
        ("--sync", args.sync),
    ):
        if value is not None:
            out += [flag, value]
    if args.method is not None:
        out += ["--method", expand_methods(args.method)]
    repeat = getattr(args, "repeat", None)
    if repeat is not None:
        if repeat < 1:
            raise HushmonError(f"--repeat must be at least 1, got {repeat}")
        out += ["--passes", str(repeat)]
    return out + extra


def _emit(args: argparse.Namespace, data: dict[str, Any], report_path: Path) -> None:
    """The report path for people; the summary as JSON for machines."""
    print(f"report: {report_path}", file=jsonio.human_stream(args.json))
    if args.json:
        jsonio.emit(args.json, data)


def _split_rest(rest: list[str]) -> tuple[str | None, list[str]]:
    """(subcommand, its args) or (None, extra args for hushmon-bench)."""
    if not rest:
        return None, []
    if rest[0] == "--":
        return None, rest[1:]
    if rest[0] == "report":
        return "report", rest[1:]
    raise HushmonError(
        f"bench: unexpected argument '{rest[0]}' "
        "(use 'hushmon bench report FILE', or put hushmon-bench options after --)"
    )


def _report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hushmon bench report",
        description="Rebuild the HTML report from a saved hushmon-bench --json file.",
    )
    parser.add_argument("results", type=Path, help="results.json written by hushmon-bench")
    parser.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="report to write (default: report.html next to RESULTS)",
    )
    parser.add_argument("--json", metavar="FILE|-", help="also write a summary as JSON")
    return parser


def _load_provenance(results: Path) -> dict[str, Any] | None:
    path = results.parent / PROVENANCE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise HushmonError(f"{path}: unreadable provenance: {exc}") from exc
    return data if isinstance(data, dict) else None


def run_report(argv: list[str]) -> int:
    args = _report_parser().parse_args(argv)
    run = load_run(args.results)
    html_path = args.html or args.results.parent / REPORT_FILE
    # matplotlib takes ~0.8 CPU-s to import: only once a report is written,
    # not for a refused start (bad flags, --np out of range)
    from hushmon.bench.report import summary, write_report

    report_path = write_report(run, html_path, _load_provenance(args.results))
    _emit(args, summary(run, report_path), report_path)
    return 0


def run_bench(args: argparse.Namespace, extra: list[str]) -> int:
    if args.demo:
        for name, value in (
            ("op", DEMO_OPS),
            ("size", DEMO_SIZES),
            ("method", DEMO_METHOD),
            ("np", DEMO_NPROCS),
            ("timeout", DEMO_TIMEOUT_S),
        ):
            if getattr(args, name) is None:
                setattr(args, name, value)
    nprocs = args.np if args.np is not None else DEMO_NPROCS
    most = MAX_RANKS_PER_CPU * (os.cpu_count() or 1)
    if not 1 <= nprocs <= most:
        raise HushmonError(
            f"--np must be 1 .. {most} ({MAX_RANKS_PER_CPU} per CPU of this machine, where "
            f"mpirun starts every rank), got {nprocs}; across nodes run hushmon-bench under srun"
        )
    if args.timeout is not None and args.timeout <= 0:
        raise HushmonError(f"--timeout must be positive, got {args.timeout:g}")
    out_dir = Path(args.out) if args.out else default_out_dir()
    runner = BenchRunner(
        nprocs=nprocs,
        bench_args=bench_args(args, extra),
        out_dir=out_dir,
        timeout_s=args.timeout,
    )
    run, provenance = runner.run()
    from hushmon.bench.report import summary, write_report  # matplotlib: see run_report

    report_path = write_report(run, out_dir / REPORT_FILE, provenance)
    data = summary(run, report_path)
    data["out_dir"] = str(out_dir)
    _emit(args, data, report_path)
    return 0


RUN_OPTIONS = (
    "np",
    "op",
    "size",
    "method",
    "timer",
    "sync",
    "out",
    "json",
    "timeout",
    "repeat",
)


def main(args: argparse.Namespace) -> int:
    subcommand, rest = _split_rest(args.rest)
    if subcommand == "report":
        given = [f"--{name}" for name in RUN_OPTIONS if getattr(args, name) is not None]
        if args.demo:
            given.append("--demo")
        if given:
            raise HushmonError(
                f"bench: {', '.join(given)} apply to a run, not to 'report' "
                "(options of report go after it: hushmon bench report FILE --html ... --json ...)"
            )
        return run_report(rest)
    return run_bench(args, rest)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="MPI collective timings with synchronized starts (hushmon-bench) and a report",
        description=(
            "Run build/bin/hushmon-bench under mpirun, keep its raw JSON and provenance in "
            "--out, and write a self-contained HTML report (time vs size with CI bars, "
            "loop vs synchronized, timer and clock checks). "
            "'hushmon bench report RESULTS.json' rebuilds a report without running."
        ),
        epilog=(
            "Options of hushmon-bench not listed here go after '--', e.g. "
            "hushmon bench --op bcast -- --root 1. See build/bin/hushmon-bench --help."
        ),
    )
    parser.add_argument(
        "--np", type=int, metavar="N", help=f"MPI processes (default {DEMO_NPROCS})"
    )
    parser.add_argument(
        "--op", metavar="LIST", help="operations, comma list (default: the program's)"
    )
    parser.add_argument(
        "--size",
        "--sizes",
        dest="size",
        metavar="LIST",
        help="message sizes, e.g. 1:64K:x2 or 0,8,1K",
    )
    parser.add_argument(
        "--method",
        metavar="M",
        help="sync, loop, loop_barrier, osu, imb or both (= sync,loop); a comma list",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="N independent passes over every point (hushmon-bench --passes): shuffled order, "
        "a fresh clock sync each; the report shows the median and the spread between passes",
    )
    parser.add_argument("--timer", metavar="NAME", help="timer of hushmon-bench (see its --help)")
    parser.add_argument(
        "--sync", metavar="ALGO", help="clock synchronization algorithm (see its --help)"
    )
    parser.add_argument(
        "--out", metavar="DIR", help="output directory (default: <data>/reports/bench-<UTC time>)"
    )
    parser.add_argument("--json", metavar="FILE|-", help="write a summary as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop the run after this many seconds (default: none)",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help=f"short sweep on {DEMO_NPROCS} ranks: {DEMO_OPS}, sizes {DEMO_SIZES}, both methods",
    )
    parser.add_argument(
        "rest",
        nargs=argparse.REMAINDER,
        metavar="[report RESULTS.json | -- ARGS]",
        help="'report RESULTS.json' to rebuild a report, or hushmon-bench options after --",
    )
    parser.set_defaults(func=main)
