"""Figures of a bench run: time vs message size per operation, and the loop error.

All times are drawn in microseconds. Each operation gets one panel; the
x axis is the message size when the run swept sizes, the process count when
it swept process counts, and operations measured at a single point are drawn
together as a bar chart. Error bars are the confidence interval the program
reported (ci_low, ci_high).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from hushmon.bench.checks import LoopVsSync
from hushmon.bench.results import SYNC_METHOD, BenchResult, BenchRun

US_PER_S = 1e6
PANEL_COLUMNS = 3
# Three panels side by side fit the report's 1100 px column.
PANEL_WIDTH_IN = 3.5
PANEL_HEIGHT_IN = 2.8
LOG_SCALE_MIN_RATIO = 10.0

# One look per method, the same in every figure of the report.
METHOD_STYLE: dict[str, dict[str, str]] = {
    "sync": {"color": "#1f5fbf", "marker": "o", "label": "synchronized (local, max over ranks)"},
    "loop": {"color": "#d1495b", "marker": "s", "label": "loop (back to back)"},
    "loop_barrier": {"color": "#e08e0b", "marker": "^", "label": "loop with barrier"},
    "osu": {"color": "#6d597a", "marker": "D", "label": "OSU 7.x procedure (avg of rank means)"},
    "imb": {"color": "#2a9d8f", "marker": "v", "label": "IMB-MPI1 procedure (t_avg)"},
}
GLOBAL_COLOR = "#1f5fbf"
GLOBAL_LABEL = "synchronized (global clock)"
_FALLBACK_COLORS = ["#2a9d8f", "#6d597a", "#264653", "#8ab17d"]

Axis = Literal["size", "nprocs", "point"]


def method_style(method: str) -> dict[str, str]:
    if method in METHOD_STYLE:
        return METHOD_STYLE[method]
    # A stable pick (str hash is salted per process).
    color = _FALLBACK_COLORS[sum(map(ord, method)) % len(_FALLBACK_COLORS)]
    return {"color": color, "marker": "D", "label": method}


def x_axis_of(results: Sequence[BenchResult]) -> Axis:
    """What an operation's results vary over."""
    positive_sizes = {r.size for r in results if r.size > 0}
    if len(positive_sizes) > 1:
        return "size"
    if len({r.nprocs for r in results}) > 1:
        return "nprocs"
    return "point"


def format_bytes(value: float, _pos: int | None = None) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale and value % scale == 0:
            return f"{int(value // scale)}{unit}"
    return f"{value:g}"


def _minor_label(value: float, _pos: int | None = None) -> str:
    """Label the 2x and 5x minor ticks of a log axis, so short ranges stay readable."""
    mantissa = value / 10 ** math.floor(math.log10(value))
    return f"{value:g}" if round(mantissa) in (2, 5) else ""


def _yerr(results: Sequence[BenchResult]) -> list[list[float]]:
    lower = []
    upper = []
    for r in results:
        lo = r.mean - r.ci_low if not math.isnan(r.ci_low) else 0.0
        hi = r.ci_high - r.mean if not math.isnan(r.ci_high) else 0.0
        lower.append(max(lo, 0.0) * US_PER_S)
        upper.append(max(hi, 0.0) * US_PER_S)
    return [lower, upper]


def _plot_series(ax: Axes, results: list[BenchResult], axis: Axis) -> None:
    """Lines of one operation: one per (method, nprocs or size) group."""
    groups: dict[tuple[str, int], list[BenchResult]] = defaultdict(list)
    for r in results:
        if axis == "size" and r.size <= 0:
            continue  # a zero size has no place on a log axis; it stays in the table
        other = r.nprocs if axis == "size" else r.size
        groups[(r.method, other)].append(r)
    several = len({other for _, other in groups}) > 1
    for (method, other), group in groups.items():
        group.sort(key=lambda r: r.size if axis == "size" else r.nprocs)
        xs = [r.size if axis == "size" else r.nprocs for r in group]
        style = method_style(method)
        suffix = ""
        if several:
            suffix = f", {other} ranks" if axis == "size" else f", {format_bytes(other)} B"
        ax.errorbar(
            xs,
            [r.mean * US_PER_S for r in group],
            yerr=_yerr(group),
            color=style["color"],
            marker=style["marker"],
            markersize=4,
            capsize=2.5,
            linewidth=1.3,
            label=style["label"] + suffix,
        )
        globals_ = [(x, r.global_mean) for x, r in zip(xs, group, strict=True)]
        if method == SYNC_METHOD and any(g is not None for _, g in globals_):
            gx = [x for x, g in globals_ if g is not None]
            gy = [g * US_PER_S for _, g in globals_ if g is not None]
            ax.plot(
                gx, gy, linewidth=1.0, color=GLOBAL_COLOR, linestyle="--",
                label=GLOBAL_LABEL + suffix,
            )  # fmt: skip
    if axis == "size":
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
        ax.set_xlabel("message size, bytes")
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("processes")
    means = [r.mean for r in results if not math.isnan(r.mean)]
    # A log scale only helps over a decade or more; below that it hides the labels.
    if means and min(means) > 0 and max(means) / min(means) >= LOG_SCALE_MIN_RATIO:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        # Minor labels help over a decade or two; over more they crowd the axis.
        if max(means) / min(means) < 100:
            ax.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
        else:
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
    ax.set_ylabel("time, µs")
    ax.grid(True, which="major", alpha=0.3)


def _panel_grid(panels: int) -> tuple[Figure, np.ndarray]:
    """A figure of ``panels`` panels, PANEL_COLUMNS to a row."""
    columns = min(PANEL_COLUMNS, panels)
    rows = math.ceil(panels / columns)
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(PANEL_WIDTH_IN * columns, PANEL_HEIGHT_IN * rows),
        squeeze=False,
        layout="constrained",
    )
    return fig, axes


def time_vs_size_figure(run: BenchRun) -> Figure | None:
    """One panel per operation that swept sizes or process counts; None if none did."""
    swept = [(op, run.for_op(op)) for op in run.ops()]
    swept = [(op, rs) for op, rs in swept if x_axis_of(rs) != "point"]
    if not swept:
        return None
    fig, axes = _panel_grid(len(swept))
    for ax, (op, results) in zip(axes.flat, swept, strict=False):
        _plot_series(ax, results, x_axis_of(results))
        ax.set_title(op)
    for ax in list(axes.flat)[len(swept) :]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in list(axes.flat)[1 : len(swept)]:
        for h, lbl in zip(*ax.get_legend_handles_labels(), strict=True):
            if lbl not in labels:
                handles.append(h)
                labels.append(lbl)
    fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=8)
    return fig


def point_ops_figure(run: BenchRun) -> Figure | None:
    """Operations measured at a single (size, nprocs): a bar per method, CI as error bars."""
    points = [(op, run.for_op(op)) for op in run.ops()]
    points = [(op, rs) for op, rs in points if x_axis_of(rs) == "point"]
    if not points:
        return None
    methods = list(dict.fromkeys(r.method for _, rs in points for r in rs))
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.2 * len(points) + 2), 3.2), layout="constrained")
    for m_index, method in enumerate(methods):
        xs, heights, errs = [], [], []
        for p_index, (_op, results) in enumerate(points):
            chosen = [r for r in results if r.method == method]
            if not chosen:
                continue
            r = chosen[0]
            xs.append(p_index + (m_index - (len(methods) - 1) / 2) * width)
            heights.append(r.mean * US_PER_S)
            errs.append(r)
        style = method_style(method)
        ax.bar(
            xs,
            heights,
            width=width,
            color=style["color"],
            label=style["label"],
            yerr=_yerr(errs),
            capsize=3,
        )
    ax.set_xticks(range(len(points)), [op for op, _ in points])
    ax.set_ylabel("time, µs")
    ax.grid(True, axis="y", alpha=0.3)
    fig.legend(loc="outside upper center", ncol=len(methods), fontsize=8)
    return fig


def loop_ratio_figure(pairs: Sequence[LoopVsSync]) -> Figure | None:
    """Loop mean / synchronized mean vs message size, one line per operation."""
    lines: dict[tuple[str, str, int], list[LoopVsSync]] = defaultdict(list)
    for p in pairs:
        if p.size > 0 and not math.isnan(p.ratio) and p.ratio > 0:
            lines[(p.op, p.loop_method, p.nprocs)].append(p)
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.8), layout="constrained")
    several_nprocs = len({k[2] for k in lines}) > 1
    for (op, loop_method, nprocs), group in lines.items():
        group.sort(key=lambda p: p.size)
        label = op if loop_method == "loop" else f"{op} ({loop_method})"
        if several_nprocs:
            label += f", {nprocs} ranks"
        ax.plot(
            [p.size for p in group],
            [p.ratio for p in group],
            marker=method_style(loop_method)["marker"],
            markersize=4,
            label=label,
        )
    ratios = [p.ratio for group in lines.values() for p in group]
    if max(ratios) / min(ratios) > LOG_SCALE_MIN_RATIO:
        # Ratios far below and above 1 are equally far from it on a log axis.
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.axhline(1.0, color="#444", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(format_bytes))
    ax.set_xlabel("message size, bytes")
    ax.set_ylabel("loop / synchronized")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    return fig


def launches_figure(results: Sequence[BenchResult]) -> Figure | None:
    """Every launch of a few synchronized results in run order (the seed's Fig. 6 view).

    Valid launches are dots, invalid ones (late start or overrun) crosses; the
    dashed line is the reported mean of the valid launches after trimming.
    """
    chosen = [r for r in results if r.raw is not None and r.raw.local_s]
    if not chosen:
        return None
    fig, axes = _panel_grid(len(chosen))
    for ax, r in zip(axes.flat, chosen, strict=False):
        assert r.raw is not None
        index = range(len(r.raw.local_s))
        for valid, style in (
            (True, {"color": METHOD_STYLE["sync"]["color"], "marker": "o", "label": "valid"}),
            (False, {"color": "#c62828", "marker": "x", "label": "invalid"}),
        ):
            xs = [i for i in index if r.raw.valid[i] is valid]
            ys = [r.raw.local_s[i] * US_PER_S for i in xs]
            if xs:
                ax.scatter(xs, ys, s=10, linewidths=0.8, **style)
        if not math.isnan(r.mean):
            ax.axhline(r.mean * US_PER_S, color="#444", linestyle="--", linewidth=0.8, label="mean")
        times = [t for t in r.raw.local_s if t > 0]
        if times and max(times) / min(times) >= LOG_SCALE_MIN_RATIO:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_title(f"{r.op}, {format_bytes(r.size)} B, {r.nprocs} ranks", fontsize=9)
        ax.set_xlabel("launch")
        ax.set_ylabel("local time, µs")
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(chosen) :]:
        ax.set_visible(False)
    handles, labels = [], []
    for ax in list(axes.flat)[: len(chosen)]:
        for h, lbl in zip(*ax.get_legend_handles_labels(), strict=True):
            if lbl not in labels:
                handles.append(h)
                labels.append(lbl)
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8)
    return fig
