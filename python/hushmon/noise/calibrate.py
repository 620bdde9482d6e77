"""``hushmon noise calibrate``: which detector configurations are
reproducible without noise on this system (the seed's first step, done there
by hand): clean runs of every (operation, size), the coefficient of
variation of the time per operation across runs, the detour rate, and the
spread of the folded statistic (what the detection test compares)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.noise.analysis import run_stats
from hushmon.noise.launch import DetectorConfig, NoiseConfig, one_run
from hushmon.progress import progress

CALIBRATE_FILE = "calibrate.json"


def calibrate(
    out: Path,
    *,
    ops: list[str],
    sizes: list[str],
    nprocs: int,
    runs: int,
    run_seconds: float,
    cv_max: float,
    nice: int = 0,
) -> dict[str, Any]:
    if runs < 2:
        raise HushmonError("--runs: at least 2 runs per configuration are needed for a CV")
    if nprocs < 2:
        raise HushmonError("--np: the detector needs at least 2 processes")
    out.mkdir(parents=True, exist_ok=True)
    noise = NoiseConfig(level_pct=0.0)
    configs = []
    combos = [(op.strip(), size.strip()) for op in ops for size in sizes]
    index = 0
    rng = np.random.default_rng()
    for op, size in progress(combos, desc="calibrate", total=len(combos)):
        det = replace(
            DetectorConfig(), op=op, size=size, nprocs=nprocs, seconds=run_seconds, nice=nice
        )
        sub = out / f"{op}-{size}"
        per_op, rates, folded = [], [], []
        for _ in range(runs):
            record = one_run(index, "clean", float(rng.uniform(0, 1)), det, noise, run_seconds, sub)
            index += 1
            s = run_stats(sub, record, 0.1, 1.0, True)
            per_op.append(s.per_op_ns)
            rates.append(s.detour_rate_per_s)
            folded.append(s.folded_score)
        a = np.asarray(per_op)
        cv = float(a.std(ddof=1) / a.mean()) if a.mean() > 0 else math.inf
        f = np.asarray([v for v in folded if math.isfinite(v)])
        spread = float(np.subtract(*np.percentile(f, [75, 25]))) if f.size else math.nan
        configs.append({
            "op": op, "size": size, "nprocs": nprocs, "runs": runs,
            "per_op_ns_mean": float(a.mean()), "per_op_ns": per_op, "cv": cv,
            "detour_rate_per_s": float(np.median(rates)),
            "folded_spread": spread,
            "reproducible": cv < cv_max,
        })  # fmt: skip
    good = [c for c in configs if c["reproducible"]]
    best = min(good or configs, key=lambda c: (c["folded_spread"], c["cv"]))
    result = {
        "kind": "calibrate",
        "cv_max": cv_max,
        "run_seconds": run_seconds,
        "configs": configs,
        "best": {"op": best["op"], "size": best["size"], "reproducible": best["reproducible"]},
    }
    jsonio.write_atomic(out / CALIBRATE_FILE, result, indent=1)
    return result
