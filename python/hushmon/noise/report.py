"""HTML reports of noise studies (report/html.Page), rebuilt from the raw
files of the runs: ``hushmon noise report DIR`` needs nothing else."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from hushmon.errors import HushmonError
from hushmon.noise.analysis import RunStats, arm_values
from hushmon.noise.decide import evidence
from hushmon.noise.events import load_detector_run
from hushmon.noise.folding import folded_profile, window_ns
from hushmon.noise.launch import DETECT_JSON, EVENTS_FILE, RunRecord
from hushmon.noise.procedure import STUDY_FILE, load_study, recompute, verdict, write_study
from hushmon.report.html import Page

ARM_COLOURS = {"clean": "#2d6cdf", "noisy": "#c62828"}


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if math.isnan(v) else f"{v:.{digits}g}"
    return str(v)


def _num(d: dict[str, Any], key: str) -> float:
    """d[key] as a float; NaN where it is missing or was written as null (a
    NaN in study.json, e.g. the SD of a single run)."""
    v = d.get(key)
    return math.nan if v is None else float(v)


def _verdict_text(v: dict[str, Any]) -> str:
    what = f"{v['level']:g} % injected load" if v.get("level") is not None else v["noise_cmd"]
    word = "DETECTED" if v["detected"] else "not detected"
    return (
        f"{what}: {word} — p = {_fmt(v['p_value'], 3)} (tested at alpha "
        f"{_fmt(v['level_tested'], 3)}, total alpha {v['alpha']:g}), measured added delay "
        f"{_fmt(v['effect'], 3)} % of time, {v['wall_seconds']:.1f} s wall time, "
        f"{v['runs']['clean']} clean + {v['runs']['noisy']} noisy runs"
    )


def _method_text(v: dict[str, Any], noise: dict[str, Any]) -> str:
    method = v.get("method") or (
        "injector" if noise.get("noise_cmd") is None
        else "known_phase" if noise.get("noise_phase_s") is not None else "scan"
    )  # fmt: skip
    text = {
        "injector": "at the injector's scheduled activations",
        "known_phase": f"at the given phase {noise.get('noise_phase_s')} s of each period",
        "scan": "the best of a 1 ms phase grid (no scheduler trace)",
        "sched_trace": "around the agent's on-CPU bursts from the scheduler trace "
        "(tracefs sched_switch of its process tree); clean runs: the bursts of the "
        "agent traced alone, shifted",
    }.get(method, method)
    cpu = v.get("agent_cpu_pct")
    if method == "sched_trace" and isinstance(cpu, float):
        text += f"; the agent's own CPU while the detector ran: {cpu:.3g} % of one CPU"
    lost = v.get("lost_trace_events")
    if lost:
        text += f"; {lost} trace events lost (ring buffer)"
    unmatched = v.get("unmatched_trace_slices")
    if unmatched:
        text += f"; {unmatched} of the agent's slices left out (no recorded start)"
    return text


def _arm_table(page: Page, stats: list[RunStats], field: str, unit: str, scale: float) -> None:
    """Like the seed's Tables 1-2: mean, SD, runs per arm, plus intervals."""
    ev = evidence(stats, 1.0)
    key = field
    rows = []
    for arm in ("clean", "noisy"):
        m = ev[key][f"{arm}_mean"]
        md = ev[key][f"{arm}_median"]
        if not m.get("n"):
            continue
        rows.append([
            arm, m["estimate"] / scale, _num(m, "sd") / scale, m["n"],
            f"[{_fmt(m['low'] / scale)}, {_fmt(m['high'] / scale)}]",
            md["estimate"] / scale,
            f"[{_fmt(md['low'] / scale)}, {_fmt(md['high'] / scale)}]",
        ])  # fmt: skip
    page.table(
        ["runs", f"mean, {unit}", f"SD, {unit}", "n", "99 % CI of mean (t)",
         f"median, {unit}", "95 % CI of median (order statistics)"],
        rows, text_columns=(0, 4, 6),
    )  # fmt: skip
    item = ev[key]
    if "mann_whitney_greater" in item:
        page.paragraph(
            f"Mann-Whitney (noisy > clean): U = {item['mann_whitney_greater']['u']:g}, "
            f"p = {_fmt(item['mann_whitney_greater']['p_value'], 3)}; Cliff's delta "
            f"{_fmt(item['cliffs_delta'], 3)}; Hodges-Lehmann shift "
            f"{_fmt(item['hodges_lehmann_shift'] / scale)} {unit}"
            + (
                f"; 99 % CIs overlap: {'yes' if item['ci_overlap_99'] else 'no'}"
                if "ci_overlap_99" in item
                else ""
            ),
            "meta",
        )


def _distribution_figure(stats: list[RunStats], field: str, label: str, scale: float) -> Any:
    """Like the seed's Figs. 3-4: every run's value per arm, with the 99 % CI."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for i, arm in enumerate(("clean", "noisy")):
        v = arm_values(stats, arm, field) / scale
        if v.size == 0:
            continue
        jitter = np.linspace(-0.12, 0.12, v.size) if v.size > 1 else np.zeros(1)
        ax.scatter(v, i + jitter, color=ARM_COLOURS[arm], s=18, alpha=0.8, label=arm)
        if v.size > 1:
            from hushmon.stats import t_ci

            ci = t_ci(v, 0.99)
            err = [[ci.estimate - ci.low], [ci.high - ci.estimate]]
            ax.errorbar(ci.estimate, i + 0.3, xerr=err, fmt="o", color="black", capsize=4, ms=4)
    ax.set_yticks([0, 1], ["clean", "noisy"])
    ax.set_ylim(-0.5, 1.6)
    ax.set_xlabel(label)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _folded_figure(study_dir: Path, study: dict[str, Any], zoom_ms: float) -> Any:
    noise = study["config"]["noise"]
    period_ns = round(noise["period_s"] * 1e9)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    bins = max(50, int(noise["period_s"] * 1000 / 0.25))  # 0.25 ms bins
    profiles: dict[str, list[np.ndarray]] = {"clean": [], "noisy": []}
    centres = np.zeros(0)
    for run_dir in sorted((study_dir / "runs").glob("*-*")):
        if not (run_dir / "run.json").is_file():
            continue
        record = RunRecord.load(run_dir)
        run = load_detector_run(run_dir / DETECT_JSON, run_dir / EVENTS_FILE)
        centres, prof = folded_profile(run, period_ns, round(record.phase_s * 1e9), bins)
        profiles[record.arm].append(prof)
    for arm, profs in profiles.items():
        if profs:
            ax.step(centres, np.median(profs, axis=0), where="mid", color=ARM_COLOURS[arm],
                    label=f"{arm} (median of {len(profs)} runs)")  # fmt: skip
    ax.set_xlim(0, zoom_ms)
    ax.set_xlabel("time after the (scheduled) activation, ms")
    ax.set_ylabel("detector excess, us per period")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _zoom_ms(noise: dict[str, Any]) -> float:
    """Three windows' worth after the activation, at least 10 ms."""
    width_ms = window_ns(noise["level_pct"], round(noise["period_s"] * 1e9)) / 1e6
    return min(noise["period_s"] * 1000, max(10.0, 3 * width_ms))


def _runs_figure(stats: list[RunStats]) -> Any:
    fig, ax = plt.subplots(figsize=(7, 3))
    for arm in ("clean", "noisy"):
        xs = [s.index for s in stats if s.arm == arm]
        ys = [s.folded_score for s in stats if s.arm == arm]
        ax.scatter(xs, ys, color=ARM_COLOURS[arm], label=arm, s=20)
    ax.set_xlabel("run (execution order)")
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("folded score (1/2: no agent)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def _looks_figure(looks: list[dict[str, Any]]) -> Any:
    fig, ax = plt.subplots(figsize=(7, 2.8))
    tested = [lk for lk in looks if lk["p_value"] is not None]
    if tested:
        ax.semilogy([lk["runs"] for lk in tested], [max(lk["p_value"], 1e-12) for lk in tested],
                    "o-", label="p-value")  # fmt: skip
        ax.semilogy([lk["runs"] for lk in tested], [lk["level"] for lk in tested], "k_--",
                    ms=14, label="alpha available at the look")  # fmt: skip
        ax.legend(fontsize=8)
    ax.set_xlabel("runs so far")
    ax.grid(alpha=0.3)
    return fig


def detect_page(study_dir: Path, study: dict[str, Any]) -> Page:
    stats = recompute(study_dir, study)
    v = study["verdict"]
    cfg = study["config"]
    page = Page("hushmon noise detect")
    page.raw_html(f"<p class='verdict'>{'DETECTED' if v['detected'] else 'not detected'}</p>")
    page.finding("high" if v["detected"] else "low", "Verdict", _verdict_text(v))
    det, noise = cfg["detector"], cfg["noise"]
    page.meta([
        ("detector", f"{det['op']} size {det['size']}, {det['nprocs']} processes, "
                     + (f"{det['count']} ops per run" if det.get("count")
                        else f"{det['seconds']:g} s per run") + f", timer {det['timer']}"),
        ("noise", noise["noise_cmd"] or f"hushmon-inject {noise['level_pct']:g} %, shape "
                  f"{noise['shape']}, period {noise['period_s']:g} s, CPU {noise['cpu']}"),
        ("design", f"clean and noisy runs in random order, random phase per run; budget "
                   f"{cfg['budget_s']:g} s, {cfg['max_runs']} runs planned, "
                   f"alpha {cfg['alpha']:g}"),
        ("primary test", "one-sided exact Mann-Whitney on the per-run folded statistic, "
                         "alpha spent over the looks (linear spending)"),
        ("agent's windows", _method_text(v, noise)),
    ])  # fmt: skip
    page.heading("Time per collective (the seed's statistic)")
    page.paragraph(
        "The seed compares loop times of clean and noisy runs with 99 % Student-t "
        "intervals. Here runs last a fixed time, so the loop value is the mean time "
        "per collective (loop time / count), the same quantity per operation."
    )
    _arm_table(page, stats, "per_op_ns", "us", 1e3)
    page.figure(
        _distribution_figure(stats, "per_op_ns", "mean time per collective, us", 1e3),
        "Each run's mean time per collective, clean vs noisy, with the 99 % CI of the mean "
        "(like the seed's Figs. 3-4).",
    )
    page.heading("Folded statistic (detours aligned with the agent's period)")
    page.paragraph(
        "Per window after each (scheduled) activation: the fraction of the same-width "
        "windows of the rest of its period that hold less detour excess (its score; 1/2 on "
        "average without an agent, however busy the machine). Per run: the mean score over "
        "its windows. Clean runs get a random sham phase, so both arms are measured the "
        "same way."
    )
    _arm_table(page, stats, "folded_score", "score", 1.0)
    page.paragraph("Delay in the agent's windows over their control windows:")
    _arm_table(page, stats, "delay_ns", "us", 1e3)
    page.figure(
        _folded_figure(study_dir, study, zoom_ms=_zoom_ms(noise)),
        "Detector excess against the time since the agent's activation (folded over the "
        "period), median over runs per arm.",
    )
    page.figure(_runs_figure(stats), "The folded statistic of every run, in execution order.")
    page.figure(
        _looks_figure(v.get("looks", [])),
        "Sequential looks: p-value and the alpha available at each look; detection when "
        "the p-value is at or below it.",
    )
    ev = v["evidence"]
    page.heading("Per-iteration statistics")
    page.table(
        ["statistic", "clean (median of runs)", "noisy (median of runs)"],
        [
            ["detours per second", ev["detour_rate_per_s"]["clean_median"],
             ev["detour_rate_per_s"]["noisy_median"]],
            ["detour excess, % of loop time", ev["excess_pct"]["clean_median"],
             ev["excess_pct"]["noisy_median"]],
            ["p99 iteration, ns", ev["p99_ns"]["clean_median"], ev["p99_ns"]["noisy_median"]],
            ["p99.9 iteration, ns", ev["p999_ns"]["clean_median"],
             ev["p999_ns"]["noisy_median"]],
        ],
    )  # fmt: skip
    page.heading("Runs")
    page.table(
        ["run", "arm", "phase, s", "time per op, us", "folded score", "delay, us", "windows",
         "detours/s", "wall, s"],
        [[s.index, s.arm, s.phase_s, s.per_op_ns / 1e3, s.folded_score, s.delay_ns / 1e3,
          s.windows, s.detour_rate_per_s, s.wall_s] for s in stats],
        text_columns=(1,),
    )  # fmt: skip
    return page


def write_detect_report(study_dir: Path, study: dict[str, Any], html: Path) -> Path:
    return detect_page(study_dir, study).write(html)


def sweep_page(out: Path, result: dict[str, Any]) -> Page:
    page = Page("hushmon noise sweep")
    det = result["detector"]
    aa = result["aa"]
    smallest = result["smallest_detected"]
    # No A/A replays (fewer than 4 clean runs): the rate is NaN, null in sweep.json.
    rate = aa["rate"]
    ok = rate is not None and not math.isnan(rate) and rate <= result["alpha"]
    page.finding(
        "high" if smallest is not None else "low", "Detection threshold",
        f"smallest level detected: {_fmt(smallest)} %; A/A false-positive rate "
        f"{_fmt(aa['rate'], 3)} over {aa['trials']} replays (95 % CI "
        f"{_fmt(aa['ci95'][0], 2)}-{_fmt(aa['ci95'][1], 2)}), alpha {result['alpha']:g}"
        f" ({'within' if ok else 'NOT within'} alpha). The seed's threshold: 0.3 %.",
    )  # fmt: skip
    page.meta([
        ("detector", f"{det['op']} size {det['size']}, {det['nprocs']} processes"),
        ("budget per level", f"{result['budget_s_per_level']:g} s"),
        ("total wall time", f"{result['wall_seconds']:.0f} s"),
    ])  # fmt: skip
    levels = result["levels"]
    page.heading("Sensitivity (like the seed's Tables 3-6)")
    cols = ["noise level, %"] + [f"{it['level']:g}" for it in levels]

    def row(label: str, fn: Any) -> list[Any]:
        return [label] + [fn(it["verdict"]) for it in levels]

    pm = "per_op_ns"
    rows = [
        row("mean time per op (noisy runs), us",
            lambda v: _num(v["evidence"][pm]["noisy_mean"], "estimate") / 1e3),
        row("standard deviation, us",
            lambda v: _num(v["evidence"][pm]["noisy_mean"], "sd") / 1e3),
        row("number of noisy runs", lambda v: v["runs"]["noisy"]),
        row("mean time per op (clean runs), us",
            lambda v: _num(v["evidence"][pm]["clean_mean"], "estimate") / 1e3),
        row("number of clean runs", lambda v: v["runs"]["clean"]),
        row("measured added delay, % of time", lambda v: v["effect"]),
        row("p-value (folded test)", lambda v: v["p_value"]),
        row("detected", lambda v: "yes" if v["detected"] else "no"),
        row("wall time to verdict, s", lambda v: v["wall_seconds"]),
    ]  # fmt: skip
    page.table(cols, rows)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
    xs = [it["level"] for it in levels]
    for arm, colour in ARM_COLOURS.items():
        means = [it["verdict"]["evidence"][pm][f"{arm}_mean"] for it in levels]
        est = [_num(m, "estimate") / 1e3 for m in means]
        lo = [_num(m, "low") / 1e3 for m in means]
        hi = [_num(m, "high") / 1e3 for m in means]
        a1.plot(xs, est, "o-", color=colour, label=f"{arm} runs")
        a1.fill_between(xs, lo, hi, color=colour, alpha=0.15)
    a1.set_xscale("symlog", linthresh=0.01)
    a1.set_xlabel("injected level, %")
    a1.set_ylabel("mean time per op, us (99 % CI)")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    eff = [it["verdict"]["effect"] for it in levels]
    a2.plot(xs, eff, "o-", color="black", label="measured (folded, HL shift)")
    a2.plot(xs, xs, ":", color="grey", label="injected")
    for it in levels:
        if it["verdict"]["detected"]:
            a2.plot(it["level"], it["verdict"]["effect"], "o", color="#c62828", ms=9, mfc="none")
    a2.set_xscale("symlog", linthresh=0.01)
    a2.set_yscale("symlog", linthresh=0.01)
    a2.set_xlabel("injected level, %")
    a2.set_ylabel("added delay, % of time")
    a2.legend(fontsize=8)
    a2.grid(alpha=0.3)
    page.figure(fig, "Sensitivity (like the seed's Fig. 5): left, the seed's statistic; right, "
                "the delay in the agent's windows (red rings: detected).")  # fmt: skip
    page.heading("A/A control")
    page.paragraph(
        f"{aa['pool_clean_runs']} clean runs pooled; {aa['trials']} replays of the whole "
        f"sequential procedure with {aa['runs_per_trial']} runs each, arms assigned at "
        f"random: {aa['detections']} false detections."
    )
    page.heading("Levels")
    page.table(
        ["level, %", "verdict", "report"],
        [[f"{it['level']:g}", _verdict_text(it["verdict"]), f"{it['dir']}/report.html"]
         for it in levels],
        text_columns=(1, 2),
    )  # fmt: skip
    return page


def write_sweep_report(out: Path, result: dict[str, Any], html: Path) -> Path:
    for it in result["levels"]:
        d = out / it["dir"]
        write_detect_report(d, load_study(d), d / "report.html")
    return sweep_page(out, result).write(html)


def calibrate_page(result: dict[str, Any]) -> Page:
    page = Page("hushmon noise calibrate")
    page.paragraph(
        f"Clean runs of {result['run_seconds']:g} s per configuration; reproducible when the "
        f"coefficient of variation of the time per operation is below {result['cv_max']:g}."
    )
    page.finding("low", "Best configuration", f"{result['best']['op']} {result['best']['size']}")
    page.table(
        ["operation", "size", "runs", "mean time per op, us", "CV", "detours/s",
         "folded score IQR", "reproducible"],
        [[c["op"], c["size"], c["runs"], c["per_op_ns_mean"] / 1e3, c["cv"],
          c["detour_rate_per_s"], c["folded_spread"],
          "yes" if c["reproducible"] else "no"] for c in result["configs"]],
        text_columns=(0, 1, 7),
    )  # fmt: skip
    fig, ax = plt.subplots(figsize=(7, 3))
    for i, c in enumerate(result["configs"]):
        v = np.asarray(c["per_op_ns"]) / c["per_op_ns_mean"]
        ax.scatter(np.full(v.size, i), v, s=15)
    ax.set_xticks(range(len(result["configs"])),
                  [f"{c['op']}\n{c['size']}" for c in result["configs"]], fontsize=7)  # fmt: skip
    ax.set_ylabel("time per op / mean")
    ax.grid(alpha=0.3)
    page.figure(fig, "Run-to-run spread of every configuration (1 = its mean).")
    return page


def write_calibrate_report(out: Path, result: dict[str, Any], html: Path) -> Path:
    return calibrate_page(result).write(html)


def rebuild(directory: Path, html: Path | None) -> Path:
    """The report of any results directory, from its raw files."""
    if not directory.is_dir():
        raise HushmonError(f"{directory} is not a directory")
    target = html or directory / "report.html"
    if (directory / STUDY_FILE).is_file():
        study = load_study(directory)
        # the verdict's evidence is recomputed from the runs' raw files
        stats = recompute(directory, study)
        from hushmon.noise.decide import replay
        from hushmon.noise.launch import NoiseConfig

        noise = NoiseConfig(**study["config"]["noise"])
        decision = replay(stats, study["config"]["alpha"], study["config"]["max_runs"])
        study["verdict"] = verdict(
            decision, stats, noise, study["verdict"]["wall_seconds"], study["config"]["max_runs"]
        )
        study["runs"] = [s.as_dict() for s in stats]
        write_study(directory, study)
        return write_detect_report(directory, study, target)
    for name, writer in (
        ("sweep.json", write_sweep_report),
        ("calibrate.json", write_calibrate_report),
    ):
        path = directory / name
        if path.is_file():
            try:
                result = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise HushmonError(f"cannot read {path}: {exc}") from exc
            return writer(directory, result, target)
    raise HushmonError(f"{directory} holds no noise study (study.json, sweep.json, calibrate.json)")
