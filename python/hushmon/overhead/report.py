"""The HTML report of a study: settings and load, the table, two plots
(slowdown with intervals; every run against its baseline), the anomalies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hushmon.overhead.analysis import Slowdown
from hushmon.report.html import Page


def slowdown_figure(slowdowns: list[Slowdown], modes: list[str]) -> Any:
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(f"{s.kernel} {s.config}" for s in slowdowns))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 3.8))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        rows = {f"{s.kernel} {s.config}": s for s in slowdowns if s.mode == mode}
        xs = [i + j * width for i, g in enumerate(groups) if g in rows]
        ys = [rows[g].mean_pct for g in groups if g in rows]
        lo = [rows[g].mean_pct - rows[g].mean_low for g in groups if g in rows]
        hi = [rows[g].mean_high - rows[g].mean_pct for g in groups if g in rows]
        err = np.nan_to_num(np.array([lo, hi]), nan=0.0)
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=mode)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels(groups, rotation=30, ha="right")
    ax.set_ylabel("slowdown vs none, % (mean)")
    ax.legend(fontsize=8)
    return fig


def runs_figure(cells: list[dict[str, Any]], anomalies: list[dict[str, Any]]) -> Any:
    import matplotlib.pyplot as plt

    base = {(c["kernel"], c["config"]): c["median_s"] for c in cells if c["mode"] == "none"}
    flagged = {(a["kernel"], a["config"], a["mode"], a["time_s"]) for a in anomalies}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(cells) + 2), 3.8))
    labels = []
    for i, c in enumerate(cells):
        ref = base.get((c["kernel"], c["config"]))
        if not ref:
            continue
        labels.append(f"{c['kernel']} {c['config']} {c['mode']}")
        for t in c["times_s"]:
            bad = (c["kernel"], c["config"], c["mode"], t) in flagged
            ax.plot(i, 100 * (t / ref - 1), "x" if bad else "o", color="#c62828" if bad
                    else "#1f4f9e", markersize=6 if bad else 3, alpha=0.8)  # fmt: skip
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("run time vs median without monitoring, %")
    return fig


def timeline_figure(runs: list[dict[str, Any]], cells: list[dict[str, Any]]) -> Any:
    """Each run in the order it was made, against its cell's median, with
    the load average: a slow spell of the machine shows across all modes."""
    import matplotlib.pyplot as plt

    medians = {(c["kernel"], c["config"], c["mode"]): c["median_s"] for c in cells}
    fig, ax = plt.subplots(figsize=(9.0, 3.6))
    modes = list(dict.fromkeys(r["mode"] for r in runs))
    for mode in modes:
        pts = [
            (r["index"], 100 * (r["time_s"] / medians[(r["kernel"], r["config"], r["mode"])] - 1))
            for r in runs
            if r["mode"] == mode and r["time_s"] is not None
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.plot(xs, ys, "o", markersize=3, label=mode, alpha=0.8)
    ax.set_xlabel("run (in the order made)")
    ax.set_ylabel("time vs its cell's median, %")
    ax.legend(fontsize=8, loc="upper left")
    load = ax.twinx()
    load.plot([r["index"] for r in runs], [r["load1"] for r in runs], color="grey", linewidth=0.8)
    load.set_ylabel("load average (1 min)", color="grey")
    return fig


def write_report(path: Path, doc: dict[str, Any], slowdowns: list[Slowdown]) -> Path:
    settings, env, analysis = doc["settings"], doc["environment"], doc["analysis"]
    page = Page("hushmon overhead: what monitoring costs the kernels")
    page.meta([
        ("kernels", ", ".join(settings["kernels"])),
        ("configurations", ", ".join(settings["configs"])),
        ("modes", ", ".join(f"{m} ({d})" for m, d in settings["mode_descriptions"].items())),
        ("runs per cell", settings["runs"]),
        ("sampling period", f"{settings['period_s']} s"),
        ("host", f"{env['host']}, {env['cpus']} CPUs"),
        ("load average", f"{env['load_start']} at start, {env['load_end']} at end"),
        ("started", env["started"]),
        ("study time", f"{env['wall_s']:.0f} s"),
    ])  # fmt: skip
    page.paragraph(
        "Run time is each kernel's own time between two barriers (slowest rank). Runs were "
        "made in randomized interleaved rounds; each monitoring agent was started before "
        "its runs and stopped after. Slowdown = mean (median) of the mode's runs over the "
        "mean (median) of the runs without monitoring, minus 1; anomalous runs "
        f"(|modified z| > 3.5 within a cell) are left out and listed below. Intervals: "
        f"{analysis['level']:.0%} (Welch for the mean, bootstrap for the median)."
    )
    page.heading("Slowdown, %")
    page.table(
        ["kernel", "config", "mode", "mean %", "low", "high", "median %", "low", "high",
         "mean % (all runs)", "runs", "baseline runs", "anomalies"],
        [[s.kernel, s.config, s.mode, s.mean_pct, s.mean_low, s.mean_high, s.median_pct,
          s.median_low, s.median_high, s.mean_pct_all_runs, s.n, s.n_base, s.anomalies]
         for s in slowdowns],
        text_columns=(0, 1, 2),
    )  # fmt: skip
    page.table(
        ["mode", "average of the mean slowdowns, %"],
        list(analysis["averages_mean_pct"].items()),
    )
    if doc.get("agent_usage"):
        page.heading("What the agents used")
        page.table(
            ["mode", "% of one CPU", "CPU s", "up s", "starts"],
            [[u["mode"], u["cpu_pct"], u["cpu_s"], u["up_s"], u["starts"]]
             for u in doc["agent_usage"]],
        )  # fmt: skip
        page.paragraph(
            "On-CPU time of each agent's processes (all threads) from the end of the settle "
            "time after each start to its stop (start-up left out), and of the scraper "
            "thread for node_exporter: a direct measure of the agents' own work at their "
            "period, whatever the kernels' times can resolve.",
            "meta",
        )
    if slowdowns:
        page.figure(
            slowdown_figure(slowdowns, list(dict.fromkeys(s.mode for s in slowdowns))),
            "Mean slowdown per kernel and configuration, with its interval.",
        )
    page.figure(
        runs_figure(analysis["cells"], analysis["anomalies"]),
        "Every run against the median without monitoring of its kernel and configuration; "
        "red crosses: anomalous runs.",
    )
    page.figure(
        timeline_figure(doc["runs"], analysis["cells"]),
        "Every run in the order it was made (randomized, interleaved rounds) against the "
        "median of its kernel, configuration and mode; grey: the machine's load average.",
    )
    page.heading("Anomalous runs")
    if analysis["anomalies"]:
        page.table(
            ["run", "round", "kernel", "config", "mode", "time s", "cell median s",
             "modified z", "load"],
            [[a["index"], a["round"], a["kernel"], a["config"], a["mode"], a["time_s"],
              a["cell_median_s"], a["modified_z"], a["load1"]] for a in analysis["anomalies"]],
            text_columns=(2, 3, 4),
        )  # fmt: skip
    else:
        page.paragraph("None.")
    if analysis["failed_runs"]:
        page.heading("Failed runs")
        page.table(
            ["run", "kernel", "config", "mode", "error"],
            [[f["index"], f["kernel"], f["config"], f["mode"], f["error"]]
             for f in analysis["failed_runs"]],
            text_columns=(1, 2, 3, 4),
        )  # fmt: skip
    for note in doc["notes"]:
        page.paragraph(note, "meta")
    return page.write(path)
