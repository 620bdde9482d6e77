"""Report sections about repeatability and the tools users compare against.

- passes: each point's median over ``--passes`` with its interval, the
  spread between passes and the points whose passes disagree;
- invalid launches by cause, per synchronized point;
- the familiar procedures (OSU 7.x, IMB-MPI1) next to the synchronized
  method, with the systematic differences between them measured.
"""

from __future__ import annotations

import math
from collections import defaultdict

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from hushmon.bench.plots import format_bytes, method_style
from hushmon.bench.results import INVALID_CAUSES, SYNC_METHOD, BenchPoint, BenchResult, BenchRun
from hushmon.report.html import Page

CAUSE_LABELS = {
    "stage_start_late": "stage start late",
    "previous_launch_late": "previous launch late",
    "woke_late": "woke late",
    "overrun": "overrun",
    "wide_window": "wide window",
}
# Rooted operations: back-to-back loops let successive calls overlap.
ROOTED = {"bcast", "reduce", "gather", "gatherv", "scatter", "scatterv"}


def _us(seconds: float) -> str:
    return "–" if math.isnan(seconds) else f"{seconds * 1e6:.3f}"


def _pct(share: float) -> str:
    return "–" if math.isnan(share) else f"{share * 100:.1f}"


def spread_figure(points: tuple[BenchPoint, ...]) -> Figure | None:
    """Spread between passes ((max - min) / median, %) vs size, one panel per op."""
    by_op: dict[str, list[BenchPoint]] = defaultdict(list)
    for p in points:
        if p.size > 0 and not math.isnan(p.spread):
            by_op[p.op].append(p)
    if not by_op:
        return None
    ops = list(by_op)
    fig, axes = plt.subplots(
        1, len(ops), figsize=(3.5 * len(ops), 2.8), squeeze=False, layout="constrained"
    )
    for ax, op in zip(axes.flat, ops, strict=True):
        by_method: dict[str, list[BenchPoint]] = defaultdict(list)
        for p in by_op[op]:
            by_method[p.method].append(p)
        for method, pts in by_method.items():
            pts.sort(key=lambda p: p.size)
            style = method_style(method)
            ax.plot(
                [p.size for p in pts],
                [p.spread * 100 for p in pts],
                marker=style["marker"],
                color=style["color"],
                label=method,
                markersize=4,
            )
        ax.set_xscale("log", base=2)
        # One disturbed pass can spread a point by 1000 %: keep the rest readable.
        ax.set_yscale("symlog", linthresh=10)
        ax.xaxis.set_major_formatter(lambda v, _pos: format_bytes(v))
        ax.set_title(op)
        ax.set_xlabel("size, B")
        ax.set_ylabel("spread between passes, %")
        ax.legend(fontsize=7)
    return fig


def passes_section(page: Page, run: BenchRun) -> None:
    if run.passes < 2 or not run.points:
        return
    page.heading(f"Repeatability over {run.passes} passes", 2)
    flagged = [p for p in run.points if p.disagree]
    share = run.meta.params.get("disagree_share", 0.25)
    if flagged:
        page.finding(
            "medium",
            f"passes disagree at {len(flagged)} of {len(run.points)} points",
            "Their pass values fall into groups more than "
            f"{float(share):.0%} of the median apart (a pass disturbed as a whole, or a bimodal "
            "operation): "
            + ", ".join(f"{p.op}/{format_bytes(p.size)}/{p.method}" for p in flagged[:10]),
        )
    else:
        page.finding("low", "the passes agree at every point", f"no gap above {float(share):.0%}")
    fig = spread_figure(run.points)
    if fig is not None:
        page.figure(
            fig,
            "Spread between passes, (max - min) / median. Each pass ran every point in its own "
            "shuffled order after a fresh clock sync, so this is the run-to-run variation a "
            "single run's CI does not show.",
        )
    rows = []
    for p in run.points:
        rows.append(
            [
                p.op,
                p.size,
                p.nprocs,
                p.method,
                sum(1 for v in p.pass_values if not math.isnan(v)),
                _us(p.median),
                f"{_us(p.ci_low)} – {_us(p.ci_high)}",
                "–" if math.isnan(p.ci_level) else f"{p.ci_level:.2f}",
                _pct(p.spread),
                " ".join(_us(v) for v in p.pass_values),
                "DISAGREE" if p.disagree else "",
            ]
        )
    page.table(
        [
            "op",
            "size, B",
            "ranks",
            "method",
            "passes",
            "median, µs",
            "interval, µs",
            "coverage",
            "spread, %",
            "each pass, µs",
            "",
        ],
        rows,
        text_columns=(0, 3, 6, 9, 10),
    )


def invalid_causes_section(page: Page, run: BenchRun) -> None:
    """Invalid launches per synchronized point, by cause."""
    rows = []
    source: list[BenchPoint | BenchResult] = [p for p in run.points if p.method == SYNC_METHOD] or [
        r for r in run.results if r.method == SYNC_METHOD
    ]
    for item in source:
        causes = item.invalid_causes
        if not causes:
            continue
        total = item.n_total
        invalid = total - item.n_valid
        rows.append(
            [item.op, item.size, item.nprocs, total, _pct(invalid / total if total else math.nan)]
            + [causes.get(c, 0) for c in INVALID_CAUSES]
        )
    if not rows:
        return
    page.heading("Invalid launches by cause", 2)
    page.paragraph(
        "Synchronized launches rejected, summed over passes. stage start late: the start of a "
        "stage reached a rank after launch 0 was due (t_bcast too small: raised); previous "
        "launch late: a rank was still busy with the launch before (it ran past its window or "
        "was disturbed; one disturbance makes the rest of its stage late); woke late: a rank "
        "was ready but left its wait late (descheduled while spinning); overrun: the launch "
        "ended after its window; wide window: valid, but timed under a window more than "
        "--wide-factor times the narrowest its point used (a disturbed stage had widened it, "
        "and launches after a long idle wait run several times slower here).",
        "meta",
    )
    page.table(
        ["op", "size, B", "ranks", "launches", "invalid, %"]
        + [CAUSE_LABELS[c] for c in INVALID_CAUSES],
        rows,
        text_columns=(0,),
    )


def _by_key(run: BenchRun) -> dict[tuple[str, int, int], dict[str, BenchResult]]:
    out: dict[tuple[str, int, int], dict[str, BenchResult]] = defaultdict(dict)
    for r in run.results:
        out[r.key][r.method] = r
    return out


def _figure_of(run: BenchRun, r: BenchResult) -> float:
    """A point's figure: the median over passes where there are several."""
    for p in run.points:
        if p.key == (r.op, r.size, r.nprocs, r.method):
            return p.median
    return r.mean


def _ratio(a: float, b: float) -> str:
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return "–"
    return f"{a / b:.2f}"


def tools_section(page: Page, run: BenchRun) -> None:
    """OSU / IMB procedures next to the synchronized method."""
    keyed = _by_key(run)
    rows = []
    for key, methods in keyed.items():
        if not ({"osu", "imb"} & methods.keys()):
            continue
        sync = methods.get(SYNC_METHOD)
        osu = methods.get("osu")
        imb = methods.get("imb")
        sync_s = _figure_of(run, sync) if sync else math.nan
        osu_avg = _figure_of(run, osu) if osu else math.nan
        osu_max = osu.max if osu else math.nan
        imb_avg = _figure_of(run, imb) if imb else math.nan
        loop = methods.get("loop")
        loop_b = methods.get("loop_barrier")
        overlap = _ratio(loop.mean, loop_b.mean) if loop and loop_b and key[0] in ROOTED else "–"
        rows.append(
            [
                key[0],
                key[1],
                key[2],
                _us(sync_s),
                _us(osu_avg),
                _us(osu.min if osu else math.nan),
                _us(osu_max),
                _us(imb_avg),
                _ratio(osu_avg, sync_s),
                _ratio(osu_max, osu_avg),
                _ratio(imb_avg, sync_s),
                overlap,
            ]
        )
    if not rows:
        return
    page.heading("OSU / IMB procedures vs the synchronized method", 2)
    page.paragraph(
        "The OSU 7.x and IMB-MPI1 procedures as hushmon-bench reproduces them (--method osu, "
        "imb; docs/bench.md) beside the synchronized method (median over passes where there "
        "are several). Systematic differences: OSU and IMB average the ranks' own means while "
        "the synchronized time is the slowest rank's (osu max/avg measures that averaging); "
        "each of their calls starts when a rank leaves the barrier before it, and ranks leave "
        "a barrier at different instants (barrier skew: the late leaver's partner waits inside "
        "the call, so the rank means differ); they reuse one buffer unless told otherwise "
        "(cache); and back-to-back loops let rooted calls overlap (loop / loop_barrier).",
        "meta",
    )
    page.table(
        [
            "op",
            "size, B",
            "ranks",
            "sync, µs",
            "OSU avg, µs",
            "OSU min, µs",
            "OSU max, µs",
            "IMB t_avg, µs",
            "OSU avg / sync",
            "OSU max / avg",
            "IMB / sync",
            "loop / loop_barrier (rooted)",
        ],
        rows,
        text_columns=(0,),
    )
