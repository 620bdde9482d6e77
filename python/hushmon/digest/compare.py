"""Compare runs of one program at several sizes: which factor's influence
grows as the job grows (seed 001: "what matters for scalability is not how
strongly each factor acts, but how its influence changes with the launch
parameters").

Every factor gives one influence number per run (its ``metric``: bigger =
worse, except the decomposition's work rate, which is turned into the rate
lost against the best run). Across the runs, ordered by size, we fit the
influence against log2(size); a factor whose influence rises by more than
``GROWTH_MEDIUM`` (absolute, on its 0-1 scale; idle CPU in %) is reported
as growing.

Runs of the same size (two programs on the same nodes: butterfly and snake)
are compared side by side instead: a factor whose influence differs by
``GROWTH_MEDIUM`` or more between them is reported with each run's own
finding, which says why (the numbers and the links involved).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from hushmon import __version__, jsonio
from hushmon.datadir import path_component
from hushmon.digest.build import attach_fabric
from hushmon.digest.factors import (
    FACTORS,
    decomposition,
    factor_metric,
    links,
    parameters,
    run_factors,
)
from hushmon.digest.factors.base import SEVERITIES, Finding
from hushmon.digest.factors.energy import job_energy_j
from hushmon.digest.factors.roofline import attach_ceilings, ceilings_of
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData, load_job
from hushmon.digest.scope import shared_host
from hushmon.errors import HushmonError
from hushmon.report.html import Page

GROWTH_MEDIUM = 0.10  # absolute rise of a 0-1 influence
GROWTH_HIGH = 0.30

# What the influence number means, for the table and the hints.
MEANING = {
    "network_bandwidth": "busiest link's load at its ceiling, share of its capacity "
    "(an upper bound for uplinks, at most 1)",
    "topology": "share of the traffic that may cross between racks (upper bound)",
    "disk_swap": "share of time swapping, or at the memory limit with the disk busy",
    "imbalance": "1 - mean/max of per-node work",
    "energy": "none: energy is reported in each digest, not a limit to follow across sizes",
    "io_bound": "share of the run time the average node waits for I/O while moving bytes",
    "idle_cpu": "idle + iowait, % of CPU time",
    "neighbour": "share of the run time other work on the job's nodes may cost (high end)",
    "decomposition": "work rate lost vs the best run",
    "gpu_idle": "share of GPU time below the idle SM utilization",
    "gpu_memory": "peak GPU memory used, share of the GPU's memory",
    "gpu_throttle": "share of busy GPU time with throttled clocks",
    "gpu_transfer": "share of time with a GPU's PCIe link near capacity",
    "app_timeline": "none: the application's own timeline is read in each digest, "
    "not compared across sizes",
    "roofline": "mean gap to the roof at the job's own intensity (the probe's ceilings)",
    "power_cap": "share of the run with some node's CPU package at its power cap or "
    "thermally throttled",
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
    network_send: float | None = None  # bytes/s per node in its message periods (mean of nodes)
    energy_j: float | None = None  # energy to solution (factors/energy.py), None: no source
    label: str = ""  # what the run is (a program name), from JOB@SIZE=LABEL

    @property
    def name(self) -> str:
        """'job 3' or 'job 3 (butterfly)'."""
        return f"job {self.job}" + (f" ({self.label})" if self.label else "")

    @property
    def column(self) -> str:
        return f"{self.job}@{self.size:g}" + (f" {self.label}" if self.label else "")

    racks: str = ""  # what the run's digest knew of the racks
    # the roofline finding in brief: verdict, node types, the ceilings file (same for all runs)
    roofline: dict[str, Any] = field(default_factory=dict)
    findings: dict[str, Finding] = field(default_factory=dict)  # the run's worst per factor
    all_findings: list[Finding] = field(default_factory=list)
    period_s: float = 1.0
    host_busy_pct: float | None = None  # host-wide CPU busy (node-scoped agents)
    nodes_share_host: bool | None = None


@dataclass
class Check:
    """A finding of the first run that is gone or smaller in the second: the
    run time its digest said removing it would save, against the change measured."""

    factor: str
    title: str
    severity: str
    low_share: float | None  # predicted (None: the finding gave no estimate)
    high_share: float | None
    measured_share: float  # 1 - T_B / T_A
    tolerance: float  # the run times' resolution (one sampling period each), as a share
    in_b: str  # what the second run says of the factor

    @property
    def verdict(self) -> str:
        if self.low_share is None or self.high_share is None:
            return "no estimate"
        lo, hi = self.low_share - self.tolerance, self.high_share + self.tolerance
        return "hit" if lo <= self.measured_share <= hi else "miss"

    def text(self) -> str:
        pred = (
            "no estimate"
            if self.low_share is None or self.high_share is None
            else f"{100 * self.low_share:.0f}-{100 * self.high_share:.0f}%"
        )
        return (
            f"[{self.severity}] {self.title}: predicted {pred} of the run time, measured "
            f"{100 * self.measured_share:+.0f}% (+-{100 * self.tolerance:.0f}), "
            f"{self.verdict}; in the second run: {self.in_b}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "title": self.title,
            "severity": self.severity,
            "predicted_low_share": self.low_share,
            "predicted_high_share": self.high_share,
            "measured_share": round(self.measured_share, 4),
            "tolerance": round(self.tolerance, 4),
            "verdict": self.verdict,
            "in_second_run": self.in_b,
        }


def predicted_vs_measured(a: Run, b: Run) -> list[Check]:
    """Each finding of ``a`` that ``b`` no longer has, or has smaller (a lower
    severity or a smaller estimated loss): its predicted saving against the run
    time saved from ``a`` to ``b``."""
    if a.duration_s <= 0:
        return []
    measured = 1 - b.duration_s / a.duration_s
    tol = a.period_s / a.duration_s + b.period_s / a.duration_s
    checks = []
    for f in a.all_findings:
        if f.severity == "info":
            continue
        same = [g for g in b.all_findings if g.factor == f.factor and g.title == f.title]
        g = max(same, key=lambda x: _rank(x), default=None)
        if g is not None:
            smaller = _rank(g) < _rank(f) or (
                f.loss is not None and g.loss is not None and g.loss.mid_share < f.loss.mid_share
            )
            if not smaller:
                continue
            in_b = f"[{g.severity}]" + (f" {g.loss.range_text()}" if g.loss is not None else "")
        else:
            in_b = "gone"
        checks.append(
            Check(
                f.factor,
                f.title,
                f.severity,
                None if f.loss is None else f.loss.low_share,
                None if f.loss is None else f.loss.high_share,
                measured,
                tol,
                in_b,
            )
        )
    return checks


@dataclass
class Comparison:
    runs: list[Run]
    size_label: str
    findings: list[Finding]
    report_path: Path
    json_path: Path
    side_by_side: bool = False
    checks: list[Check] = field(default_factory=list)
    first: Run | None = None  # the runs as given: checks read first -> second
    second: Run | None = None

    def summary_lines(self) -> list[str]:
        how = "side by side (same size)" if self.side_by_side else f"by {self.size_label}"
        lines = [f"compared {len(self.runs)} runs {how}: " + ", ".join(r.column for r in self.runs)]
        if not self.findings:
            lines.append(
                "no factor's influence differs between the runs"
                if self.side_by_side
                else "no factor's influence grows with the size"
            )
        for f in sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity)):
            lines.append(f"[{f.severity}] {f.title}: {f.hint}")
        if self.first is not None and self.second is not None:
            lines.append(self.checks_heading())
            lines.extend("  " + c.text() for c in self.checks)
            if not self.checks:
                lines.append(f"  no finding of {self.first.name} is gone or smaller")
        lines.append(f"report: {self.report_path}")
        return lines

    def checks_heading(self) -> str:
        a, b = self.first, self.second
        assert a is not None and b is not None
        return (
            f"predicted against measured, {a.name} -> {b.name}: run time {a.duration_s:.0f} s "
            f"-> {b.duration_s:.0f} s ({100 * (1 - b.duration_s / a.duration_s):+.0f}% saved)"
        )


def split_label(spec: str) -> tuple[str, str]:
    """``JOB[@SIZE]=LABEL`` -> (``JOB[@SIZE]``, LABEL); no ``=``: an empty label."""
    base, eq, label = spec.partition("=")
    if eq and not label.strip():
        raise HushmonError(f"bad run {spec!r}: an empty name after '='")
    return base, label.strip()


def parse_run(spec: str) -> tuple[str, float | None]:
    """``JOB`` or ``JOB@SIZE`` (SIZE: process count or problem size), ``=LABEL`` ignored."""
    spec = split_label(spec)[0]
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


def energy_per_work(run: Run) -> float | None:
    """Energy per unit of work: J / (work rate x nodes x run time), the same problem's
    runs at any size compare on it (None without an energy source or a work rate)."""
    if run.energy_j is None or not run.work_rate or run.duration_s <= 0:
        return None
    return run.energy_j / (run.work_rate * run.nodes * run.duration_s)


def _measure(job: JobData, size: float) -> Run:
    run = Run(job.job, size, len(job.hosts), job.span_s)
    for factor in FACTORS:
        run.influence[factor.name] = factor_metric(factor, job)
    work = work_matrix(job)
    if work is not None:
        run.work_sensor = work[0]
        run.work_rate = float(np.nanmean(work[1]))
    sends = [
        float(np.nanmean(link.tx[st.message]))
        for link in links.node_links(job, parameters()["network_bandwidth"])
        if (st := links.link_stats(link)) is not None
    ]
    run.network_send = float(np.mean(sends)) if sends else None
    run.energy_j = job_energy_j(job)
    run.racks = job.fabric_info.describe() if job.fabric_info is not None else ""
    run.period_s = job.period_s
    run.all_findings = run_factors(job).findings
    for f in sorted(run.all_findings, key=lambda f: SEVERITIES.index(f.severity)):
        run.findings.setdefault(f.factor, f)
    run.roofline = _roofline_brief(job, run.findings.get("roofline"))
    if job.has("cpu.host_busy_pct"):
        run.host_busy_pct = float(np.nanmean(job.stats["cpu.host_busy_pct"].avg))
        run.nodes_share_host = shared_host(job)[0]
    return run


def _roofline_brief(job: JobData, f: Finding | None) -> dict[str, Any]:
    """The run's roofline verdict against the ceilings attached to it."""
    path, records = ceilings_of(job)
    out: dict[str, Any] = {
        "ceilings_file": str(path) if path is not None else None,
        "records": len(records),
    }
    if f is None:
        out["verdict"] = "no finding (no PMU FLOPs and memory traffic)"
        return out
    ev = f.evidence
    out["verdict"] = ev.get("verdict", "no probe record for the node type")
    for key in (
        "node_types",
        "median_intensity_flop_per_byte",
        "median_gflop_per_s",
        "mean_gap_to_roof",
        "nodes_matched_by_cpu_model",
        "hosts_without_record",
    ):
        if key in ev:
            out[key] = ev[key]
    return out


def _rank(f: Finding | None) -> int:
    """high 4, medium 3, low 2, info 1, no finding 0."""
    return 0 if f is None else len(SEVERITIES) - SEVERITIES.index(f.severity)


def _brief(f: Finding | None) -> str:
    """A run's finding in one sentence (its hint's first, which carries the numbers)."""
    if f is None:
        return "no finding."
    first = re.split(r"(?<=[a-z0-9)%])\. (?=[A-Z])", f.hint, maxsplit=1)[0].rstrip(".")
    return f"[{f.severity}] {first}."


def _side_by_side(runs: list[Run]) -> list[Finding]:
    """Same-size runs: the factors whose influence differs, each run's finding saying why."""
    findings: list[Finding] = []
    for factor in FACTORS:
        if factor.name == "decomposition":
            continue
        vals = [r.influence.get(factor.name) for r in runs]
        if any(v is None for v in vals):
            continue
        v = np.array(vals, dtype=float)
        scale = 100.0 if factor.name == "idle_cpu" else 1.0
        diff = float(v.max() - v.min()) / scale
        ranks = [_rank(r.findings.get(factor.name)) for r in runs]
        verdicts_differ = max(ranks) - min(ranks) >= 2  # e.g. high against low or none
        if diff < GROWTH_MEDIUM and not verdicts_differ:
            continue
        hi, lo = runs[int(np.argmax(v))], runs[int(np.argmin(v))]
        text = MEANING[factor.name]
        sev = {
            r.job: (r.findings[factor.name].severity if factor.name in r.findings else "none")
            for r in runs
        }
        evidence: dict[str, Any] = {
            "meaning": text,
            "values": {
                f"{r.job}@{r.size:g}": round(float(x), 4) for r, x in zip(runs, v, strict=True)
            },
            "difference": round(diff * scale, 4),
            "severity_per_run": sev,
            "verdict_gap": max(ranks) - min(ranks),
        }
        for r in (hi, lo):
            if r.network_send is not None:
                evidence[f"network_send_MB_per_s_per_node_{r.job}"] = round(r.network_send / 1e6, 2)
        hint = (
            f"{text[0].upper()}{text[1:]}: {v.max():.3g} in {hi.name} against "
            f"{v.min():.3g} in {lo.name}. "
            f"J{hi.name[1:]}: {_brief(hi.findings.get(factor.name))} "
            f"J{lo.name[1:]}: {_brief(lo.findings.get(factor.name))}"
        )
        if (
            factor.name in ("topology", "network_bandwidth")
            and hi.network_send is not None
            and lo.network_send is not None
        ):
            hint += (
                f" Per node, {hi.name} sends {hi.network_send / 1e6:.1f} MB/s in its message "
                f"periods and {lo.name} {lo.network_send / 1e6:.1f} MB/s over the same links."
            )
        gap = max(ranks) - min(ranks)
        severity = "high" if diff >= GROWTH_HIGH or gap >= 3 else "medium"
        findings.append(
            Finding(
                factor.name, f"{factor.title}: differs between the runs", severity, evidence, hint
            )
        )
    # the factor whose verdicts differ most first: that is the "why"
    findings.sort(key=lambda f: -int(f.evidence["verdict_gap"]))
    return findings


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
    topology: Path | None = None,
    reports: Path | None = None,
) -> Comparison:
    """``reports``: the data folder's reports, where earlier digests recorded the racks."""
    if len(specs) < 2:
        raise HushmonError("compare needs at least two runs (JOB@SIZE ...)")
    parsed = [(*parse_run(s), split_label(s)[1]) for s in specs]
    if len({j for j, _, _ in parsed}) < len(parsed):
        raise HushmonError("a job is given twice: compare different jobs")
    runs: list[Run] = []
    for job_id, size, label in parsed:
        job = load_job(db_path, job_id)
        previous = reports / path_component(job_id) / "digest.json" if reports else None
        attach_fabric(job, topology, previous if previous and previous.exists() else None)
        # the same ceilings for every run: those stored beside the one store they come from
        attach_ceilings(job, Path(db_path))
        run = _measure(job, size if size is not None else float(len(job.hosts)))
        run.label = label
        runs.append(run)
    given = list(runs)
    runs.sort(key=lambda r: r.size)
    rates = [r.work_rate for r in runs]
    best = max((x for x in rates if x is not None), default=None)
    for r in runs:
        r.influence["decomposition"] = (
            1 - r.work_rate / best if best and r.work_rate is not None else None
        )
    pair = (given[0], given[1]) if len(given) == 2 else None
    if len({r.size for r in runs}) < 2:
        return _finish(
            runs, size_label, _side_by_side(runs), out_dir, {}, side_by_side=True, pair=pair
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
                f"{text[0].upper()}{text[1:]} goes from {shown[0]:.3g} at {first.size:g} "
                f"{size_label} to {shown[-1]:.3g} at {last.size:g} ({slope:+.3g} per "
                "doubling): this factor limits scaling further."
                + (
                    f" At {last.size:g}: {_brief(last.findings[factor.name])}"
                    if factor.name in last.findings
                    else ""
                ),
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
    _explain_shared_cpus(runs, findings)
    return _finish(runs, size_label, findings, out_dir, trends, pair=pair)


def _explain_shared_cpus(runs: list[Run], findings: list[Finding]) -> None:
    """A falling work rate per node on nodes that share a saturated machine is
    (at least partly) the nodes sharing its CPUs, not the decomposition: say so."""
    busy = [r for r in runs if r.nodes_share_host and (r.host_busy_pct or 0) >= 85]
    if not busy:
        return
    for f in findings:
        if f.factor != "decomposition":
            continue
        f.evidence["runs_on_a_saturated_shared_machine"] = ", ".join(
            f"{r.name}: {r.nodes} nodes, host CPU {r.host_busy_pct:.0f}% busy" for r in busy
        )
        f.hint += (
            " Caution: in "
            + ", ".join(r.name for r in busy)
            + " the nodes share one machine whose CPUs were busy "
            + ", ".join(f"{r.host_busy_pct:.0f}%" for r in busy)
            + " of the time (host-wide CPU), so part of the drop per node is the nodes "
            "sharing those CPUs, not the decomposition: compare on nodes with CPUs of their own."
        )
        if f.severity == "high":
            f.severity = "medium"


def _finish(
    runs: list[Run],
    size_label: str,
    findings: list[Finding],
    out_dir: Path,
    trends: dict[str, dict[str, Any]],
    side_by_side: bool = False,
    pair: tuple[Run, Run] | None = None,
) -> Comparison:
    out_dir.mkdir(parents=True, exist_ok=True)
    cmp = Comparison(
        runs,
        size_label,
        findings,
        out_dir / "compare.html",
        out_dir / "compare.json",
        side_by_side,
    )
    if pair is not None:
        cmp.first, cmp.second = pair
        cmp.checks = predicted_vs_measured(*pair)
    payload = {
        "hushmon_version": __version__,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "side_by_side" if side_by_side else "trend",
        "size_label": size_label,
        "runs": [
            {
                "job": r.job,
                "label": r.label,
                "size": r.size,
                "nodes": r.nodes,
                "duration_s": r.duration_s,
                "work_sensor": r.work_sensor,
                "work_rate": r.work_rate,
                "influence": r.influence,
                "network_send_bytes_per_s_per_node": r.network_send,
                "energy_j": r.energy_j,
                "energy_j_per_work": energy_per_work(r),
                "roofline": r.roofline,
                "host_busy_pct": r.host_busy_pct,
                "nodes_share_a_host": r.nodes_share_host,
                "racks": r.racks,
                "findings": {k: f.to_json() for k, f in r.findings.items()},
            }
            for r in runs
        ],
        "trends": trends,
        "findings": [f.to_json() for f in findings],
        "predicted_vs_measured": None
        if cmp.first is None or cmp.second is None
        else {
            "first": cmp.first.job,
            "second": cmp.second.job,
            "first_duration_s": cmp.first.duration_s,
            "second_duration_s": cmp.second.duration_s,
            "measured_share_saved": round(1 - cmp.second.duration_s / cmp.first.duration_s, 4),
            "checks": [c.to_json() for c in cmp.checks],
        },
    }
    jsonio.write_atomic(cmp.json_path, payload)
    _page(cmp).write(cmp.report_path)
    return cmp


def _page(cmp: Comparison) -> Page:
    page = Page("hushmon compare — " + ", ".join(r.name for r in cmp.runs))
    if cmp.side_by_side:
        page.paragraph(
            f"{len(cmp.runs)} runs of the same size ({cmp.runs[0].size:g} {cmp.size_label}) "
            "side by side: for each factor, its influence in each run, and for the factors "
            "that differ, each run's own finding, which says why."
        )
    else:
        page.paragraph(
            f"{len(cmp.runs)} runs of one program ordered by {cmp.size_label}. For each "
            "factor, its influence in each run; what matters for scalability is how it changes."
        )
    page.heading("Findings")
    if not cmp.findings:
        page.paragraph(
            "No factor's influence differs between the runs."
            if cmp.side_by_side
            else "No factor's influence grows with the size.",
            "verdict",
        )
    for f in sorted(cmp.findings, key=lambda f: SEVERITIES.index(f.severity)):
        page.finding(f.severity, f.title, f.hint)
    if cmp.first is not None and cmp.second is not None:
        page.heading("Predicted against measured")
        page.paragraph(
            cmp.checks_heading()
            + ". Each finding of the first run that the second no longer has, or has "
            "smaller: the run time its digest said removing it would save, against the "
            "change measured (the run times are known to one sampling period each)."
        )
        page.table(
            ["finding (first run)", "severity", "predicted", "measured", "hit", "second run"],
            [
                (
                    c.title,
                    c.severity,
                    "no estimate"
                    if c.low_share is None or c.high_share is None
                    else f"{100 * c.low_share:.0f}-{100 * c.high_share:.0f}%",
                    f"{100 * c.measured_share:+.0f}% +-{100 * c.tolerance:.0f}",
                    c.verdict,
                    c.in_b,
                )
                for c in cmp.checks
            ],
            text_columns=(0, 1, 2, 3, 4, 5),
        )
    page.heading("Influence per run")
    cols = ["factor", "meaning"] + [r.column for r in cmp.runs]
    rows: list[list[Any]] = []
    for factor in FACTORS:
        vals = [r.influence.get(factor.name) for r in cmp.runs]
        rows.append(
            [
                factor.name,
                MEANING[factor.name],
                *[float("nan") if v is None else round(v, 3) for v in vals],
            ]
        )
    rows.append(
        [
            "work rate",
            cmp.runs[0].work_sensor,
            *[float("nan") if r.work_rate is None else r.work_rate for r in cmp.runs],
        ]
    )
    rows.append(
        [
            "network",
            "MB/s each node sends in its message periods",
            *[float("nan") if r.network_send is None else r.network_send / 1e6 for r in cmp.runs],
        ]
    )
    rows.append(
        [
            "energy",
            f"J per unit of work ({cmp.runs[0].work_sensor} x nodes x s); the run's kJ in JSON",
            *[float("nan") if (e := energy_per_work(r)) is None else e for r in cmp.runs],
        ]
    )
    rows.append(
        [
            "host CPU",
            "host-wide CPU busy, % (nodes sharing a machine)",
            *[float("nan") if r.host_busy_pct is None else r.host_busy_pct for r in cmp.runs],
        ]
    )
    page.table(cols, rows, text_columns=(0, 1))
    page.heading("Each run's own findings", 3)
    page.table(
        ["factor", *[r.column for r in cmp.runs]],
        [
            [
                factor.name,
                *[
                    r.findings[factor.name].severity if factor.name in r.findings else "–"
                    for r in cmp.runs
                ],
            ]
            for factor in FACTORS
        ],
        text_columns=tuple(range(len(cmp.runs) + 1)),
    )
    page.paragraph(
        "Racks: " + "; ".join(f"{r.name}: {r.racks or 'not looked up'}" for r in cmp.runs),
        "meta",
    )
    files = {r.roofline.get("ceilings_file") for r in cmp.runs} - {None}
    page.paragraph(
        "Roofline, every run against the same ceilings ("
        + (", ".join(sorted(str(f) for f in files)) or "none stored")
        + "): "
        + "; ".join(
            f"{r.name}: {r.roofline.get('verdict', '–')}"
            + (f" ({', '.join(r.roofline['node_types'])})" if r.roofline.get("node_types") else "")
            for r in cmp.runs
        ),
        "meta",
    )
    fig, ax = plt.subplots(figsize=(8, 3.6))
    if cmp.side_by_side:
        names = [f.name for f in FACTORS if f.name != "decomposition"]
        width = 0.8 / len(cmp.runs)
        for k, r in enumerate(cmp.runs):
            v = [r.influence.get(n) for n in names]
            scaled = [
                float("nan") if x is None else x / (100.0 if n == "idle_cpu" else 1.0)
                for n, x in zip(names, v, strict=True)
            ]
            ax.bar(np.arange(len(names)) + k * width, scaled, width, label=r.name)
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
        ax.set_ylabel("influence (0-1; idle CPU / 100)")
    else:
        sizes = [r.size for r in cmp.runs]
        for factor in FACTORS:
            vals = [r.influence.get(factor.name) for r in cmp.runs]
            if any(v is None for v in vals):
                continue
            arr = np.array(vals, dtype=float) / (100.0 if factor.name == "idle_cpu" else 1.0)
            ax.plot(sizes, arr, marker="o", label=factor.name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(cmp.size_label)
        ax.set_ylabel("influence (0-1; idle CPU / 100)")
        ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    page.figure(
        fig,
        "Each factor's influence in each run."
        if cmp.side_by_side
        else "Each factor's influence across the runs (its meaning is in the table above).",
    )
    return page
