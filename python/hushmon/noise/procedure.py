"""``hushmon noise detect``: clean and noisy runs in random order until the
decision is clear or the time budget is spent.

Everything a run produced stays in the study directory (runs/NNNN-ARM/ with
the detector's JSON and event file, the injector's log), and study.json holds
the configuration and the verdict, so ``hushmon noise report DIR`` rebuilds
the report without rerunning.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hushmon import jsonio
from hushmon.errors import HushmonError
from hushmon.noise.analysis import TEMPLATE_DIR, RunStats, run_stats
from hushmon.noise.decide import SequentialRule, evidence
from hushmon.noise.launch import (
    DetectorConfig,
    NoiseConfig,
    RunRecord,
    one_run,
    trace_agent_alone,
)
from hushmon.noise.schedtrace import TRACE_FILE, read_trace
from hushmon.progress import bar

STUDY_FILE = "study.json"
MIN_PLANNED_RUNS = 4


def validate_level(level: float) -> None:
    if not math.isfinite(level) or level < 0 or level > 100:
        raise HushmonError(f"--level {level:g}: the noise level is a percentage in 0..100")
    if 0 < level < 0.001:
        raise HushmonError(f"--level {level:g}: the smallest level is 0.001 %")


def detect_study(
    study_dir: Path,
    detector: DetectorConfig,
    noise: NoiseConfig,
    *,
    alpha: float = 0.01,
    budget_s: float = 120.0,
    seed: int | None = None,
) -> dict[str, Any]:
    validate_level(noise.level_pct)
    if not 0 < alpha < 1:
        raise HushmonError(f"--alpha {alpha:g}: must be between 0 and 1")
    run_seconds = detector.seconds
    if budget_s <= 0 or run_seconds <= 0:
        raise HushmonError("--budget and --run-seconds must be positive")
    study_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    t_start = time.monotonic()
    # mpirun start-up, clock sync and warm-up cost about this much per run
    # on a small machine; the plan only sets how alpha is spread.
    est_run_s = run_seconds + 0.8
    max_runs = max(MIN_PLANNED_RUNS, int(budget_s // est_run_s))
    arms = list(rng.permutation(["clean", "noisy"] * ((max_runs + 1) // 2))[:max_runs])
    rule = SequentialRule(alpha, max_runs)
    template = None
    if noise.method == "sched_trace":
        # the agent alone first: the clean runs' sham windows copy its bursts
        path = trace_agent_alone(noise, study_dir / TEMPLATE_DIR, run_seconds, detector.nice)
        template = read_trace(path)
        if template.slices.size == 0:
            raise HushmonError(
                f"the scheduler trace saw '{noise.noise_cmd}' never run in "
                f"{run_seconds:g} s alone: is it a daemon that left its process tree "
                "(run it in the foreground)?"
            )
    stats: list[RunStats] = []
    walls: list[float] = []
    with bar(f"noise {noise_label(noise)}", total=budget_s, unit="s") as progress:
        for i, arm in enumerate(arms):
            elapsed = time.monotonic() - t_start
            if i > 0 and elapsed + float(np.median(walls)) > budget_s:
                break
            phase_s = (
                noise.noise_phase_s
                if noise.noise_phase_s is not None
                else float(rng.uniform(0, noise.period_s))
            )
            record = one_run(i, str(arm), phase_s, detector, noise, run_seconds, study_dir)
            walls.append(record.wall_s)
            s = run_stats(
                study_dir, record, noise.level_pct, noise.period_s, noise.known_phase,
                window_s=noise.window_s, template=template,
            )  # fmt: skip
            stats.append(s)
            progress.update(min(budget_s, time.monotonic() - t_start) - progress.n)
            if rule.add(s):
                break
    decision = rule.finish()
    wall = time.monotonic() - t_start
    study = {
        "kind": "detect",
        "created_unix": time.time() - wall,
        "config": {
            "detector": asdict(detector),
            "noise": asdict(noise),
            "alpha": alpha,
            "budget_s": budget_s,
            "max_runs": max_runs,
            "seed": seed,
        },
        "verdict": verdict(decision, stats, noise, wall, max_runs),
        "runs": [s.as_dict() for s in stats],
    }
    write_study(study_dir, study)
    return study


def noise_label(noise: NoiseConfig) -> str:
    return f"cmd '{noise.noise_cmd}'" if noise.noise_cmd else f"{noise.level_pct:g} %"


def verdict(
    decision: Any, stats: list[RunStats], noise: NoiseConfig, wall_s: float, max_runs: int
) -> dict[str, Any]:
    ev = evidence(stats, noise.period_s)
    return {
        "detected": decision.detected,
        "level": noise.level_pct if noise.noise_cmd is None else None,
        "noise_cmd": noise.noise_cmd,
        "p_value": decision.p_value,
        "effect": ev["measured_load_pct"],
        "effect_unit": "added delay in % of time (Hodges-Lehmann shift of the folded excess)",
        "method": noise.method,
        "agent_cpu_pct": ev.get("agent_cpu_pct"),
        "lost_trace_events": sum(s.lost_trace_events for s in stats),
        "unmatched_trace_slices": sum(s.unmatched_trace_slices for s in stats),
        "wall_seconds": wall_s,
        "alpha": decision.alpha,
        "level_tested": decision.level_tested,
        "alpha_spent": decision.alpha_spent,
        "decided_at_run": decision.decided_at_run,
        "runs": {
            "clean": sum(1 for s in stats if s.arm == "clean"),
            "noisy": sum(1 for s in stats if s.arm == "noisy"),
            "planned": max_runs,
        },
        "looks": decision.looks,
        "evidence": ev,
    }


def write_study(study_dir: Path, study: dict[str, Any]) -> Path:
    return jsonio.write_atomic(study_dir / STUDY_FILE, study, indent=1)


def load_study(study_dir: Path) -> dict[str, Any]:
    path = study_dir / STUDY_FILE
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise HushmonError(f"{study_dir} holds no {STUDY_FILE}: not a noise study") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise HushmonError(f"cannot read {path}: {exc}") from exc
    return data


def recompute(study_dir: Path, study: dict[str, Any]) -> list[RunStats]:
    """Per-run statistics again from the raw files of every run."""
    noise = study["config"]["noise"]
    known = noise.get("noise_cmd") is None or noise.get("noise_phase_s") is not None
    template = None
    if not known and noise.get("trace"):
        template = read_trace(study_dir / TEMPLATE_DIR / TRACE_FILE)
    out = []
    for run_dir in sorted((study_dir / "runs").glob("*-*")):
        if not (run_dir / "run.json").is_file():
            continue
        record = RunRecord.load(run_dir)
        out.append(
            run_stats(
                study_dir, record, noise["level_pct"], noise["period_s"], known,
                window_s=noise.get("window_s"), template=template,
            )
        )  # fmt: skip
    return out
