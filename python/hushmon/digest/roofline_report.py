"""The report's roofline: each node and period as a point (arithmetic
intensity, achieved GFLOP/s) on log-log axes under its node type's two
roofs (factors/roofline.py has the verdict)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from hushmon.digest.factors import parameters
from hushmon.digest.factors.base import AnalyzerSkip
from hushmon.digest.factors.roofline import VERDICTS, RooflinePoints, roofline_points
from hushmon.digest.jobdata import JobData
from hushmon.report.html import Page

MAX_POINTS = 4000  # a sample of the node-periods beyond this: the SVG stays small
CLASS_COLORS = ("#d62728", "#1f77b4", "#7f7f7f")  # compute, memory, below both
NO_RECORD_COLOR = "#bcbd22"


def roofline_plot(pts: RooflinePoints, params: Mapping[str, Any]) -> Figure:
    active = pts.active
    ai = pts.intensity[active]
    gf = pts.gflop_per_s[active]
    cls = pts.classes(params["near_roof"])[active]
    if ai.size > MAX_POINTS:
        keep = np.random.default_rng(0).choice(ai.size, MAX_POINTS, replace=False)
        ai, gf, cls = ai[keep], gf[keep], cls[keep]
    positive = (ai > 0) & (gf > 0)  # log axes: a period without FLOPs cannot be drawn
    ai, gf, cls = ai[positive], gf[positive], cls[positive]
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    lo = min([*ai.tolist(), *(r.ridge_flop_per_byte for r in pts.records.values()), 1.0]) / 4
    hi = max([*ai.tolist(), *(r.ridge_flop_per_byte for r in pts.records.values()), 1.0]) * 4
    x = np.geomspace(lo, hi, 200)
    for r in pts.records.values():
        ax.plot(x, np.minimum(r.gflop_per_s, x * r.gb_per_s), color="black", lw=1.4)
        ax.axvline(r.ridge_flop_per_byte, color="black", ls=":", lw=0.8)
        ax.annotate(
            f"{r.gflop_per_s:.1f} GFLOP/s ({r.isa})",
            (hi, r.gflop_per_s),
            ha="right",
            va="bottom",
            fontsize=8,
        )
        ax.annotate(
            f"{r.gb_per_s:.1f} GB/s",
            (lo * 1.5, lo * 1.5 * r.gb_per_s),
            rotation=0,
            ha="left",
            va="bottom",
            fontsize=8,
        )
    groups = [(cls == k, CLASS_COLORS[k], name) for k, name in enumerate(VERDICTS)]
    groups.append((cls < 0, NO_RECORD_COLOR, "node without probe record"))
    for sel, color, name in groups:
        if sel.any():
            ax.scatter(
                ai[sel],
                gf[sel],
                s=9,
                alpha=0.6,
                color=color,
                linewidths=0,
                rasterized=True,
                label=f"{name} ({int(sel.sum())})",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity, FLOP / byte of memory traffic")
    ax.set_ylabel("GFLOP/s per node")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def roofline_section(page: Page, data: JobData) -> None:
    """The plot, where the job has the PMU's FLOPs and memory traffic."""
    params = parameters()["roofline"]
    try:
        pts = roofline_points(data, params)
    except AnalyzerSkip:
        return
    if not pts.active.any():
        return
    page.heading("Roofline")
    roofs = (
        "; ".join(
            f"{r.key}: {r.gflop_per_s:.1f} GFLOP/s, {r.gb_per_s:.1f} GB/s, measured on "
            f"{r.probed_host} at {r.measured_at} (load {r.load_avg})"
            for r in pts.records.values()
        )
        or "no probe record for these nodes (hushmon probe): no roofs drawn"
    )
    sim = (
        " The PMU was SIMULATED (synthetic rates): the points show the method, not this job."
        if pts.simulated
        else ""
    )
    page.figure(
        roofline_plot(pts, params),
        "Each node and period: FLOPs over memory traffic (the PMU profile's events: lines "
        "from beyond the last-level cache or from DRAM x 64 bytes, writebacks not counted) "
        "against the "
        f"node type's roofs from hushmon probe ({roofs}). Colors: the factor's class at "
        f"{params['near_roof']:.0%} of a roof." + sim,
    )
