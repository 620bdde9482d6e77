"""How small an agent's load hushmon can detect, and how fast.

For each level (default 1, 0.3, 0.1, 0.01 %) it runs the full procedure of
``hushmon noise detect`` (clean and noisy runs in random order, sequential
stopping, alpha = 0.01) within a wall-time budget (default 300 s, the goal
of issue 3) and prints whether the level was detected and the total wall
time to the verdict. The A/A control runs the same procedure with the
injector idle (level 0) and replays the decision rule on every clean run
recorded, to measure the false-positive rate. On the same runs it also
applies the seed's criterion (noisy mean above the clean mean's 99 %
Student-t interval), the method users would otherwise use.

The seed (Khudoleeva & Stefanov 2021) reached 0.3 % with about ten runs of
7-9 minutes per configuration; the comparison is printed as ratios.

    .venv/bin/python bench/bench_noise_detect.py [--levels 1,0.3,0.1,0.01]
        [--budget 300] [--aa-budget 120] [--out DIR] [--nice N]

Long (up to levels x budget + aa-budget seconds): run it alone, in the
background, on a quiet machine.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.noise.launch import DetectorConfig, NoiseConfig
from hushmon.noise.procedure import detect_study
from hushmon.noise.sweep import aa_control

SEED_THRESHOLD_PCT = 0.3
SEED_WALL_S = 10 * 8 * 60  # about ten runs of 7-9 minutes per configuration


def _on_sigterm(signum: int, _frame: object) -> None:
    # unwinds like Ctrl-C, so every running child's process group is ended
    raise HushmonError("terminated", 128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,0.3,0.1,0.01")
    ap.add_argument("--budget", type=float, default=300.0, help="per level, s")
    ap.add_argument("--aa-budget", type=float, default=120.0, help="live A/A, s")
    ap.add_argument("--aa-replays", type=int, default=2000)
    ap.add_argument("--run-seconds", type=float, default=8.0)
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--nice", type=int, default=0)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="/tmp/hushmon-bench-noise")
    args = ap.parse_args()
    out = Path(args.out)
    levels = [float(x) for x in args.levels.split(",")]
    det = DetectorConfig(seconds=args.run_seconds, nice=args.nice)
    rows, dirs = [], []
    t_all = time.monotonic()
    for i, level in enumerate(levels):
        d = out / f"level-{level:g}"
        study = detect_study(d, det, NoiseConfig(level_pct=level), alpha=args.alpha,
                             budget_s=args.budget, seed=args.seed + i)  # fmt: skip
        dirs.append(d)
        v = study["verdict"]
        seed_crit = v["evidence"]["per_op_ns"].get("seed_criterion")
        rows.append((level, v, seed_crit))
        print(f"  level {level:g} %: {'detected' if v['detected'] else 'not detected'} "
              f"in {v['wall_seconds']:.0f} s", file=sys.stderr, flush=True)  # fmt: skip
    aa_dir = out / "level-0"
    aa_study = detect_study(aa_dir, det, NoiseConfig(level_pct=0.0), alpha=args.alpha,
                            budget_s=args.aa_budget, seed=args.seed + 99)  # fmt: skip
    dirs.append(aa_dir)
    aa = aa_control(dirs, min(levels), args.alpha, args.aa_replays, args.seed)
    total = time.monotonic() - t_all

    print(
        f"hushmon noise detection on this machine (alpha {args.alpha:g}, budget "
        f"{args.budget:g} s per level, {args.run_seconds:g} s runs, nice {args.nice})"
    )
    print(f"{'level %':>8} {'verdict':>13} {'wall s':>8} {'p-value':>9} {'runs c+n':>9} "
          f"{'measured %':>11} {'seed criterion':>15}")  # fmt: skip
    for level, v, seed_crit in rows:
        p = "n/a" if v["p_value"] is None else f"{v['p_value']:.2g}"
        crit = "n/a" if seed_crit is None else ("detected" if seed_crit else "not detected")
        print(f"{level:>8g} {'DETECTED' if v['detected'] else 'not detected':>13} "
              f"{v['wall_seconds']:>8.1f} {p:>9} "
              f"{v['runs']['clean']:>4}+{v['runs']['noisy']:<4} {v['effect']:>11.4f} "
              f"{crit:>15}")  # fmt: skip
    av = aa_study["verdict"]
    print(f"A/A live (level 0, {av['wall_seconds']:.0f} s): "
          f"{'FALSE DETECTION' if av['detected'] else 'not detected'}")  # fmt: skip
    fpr_ok = aa["trials"] > 0 and aa["rate"] <= args.alpha
    print(f"A/A replays: false-positive rate {aa['rate']:.4f} ({aa['detections']}/"
          f"{aa['trials']}, 95 % CI {aa['ci95'][0]:.4f}-{aa['ci95'][1]:.4f}) from "
          f"{aa['pool_clean_runs']} clean runs")  # fmt: skip
    detected = [(lv, v) for lv, v, _ in rows if v["detected"]]
    if detected and fpr_ok and not av["detected"]:
        lv, v = min(detected, key=lambda x: x[0])
        print(f"smallest level detected with FPR <= {args.alpha:g}: {lv:g} % "
              f"in {v['wall_seconds']:.0f} s")  # fmt: skip
        print(f"seed: {SEED_THRESHOLD_PCT:g} % in ~{SEED_WALL_S / 60:.0f} min per configuration"
              f" -> level ratio {SEED_THRESHOLD_PCT / lv:.1f}x smaller, wall-time ratio "
              f"{SEED_WALL_S / v['wall_seconds']:.0f}x shorter")  # fmt: skip
    else:
        print(f"smallest level detected with FPR <= {args.alpha:g}: none "
              f"(detected: {[lv for lv, _ in detected]}, FPR ok: {fpr_ok})")  # fmt: skip
    print(f"total bench wall time {total:.0f} s; raw data in {out}")
    jsonio.write_atomic(out / "bench.json", (
        {"levels": [{"level": lv, "verdict": {k: v[k] for k in v if k != "looks"},
                     "seed_criterion": sc} for lv, v, sc in rows],
         "aa_live": {k: av[k] for k in av if k != "looks"}, "aa_replays": aa,
         "total_wall_s": total}), indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HushmonError as exc:
        print(f"bench_noise_detect: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
