"""``hushmon noise sweep``: the detection procedure at each level (the seed's
sensitivity test, Tables 3-6 and Fig. 5) and the A/A control."""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from hushmon import jsonio
from hushmon.noise.analysis import RunStats, run_stats
from hushmon.noise.decide import replay
from hushmon.noise.launch import DetectorConfig, NoiseConfig, RunRecord
from hushmon.noise.procedure import detect_study, load_study

SWEEP_FILE = "sweep.json"


def level_dir_name(level: float) -> str:
    return f"level-{level:g}".replace(".", "_")


def aa_control(
    study_dirs: list[Path], reference_level: float, alpha: float, replays: int, seed: int | None
) -> dict[str, Any]:
    """False-positive rate of the whole sequential rule on clean runs only.

    Every clean run of the sweep (each with its own random sham phase) is
    pooled; a replay draws runs in random order, gives them random arms
    (balanced, as the live procedure does) and applies the rule. The windows
    are those of reference_level (the smallest level tested)."""
    pool: list[RunStats] = []
    max_runs = 4
    for d in study_dirs:
        study = load_study(d)
        noise = study["config"]["noise"]
        max_runs = max(max_runs, int(study["config"]["max_runs"]))
        for run_dir in sorted((d / "runs").glob("*-clean")):
            record = RunRecord.load(run_dir)
            pool.append(
                run_stats(
                    d,
                    record,
                    reference_level,
                    noise["period_s"],
                    noise["noise_cmd"] is None or noise.get("noise_phase_s") is not None,
                )
            )
    rng = np.random.default_rng(seed)
    detections = 0
    trials = replays if len(pool) >= 4 else 0
    n = min(len(pool), max_runs)
    for _ in range(trials):
        chosen = [pool[i] for i in rng.permutation(len(pool))[:n]]
        arms = rng.permutation(["clean", "noisy"] * ((n + 1) // 2))[:n]
        relabelled = [
            RunStats(**{**s.as_dict(), "arm": str(a)}) for s, a in zip(chosen, arms, strict=True)
        ]
        if replay(relabelled, alpha, max_runs).detected:
            detections += 1
    rate = detections / trials if trials else math.nan
    if trials:
        ci = sps.binomtest(detections, trials).proportion_ci(0.95, method="exact")
        low, high = float(ci.low), float(ci.high)
    else:
        low = high = math.nan
    return {
        "trials": trials,
        "detections": detections,
        "rate": rate,
        "ci95": [low, high],
        "pool_clean_runs": len(pool),
        "runs_per_trial": n,
        "alpha": alpha,
        "reference_level": reference_level,
    }


def sweep(
    out: Path,
    detector: DetectorConfig,
    noises: list[NoiseConfig],
    *,
    alpha: float,
    budget_s: float,
    seed: int | None,
    aa_replays: int,
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    items = []
    dirs = []
    for i, noise in enumerate(noises):
        d = out / level_dir_name(noise.level_pct)
        study = detect_study(
            d, detector, noise, alpha=alpha, budget_s=budget_s,
            seed=None if seed is None else seed + i,
        )  # fmt: skip
        dirs.append(d)
        items.append({"level": noise.level_pct, "dir": d.name, "verdict": study["verdict"]})
    positive = [n.level_pct for n in noises if n.level_pct > 0]
    aa = aa_control(dirs, min(positive) if positive else 0.0, alpha, aa_replays, seed)
    detected = [it["level"] for it in items if it["verdict"]["detected"] and it["level"] > 0]
    result = {
        "kind": "sweep",
        "detector": asdict(detector),
        "alpha": alpha,
        "budget_s_per_level": budget_s,
        "levels": items,
        "aa": aa,
        "smallest_detected": min(detected) if detected else None,
        "wall_seconds": time.monotonic() - t0,
    }
    jsonio.write_atomic(out / SWEEP_FILE, result, indent=1)
    return result
