"""Compare runs of one program at several sizes: which factor's influence
grows as the job grows (seed 001: "what matters for scalability is not how
strongly each factor acts, but how its influence changes with the launch
parameters").

Every factor gives one influence number per run (its ``metric``: bigger =
worse, except the decomposition's work rate, which is turned into the rate
lost against the best run). Across the runs, ordered by size, we fit the
influence against log2(size); a factor whose influence rises by more than
``GROWTH_MEDIUM`` (absolute, on a 0-1 scale where it has one) or doubles is
reported as growing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from hushmon import __version__, jsonio
from hushmon.digest.factors import FACTORS, decomposition, factor_metric, parameters
from hushmon.digest.factors.base import SEVERITIES, Finding
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData, load_job
from hushmon.errors import HushmonError
from hushmon.report.html import Page

GROWTH_MEDIUM = 0.10  # absolute rise of a 0-1 influence
GROWTH_HIGH = 0.30
RELATIVE_GROWTH = 1.0  # or the influence at least doubles (unbounded metrics)

# What the influence number means, for the table and the hints.
MEANING = {
    "network_bandwidth": "share of busy time at the link ceiling",
    "topology": "bytes/s sent off-node per node",
    "disk_swap": "share of time swapping",
    "imbalance": "1 - mean/max of per-node work",
    "idle_cpu": "idle + iowait, % of CPU time",
    "decomposition": "work rate lost vs the best run",
}


@dataclass
class Run:
    job: str
    size: float
    nodes: int
    duration_s: float
    influence: dict[str, float | None] = field(default_factory=dict)
    work_sensor: str = ""
    work_rate: float | None = None


@dataclass
class Comparison:
    runs: list[Run]
    size_label: str
    findings: list[Finding]
    report_path: Path
    json_path: Path

    def summary_lines(self) -> list[str]:
        lines = [
            f"compared {len(self.runs)} runs by {self.size_label}: "
            + ", ".join(f"{r.job}@{r.size:g}" for r in self.runs)
        ]
        if not self.findings:
            lines.append("no factor's influence grows with the size")
        for f in sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity)):
            lines.append(f"[{f.severity}] {f.title}: {f.hint}")
        lines.append(f"report: {self.report_path}")
        return lines


def parse_run(spec: str) -> tuple[str, float | None]:
    """``JOB`` or ``JOB@SIZE`` (SIZE: process count or problem size)."""
    job, sep, size = spec.rpartition("@")
    if not sep:
        return spec, None
    if not job:
        raise HushmonError(f"bad run {spec!r}: expected JOB or JOB@SIZE")
    try:
        value = float(size)
    except ValueError:
        raise HushmonError(f"bad size in {spec!r}: {size!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise HushmonError(f"bad size in {spec!r}: must be a positive number")
    return job, value


def _measure(job: JobData, size: float) -> Run:
    run = Run(job.job, size, len(job.hosts), float(len(job.times_ns) * job.period_s))
    for factor in FACTORS:
        run.influence[factor.name] = factor_metric(factor, job)
    work = work_matrix(job)
    if work is not None:
        run.work_sensor = work[0]
        run.work_rate = float(np.nanmean(work[1]))
    return run


def _growth(sizes: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(slope per doubling of size, change from smallest to largest size)."""
    x = np.log2(sizes)
    slope = float(np.polyfit(x, values, 1)[0]) if len(set(x.tolist())) > 1 else 0.0
    return slope, float(values[-1] - values[0])


def compare_runs(
    db_path: Path,
    specs: list[str],
    out_dir: Path,
    size_label: str = "processes",
    work_per_process_falls_with_size: bool = True,
) -> Comparison:
    if len(specs) < 2:
        raise HushmonError("compare needs at least two runs (JOB@SIZE ...)")
    parsed = [parse_run(s) for s in specs]
    runs: list[Run] = []
    for job_id, size in parsed:
        job = load_job(db_path, job_id)
        runs.append(_measure(job, size if size is not None else float(len(job.hosts))))
    runs.sort(key=lambda r: r.size)
    if len({r.size for r in runs}) < 2:
        raise HushmonError("the runs have the same size: give sizes as JOB@SIZE")
    rates = [r.work_rate for r in runs]
    best = max((x for x in rates if x is not None), default=None)
    for r in runs:
        r.influence["decomposition"] = (
            1 - r.work_rate / best if best and r.work_rate is not None else None
        )
    sizes = np.array([r.size for r in runs])
    findings: list[Finding] = []
    trends: dict[str, dict[str, Any]] = {}
    for factor in FACTORS:
        vals = [r.influence.get(factor.name) for r in runs]
        if any(v is None for v in vals):
            trends[factor.name] = {"slope_per_doubling": None, "change": None}
            continue
        shown = np.array(vals, dtype=float)
        # problem sizes at fixed processes: the smallest size has the least work per
        # process, so the decomposition's influence is read from large to small
        flip = factor.name == "decomposition" and not work_per_process_falls_with_size
        values = shown[::-1] if flip else shown
        slope, change = _growth(sizes, values)
        trends[factor.name] = {"slope_per_doubling": slope, "change": change}
        if factor.name == "topology":  # unbounded (bytes/s): relative growth
            grows = values[0] > 0 and values[-1] >= (1 + RELATIVE_GROWTH) * values[0]
            severity = "medium"
        else:
            scale = 100.0 if factor.name == "idle_cpu" else 1.0
            grows = change / scale >= GROWTH_MEDIUM
            severity = "high" if change / scale >= GROWTH_HIGH else "medium"
        if not grows or slope <= 0:
            continue
        first, last = runs[0], runs[-1]
        text = MEANING[factor.name]
        findings.append(
            Finding(
                factor.name,
                f"{factor.title}: influence grows with {size_label}",
                severity,
                {
                    "meaning": text,
                    "values": {
                        f"{r.job}@{r.size:g}": round(float(v), 4)
                        for r, v in zip(runs, shown, strict=True)
                    },
                    "slope_per_doubling": round(slope, 4),
                    "change": round(change, 4),
                },
                f"{text} goes from {shown[0]:.3g} at {first.size:g} {size_label} to "
                f"{shown[-1]:.3g} at {last.size:g} ({slope:+.3g} per doubling): this factor "
                "limits scaling further.",
            )
        )
    dec = decomposition.FACTOR.analyze_runs(
        [f"{r.job}@{r.size:g}" for r in runs],
        [r.size for r in runs],
        rates,
        runs[0].work_sensor or "cpu.user_pct",
        parameters()["decomposition"],
    )
    if not any(f.factor == "decomposition" for f in findings):
        findings.extend(dec)
    out_dir.mkdir(parents=True, exist_ok=True)
    cmp = Comparison(runs, size_label, findings, out_dir / "compare.html", out_dir / "compare.json")
    payload = {
        "hushmon_version": __version__,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "size_label": size_label,
        "runs": [
            {
                "job": r.job,
                "size": r.size,
                "nodes": r.nodes,
                "duration_s": r.duration_s,
                "work_sensor": r.work_sensor,
                "work_rate": r.work_rate,
                "influence": r.influence,
            }
            for r in runs
        ],
        "trends": trends,
        "findings": [f.to_json() for f in findings],
    }
    jsonio.write_atomic(cmp.json_path, payload)
    _page(cmp).write(cmp.report_path)
    return cmp


def _page(cmp: Comparison) -> Page:
    page = Page("hushmon compare — " + ", ".join(r.job for r in cmp.runs))
    page.paragraph(
        f"{len(cmp.runs)} runs of one program ordered by {cmp.size_label}. For each factor, "
        "its influence in each run; what matters for scalability is how it changes."
    )
    page.heading("Findings")
    if not cmp.findings:
        page.paragraph("No factor's influence grows with the size.", "verdict")
    for f in sorted(cmp.findings, key=lambda f: SEVERITIES.index(f.severity)):
        page.finding(f.severity, f.title, f.hint)
    page.heading("Influence per run")
    cols = ["factor", "meaning"] + [f"{r.job}@{r.size:g}" for r in cmp.runs]
    rows = []
    for factor in FACTORS:
        vals = [r.influence.get(factor.name) for r in cmp.runs]
        rows.append(
            [factor.name, MEANING[factor.name], *[float("nan") if v is None else v for v in vals]]
        )
    rows.append(
        [
            "work rate",
            cmp.runs[0].work_sensor,
            *[float("nan") if r.work_rate is None else r.work_rate for r in cmp.runs],
        ]
    )
    page.table(cols, rows, text_columns=(0, 1))
    fig, ax = plt.subplots(figsize=(8, 3.6))
    sizes = [r.size for r in cmp.runs]
    for factor in FACTORS:
        vals = [r.influence.get(factor.name) for r in cmp.runs]
        if any(v is None for v in vals):
            continue
        v = np.array(vals, dtype=float)
        top = np.max(np.abs(v))
        ax.plot(sizes, v / top if top > 0 else v, marker="o", label=factor.name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(cmp.size_label)
    ax.set_ylabel("influence (scaled to its max)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    page.figure(fig, "Each factor's influence across the runs, scaled to its largest value.")
    return page
