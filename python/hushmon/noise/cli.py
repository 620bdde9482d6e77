"""``hushmon noise``: calibrate, detect, sweep, report.

    hushmon noise calibrate [--ops barrier,alltoall,allreduce] [--sizes 2K,16K] [--np 2]
    hushmon noise detect (--level PCT | --noise-cmd CMD) [--budget S] [--alpha A] ...
    hushmon noise sweep --levels 1,0.7,0.5,0.3,0.1,0.05,0.01 [--budget S per level]
    hushmon noise report DIR

Every command keeps its raw data in --out DIR and writes DIR/report.html; the
verdict goes to stdout and, with --json FILE|-, as JSON (with --json -, stdout
holds the JSON alone and the verdict goes to stderr).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.noise.launch import DetectorConfig, NoiseConfig

REPORT_FILE = "report.html"
# A noise study wants the node to itself (as in an allocation); on a shared
# machine root can approximate that by raising the study above other work.
ROOT_NICE = -19


def _terminate_cleanly() -> None:
    """SIGTERM ends a study like Ctrl-C: the context managers of the running
    children end their process groups before the program exits."""

    def handler(signum: int, _frame: object) -> None:
        raise HushmonError("terminated", 128 + signum)

    signal.signal(signal.SIGTERM, handler)


def _out_dir(args: argparse.Namespace, kind: str) -> Path:
    if args.out:
        return Path(args.out)
    from hushmon.datadir import data_dir

    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return data_dir().reports(f"noise-{kind}-{stamp}")


def _levels(text: str) -> list[float]:
    out = []
    for item in text.split(","):
        try:
            v = float(item)
        except ValueError as exc:
            raise HushmonError(f"--levels: '{item}' is not a number") from exc
        if not math.isfinite(v) or v < 0 or v > 100:
            raise HushmonError(f"--levels: {item} is outside 0..100 (percent)")
        out.append(v)
    if not out:
        raise HushmonError("--levels: no levels given")
    return out


def _detector(args: argparse.Namespace) -> DetectorConfig:
    if args.np < 2:
        raise HushmonError("--np: the detector needs at least 2 processes")
    if args.run_seconds <= 0:
        raise HushmonError("--run-seconds must be positive")
    nice = _resolve_nice(args.nice)
    return DetectorConfig(
        op=args.op, size=args.size, count=args.count, seconds=args.run_seconds,
        nprocs=args.np, timer=args.timer, nice=nice,
    )  # fmt: skip


def _noise(args: argparse.Namespace, level: float) -> NoiseConfig:
    if args.period <= 0:
        raise HushmonError("--period must be positive")
    cpu = None if args.inject_cpu in ("none", "") else int(args.inject_cpu)
    return NoiseConfig(
        level_pct=level, period_s=args.period, shape=args.shape, cpu=cpu,
        noise_cmd=getattr(args, "noise_cmd", None),
        noise_phase_s=getattr(args, "noise_phase", None),
        window_s=getattr(args, "noise_window", None) if getattr(args, "noise_cmd", None) else None,
        warmup_s=getattr(args, "noise_warmup", 0.5),
    )  # fmt: skip


def _nice_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--nice",
        type=int,
        default=None,
        help="niceness of detector and injector alike (and of their sessions' autogroups); "
        f"< 0 shields the study from other load [{ROOT_NICE} as root, else 0]",
    )


def _resolve_nice(value: int | None) -> int:
    nice = value if value is not None else (ROOT_NICE if os.geteuid() == 0 else 0)
    if not -20 <= nice <= 19:
        raise HushmonError("--nice must be in -20..19")
    return nice


def _common(p: argparse.ArgumentParser) -> None:
    _nice_option(p)
    p.add_argument("--op", default="barrier", help="operation of hushmon-bench [barrier]")
    p.add_argument("--size", default="2K", help="message size [2K]")
    p.add_argument("--np", type=int, default=2, help="detector processes [2]")
    p.add_argument(
        "--count",
        type=int,
        default=None,
        help="fixed collectives per run (the seed); default: --run-seconds",
    )
    p.add_argument("--run-seconds", type=float, default=6.0, help="seconds per run [6]")
    p.add_argument("--timer", default="monotonic", help="detector timer [monotonic]")
    p.add_argument("--period", type=float, default=1.0, help="agent period, s [1]")
    p.add_argument("--shape", default="sum", help="injector load shape [sum]")
    p.add_argument("--inject-cpu", default="0", help="CPU of the injector, or 'none' [0]")
    p.add_argument("--alpha", type=float, default=0.01, help="false-positive rate [0.01]")
    p.add_argument("--seed", type=int, default=None, help="random order and phases")
    p.add_argument("--out", help="results directory [data dir/reports/noise-...]")
    p.add_argument("--json", metavar="FILE|-", help="verdict as JSON")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")  # fmt: skip


def cmd_detect(args: argparse.Namespace) -> int:
    _terminate_cleanly()
    from hushmon.noise.procedure import detect_study, validate_level
    from hushmon.noise.report import write_detect_report

    if args.noise_cmd is not None and args.level is not None:
        raise HushmonError("give either --level or --noise-cmd, not both")
    if args.noise_cmd is None and args.level is None:
        raise HushmonError("give --level PCT (the injector) or --noise-cmd 'CMD' (a real agent)")
    if args.noise_cmd is not None and not args.noise_cmd.strip():
        raise HushmonError("--noise-cmd is empty")
    if args.noise_phase is not None and (
        args.noise_cmd is None or not 0 <= args.noise_phase < args.period
    ):
        raise HushmonError("--noise-phase goes with --noise-cmd and lies in [0, --period)")
    if not 0 <= args.noise_warmup <= 60:
        raise HushmonError("--noise-warmup must be in 0..60 s")
    if not 0 < args.noise_window < args.period / 4:
        raise HushmonError("--noise-window must be positive and below a quarter of --period")
    level = 0.0 if args.level is None else args.level
    validate_level(level)
    detector, noise = _detector(args), _noise(args, level)
    noise, how = _trace_choice(args.trace, noise)
    out = _out_dir(args, "detect")
    study = detect_study(
        out, detector, noise, alpha=args.alpha, budget_s=args.budget, seed=args.seed
    )
    v = study["verdict"]
    if not args.no_report:
        write_detect_report(out, study, out / REPORT_FILE)
    human = jsonio.human_stream(args.json)
    _print_verdict(v, human)
    v["method_detail"] = how
    print(f"method: {v['method']} ({how})", file=human)
    print(
        f"results: {out}" + ("" if args.no_report else f"  report: {out / REPORT_FILE}"),
        file=human,
    )
    jsonio.emit(args.json, {k: v[k] for k in v if k != "looks"})
    return 0


def _trace_choice(mode: str, noise: NoiseConfig) -> tuple[NoiseConfig, str]:
    """Whether a noise command's windows come from the scheduler trace."""
    from dataclasses import replace

    from hushmon.noise.schedtrace import tracefs_root

    if noise.noise_cmd is None:
        return noise, "the injector's own schedule"
    if noise.noise_phase_s is not None:
        return noise, f"the given phase {noise.noise_phase_s:g} s"
    if mode == "off":
        return noise, "phase scan (--trace off)"
    root, why = tracefs_root()
    if root is None:
        if mode == "on":
            raise HushmonError(f"--trace on: {why}")
        return noise, f"phase scan: no scheduler trace here ({why})"
    return replace(noise, trace=True), f"sched_switch of its process tree, {why}"


def _print_verdict(v: dict[str, Any], human: TextIO) -> None:
    what = f"level {v['level']:g} %" if v.get("level") is not None else f"'{v['noise_cmd']}'"
    word = "DETECTED" if v["detected"] else "not detected"
    p = v["p_value"]
    p_text = "n/a" if p is None else f"{p:.3g}"
    print(
        f"noise {what}: {word} (p = {p_text}, alpha {v['alpha']:g}; "
        f"{v['runs']['clean']} clean + {v['runs']['noisy']} noisy runs), "
        f"effect {v['effect']:.4g} % of time, {v['wall_seconds']:.1f} s",
        file=human,
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    _terminate_cleanly()
    from hushmon.noise.report import write_sweep_report
    from hushmon.noise.sweep import sweep

    levels = _levels(args.levels)
    detector = _detector(args)
    out = _out_dir(args, "sweep")
    result = sweep(
        out, detector, [_noise(args, lv) for lv in levels], alpha=args.alpha,
        budget_s=args.budget, seed=args.seed, aa_replays=args.aa_replays,
    )  # fmt: skip
    if not args.no_report:
        write_sweep_report(out, result, out / REPORT_FILE)
    human = jsonio.human_stream(args.json)
    for item in result["levels"]:
        _print_verdict(item["verdict"], human)
    fpr = result["aa"]
    print(
        f"A/A false-positive rate: {fpr['rate']:.4f} ({fpr['detections']}/{fpr['trials']})",
        file=human,
    )
    print(f"smallest level detected: {result['smallest_detected']}", file=human)
    print(f"results: {out}", file=human)
    jsonio.emit(args.json, result)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    _terminate_cleanly()
    from hushmon.noise.calibrate import calibrate
    from hushmon.noise.report import write_calibrate_report

    out = _out_dir(args, "calibrate")
    result = calibrate(
        out, ops=args.ops.split(","), sizes=args.sizes.split(","), nprocs=args.np,
        runs=args.runs, run_seconds=args.run_seconds, cv_max=args.cv_max,
        nice=_resolve_nice(args.nice),
    )  # fmt: skip
    if not args.no_report:
        write_calibrate_report(out, result, out / REPORT_FILE)
    human = jsonio.human_stream(args.json)
    for c in result["configs"]:
        mark = "reproducible" if c["reproducible"] else "not reproducible"
        print(f"{c['op']:>12} {c['size']:>6}: CV {c['cv']:.4f}, detour rate "
              f"{c['detour_rate_per_s']:.1f}/s -> {mark}", file=human)  # fmt: skip
    best = result["best"]
    print(f"best: {best['op']} {best['size']}", file=human)
    print(f"results: {out}", file=human)
    jsonio.emit(args.json, result)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from hushmon.noise.report import rebuild

    path = rebuild(Path(args.dir), Path(args.html) if args.html else None)
    print(f"report: {path}", file=jsonio.human_stream(args.json))
    jsonio.emit(args.json, {"dir": args.dir, "report": path})
    return 0


def register(subparsers: Any) -> None:
    noise = subparsers.add_parser(
        "noise", help="measure how much a monitoring agent slows a job",
        description="Noise injection and detection (seed 000): calibrate, detect, sweep, report.",
    )  # fmt: skip
    sub = noise.add_subparsers(dest="noise_command", metavar="SUBCOMMAND")
    noise.set_defaults(func=lambda _a: (noise.print_help(), 2)[1])

    d = sub.add_parser("detect", help="is this noise detectable? (clean vs noisy runs)")
    d.add_argument("--level", type=float, default=None, help="injected load, percent 0..100")
    d.add_argument("--noise-cmd", default=None, help="a real agent's command line instead")
    d.add_argument(
        "--noise-phase",
        type=float,
        default=None,
        metavar="S",
        help="the agent wakes at this phase of the period on CLOCK_REALTIME "
        "(e.g. 0 for an agent aligned to wall-clock seconds); default: scan",
    )
    d.add_argument(
        "--noise-window",
        type=float,
        default=0.005,
        metavar="S",
        help="window after each activation of a --noise-cmd agent, s [0.005]",
    )
    d.add_argument(
        "--noise-warmup",
        type=float,
        default=0.5,
        metavar="S",
        help="seconds a --noise-cmd agent runs before the detector starts (its start-up) [0.5]",
    )
    d.add_argument(
        "--trace",
        choices=("auto", "on", "off"),
        default="auto",
        help="find when a --noise-cmd agent ran from the scheduler (tracefs sched_switch "
        "of its process tree) instead of scanning phases; auto: where tracing works [auto]",
    )
    d.add_argument("--budget", type=float, default=120.0, help="wall-time budget, s [120]")
    _common(d)
    d.set_defaults(func=cmd_detect)

    s = sub.add_parser("sweep", help="detection threshold over levels (the seed's Tables 3-6)")
    s.add_argument("--levels", default="1,0.7,0.5,0.3,0.1,0.05,0.01")
    s.add_argument("--budget", type=float, default=120.0, help="budget per level, s [120]")
    s.add_argument("--aa-replays", type=int, default=1000, help="A/A replays of clean runs")
    _common(s)
    s.set_defaults(func=cmd_sweep)

    c = sub.add_parser("calibrate", help="find reproducible detector configurations")
    c.add_argument("--ops", default="barrier,allreduce,alltoall")
    c.add_argument("--sizes", default="2K,16K")
    c.add_argument("--np", type=int, default=2)
    c.add_argument("--runs", type=int, default=5, help="clean runs per configuration [5]")
    c.add_argument("--run-seconds", type=float, default=2.0)
    c.add_argument("--cv-max", type=float, default=0.05, help="reproducible: CV below [0.05]")
    _nice_option(c)
    c.add_argument("--out")
    c.add_argument("--json", metavar="FILE|-")
    c.add_argument("--no-report", action="store_true")
    c.set_defaults(func=cmd_calibrate)

    r = sub.add_parser("report", help="rebuild the report of a results directory")
    r.add_argument("dir")
    r.add_argument("--html", help="where to write it [DIR/report.html]")
    r.add_argument("--json", metavar="FILE|-", help="where the report went, as JSON")
    r.set_defaults(func=cmd_report)
