"""The HTML report and the machine summary of one bench run.

The page answers, in order: can these numbers be trusted (timer check with
the wait patterns, residual clock offset and drift, share of rejected
launches), what did the collectives cost (plots, then tables with the seed's
n_t / n_c / n_s, mean, median, SE, min, max and CI), and how wrong would a
loop-based benchmark have been (loop / synchronized ratio).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hushmon.bench.checks import (
    NULL_TOLERANCE_S,
    RELATIVE_TOLERANCE,
    TRUE_TIME_S,
    LoopVsSync,
    clock_error_s,
    clock_invalid,
    clock_verdict,
    invalid_share,
    loop_vs_sync,
    pattern_checks,
)
from hushmon.bench.plots import (
    format_bytes,
    launches_figure,
    loop_ratio_figure,
    point_ops_figure,
    time_vs_size_figure,
)
from hushmon.bench.repeat import invalid_causes_section, passes_section, tools_section
from hushmon.bench.results import SYNC_METHOD, BenchResult, BenchRun
from hushmon.errors import HushmonError
from hushmon.report.html import Page

US_PER_S = 1e6
# The seed's stop rule: relative standard error of the mean at most 5 %.
RSE_TARGET = 0.05
# The seed's threshold g for "too many invalid launches in a stage".
INVALID_SHARE_WARN = 0.25
# Clock error above this share of the shortest synchronized time makes the
# global times of the shortest operations doubtful.
CLOCK_ERROR_SHARE_WARN = 0.10
LOAD_SLACK_CPUS = 0.5

METHOD_EXPLANATION = (
    "Synchronized method (MPIPerf, seed 002): clocks of all ranks are synchronized to rank 0 "
    "(offset from the minimum round-trip time), rank 0 broadcasts a start time, and every rank "
    "starts launch l of a stage at the same global instant tau_j + l*delta_j. A launch that "
    "starts late or ends after its window is invalid and not used. The time of a launch is the "
    "maximum over ranks of the local time; the global time is the latest end minus the "
    "scheduled start. The lowest and highest valid times (a --trim share at each end, 25 % by "
    "default) are dropped (n_s used of n_c valid of n_t total) before the mean, SE and "
    "Student-t confidence interval are computed. "
    "The loop method (hushmon's) times --loop-iters back-to-back calls after one barrier: "
    "its mean per call can include the wait for the slowest rank of the previous call, or "
    "hide latency where consecutive rooted calls overlap; loop_barrier puts a barrier before "
    "each call and times the calls only. The osu and imb methods follow the procedures of "
    "OSU Micro-Benchmarks 7.x and IMB-MPI1 (each call timed alone between barriers, one "
    "buffer, the mean over ranks of the ranks' means); the section 'Loop vs synchronized' "
    "shows by how much each differs."
)


def us(seconds: float | None) -> float:
    """Seconds to microseconds for display; missing stays NaN (shown as a dash)."""
    if seconds is None:
        return math.nan
    return seconds * US_PER_S


def _fmt_us(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "not reported"
    return f"{seconds * US_PER_S:.3g} µs"


def _fmt_ci(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "–"
    # No-break spaces keep an interval on one line in narrow table cells.
    return f"{low * US_PER_S:.4g}\u00a0–\u00a0{high * US_PER_S:.4g}"


MAX_OFFSETS_LISTED = 8


def _offsets_text(offsets: tuple[float, ...]) -> str:
    if not offsets:
        return "not reported"
    if len(offsets) <= MAX_OFFSETS_LISTED:
        return ", ".join(f"{o * US_PER_S:.3g}" for o in offsets) + " µs"
    return (
        f"{min(offsets) * US_PER_S:.3g} to {max(offsets) * US_PER_S:.3g} µs ({len(offsets)} ranks)"
    )


def meta_items(run: BenchRun, provenance: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    m = run.meta
    mpi = " ".join(
        x for x in (m.mpi_library, f"(MPI {m.mpi_version})" if m.mpi_version else None) if x
    )
    timer = m.timer or "not reported"
    if m.timer_resolution_ns is not None:
        timer += f" (resolution {m.timer_resolution_ns:g} ns)"
    sync = m.sync or "not reported"
    if m.sync_rounds_without_improvement is not None:
        sync += f" (stops after {m.sync_rounds_without_improvement} rounds without a smaller RTT)"
    if m.sync_nodes is not None and m.sync_ranks_pinged is not None:
        # Ranks on one node read one system clock: only one per node is pinged.
        sync += f"; {m.sync_nodes} node(s), {m.sync_ranks_pinged} rank(s) pinged"
    nprocs = m.nprocs if m.nprocs is not None else sorted({r.nprocs for r in run.results})
    items: list[tuple[str, Any]] = [
        ("program", " ".join(x for x in (m.program, m.version) if x) or "not reported"),
        ("MPI library", mpi or "not reported"),
        ("timer", timer),
        ("clock sync", sync),
        ("clock offset after sync", _fmt_us(m.clock_offset_residual_max_s)),
        ("clock offset at the end", _fmt_us(m.clock_offset_residual_end_max_s)),
        ("clock drift", _fmt_us(m.clock_drift_max_s)),
        ("clock offsets to rank 0", _offsets_text(m.clock_offsets_s)),
        (
            "clock sync took",
            f"{m.sync_elapsed_s:.3g} s" if m.sync_elapsed_s is not None else "not reported",
        ),
        ("hosts", ", ".join(m.hosts) or "not reported"),
        ("processes", nprocs),
        ("methods", ", ".join(m.methods or tuple(run.methods()))),
        ("operations requested", m.params.get("ops", "not reported")),
        ("sizes requested", m.params.get("sizes", "not reported")),
        ("started", m.started_at or "not reported"),
    ]
    if provenance:
        for key in (
            "command",
            "mpirun",
            "wall_time_s",
            "exit_code",
            "cpus",
            "load_before",
            "load_after",
            "hushmon_version",
        ):
            if key in provenance:
                value = provenance[key]
                if isinstance(value, list):
                    value = " ".join(str(v) for v in value)
                items.append((key.replace("_", " "), value))
    items.append(("results file", run.source))
    return items


PARAMS_PER_ROW = 4


def _params_table(page: Page, run: BenchRun) -> None:
    """The program's settings (schedule, stop rule, ...) as a compact grid."""
    # ops and sizes are in the run's meta table above; long lists break the grid.
    params = sorted((k, v) for k, v in run.meta.params.items() if k not in ("ops", "sizes"))
    if not params:
        return
    page.heading("Settings of hushmon-bench", 3)
    rows = []
    for start in range(0, len(params), PARAMS_PER_ROW):
        row: list[Any] = []
        for key, value in params[start : start + PARAMS_PER_ROW]:
            row += [key, value]
        row += ["", ""] * (PARAMS_PER_ROW - len(params[start : start + PARAMS_PER_ROW]))
        rows.append(row)
    page.table(
        ["setting", "value"] * PARAMS_PER_ROW, rows, text_columns=tuple(range(2 * PARAMS_PER_ROW))
    )


def _pattern_findings(page: Page, run: BenchRun) -> None:
    for check in pattern_checks(run):
        local = check.mean_s
        glob = check.global_mean_s
        if check.true_s == 0.0:
            detail = (
                f"true time 0; local mean {_fmt_us(local)}, global mean {_fmt_us(glob)} "
                f"(must be under {NULL_TOLERANCE_S * US_PER_S:g} µs)"
            )
        else:
            detail = (
                f"true time {_fmt_us(check.true_s)}; local mean {_fmt_us(local)} "
                f"({check.relative_error(local):+.1%}), global mean {_fmt_us(glob)} "
                f"({check.relative_error(glob):+.1%}); tolerance ±{RELATIVE_TOLERANCE:.0%}"
            )
        clock = check.clock
        if check.passed:
            page.finding(
                "low", f"{check.op} on {check.nprocs} ranks: timer and schedule OK", detail
            )
        elif check.times_passed and clock.valid is False:
            page.finding(
                "high",
                f"{check.op} on {check.nprocs} ranks: right times on clocks that disagree",
                detail + f". But the ranks' clocks disagreed by {_fmt_us(clock.error_s)}, more "
                f"than the {_fmt_us(clock.allowed_s)} this result tolerates: each rank timed "
                "its own launch correctly, yet the ranks did not start together, so the "
                "synchronized times of this run can be off by that much. Not valid.",
            )
        else:
            page.finding(
                "high",
                f"{check.op} on {check.nprocs} ranks is off its known time",
                detail + ". The timer or the clock synchronization cannot be trusted for "
                "short operations; try another --timer.",
            )


def _clock_invalid_finding(page: Page, run: BenchRun) -> bool:
    """The loud one: results measured on clocks that disagreed too much."""
    bad = clock_invalid(run)
    if not bad:
        return False
    judged = sum(1 for r in run.results if clock_verdict(run, r).valid is not None)
    names = ", ".join(f"{r.op}/{format_bytes(r.size)}" for r, _ in bad[:8])
    # The program reports what its check proves; older files only an estimate.
    how = "at least" if run.meta.clock_error_max_s is not None else "about"
    page.finding(
        "high",
        f"{len(bad)} of {judged} synchronized results are NOT VALID: the ranks' clocks disagreed",
        f"The ranks' clocks were {how} {_fmt_us(clock_error_s(run))} apart during the run, "
        "more than these results tolerate (a share of their time, at least the late "
        "tolerance): "
        f"{names}{', ...' if len(bad) > 8 else ''}. Ranks then start a launch at different "
        "instants and the times include that difference. Check the timer (--timer "
        "monotonic is per node; tsc needs an invariant TSC) and re-run.",
    )
    return True


def _clock_findings(page: Page, run: BenchRun) -> None:
    if _clock_invalid_finding(page, run):
        return
    m = run.meta
    errors = [
        e
        for e in (
            m.clock_offset_residual_max_s,
            m.clock_offset_residual_end_max_s,
            m.clock_drift_max_s,
        )
        if e is not None
    ]
    if not errors:
        page.finding(
            "medium",
            "clock error not reported",
            "The results file has no residual clock offset or drift; global times are unverified.",
        )
        return
    # Wait patterns are timer checks (the null one is ~0 by design), not operations.
    shortest = min(
        (
            r.mean
            for r in run.results
            if r.method == SYNC_METHOD and r.mean > 0 and TRUE_TIME_S.get(r.op) is None
        ),
        default=math.nan,
    )
    worst = max(abs(e) for e in errors)
    detail = (
        f"residual offset {_fmt_us(m.clock_offset_residual_max_s)} after sync and "
        f"{_fmt_us(m.clock_offset_residual_end_max_s)} at the end of the run, drift "
        f"{_fmt_us(m.clock_drift_max_s)}; shortest synchronized mean "
        f"{_fmt_us(shortest)}"
    )
    if not math.isnan(shortest) and worst > CLOCK_ERROR_SHARE_WARN * shortest:
        page.finding(
            "medium",
            "clock error is comparable to the shortest times",
            detail + ". Global times of the shortest operations are uncertain by that much.",
        )
    else:
        page.finding("low", "clocks stayed synchronized", detail)


def _load_findings(page: Page, run: BenchRun, provenance: Mapping[str, Any] | None) -> None:
    """A busy machine deschedules ranks: synchronized launches then wait for them."""
    if not provenance or not provenance.get("cpus"):
        return
    loads = [float(provenance[k]) for k in ("load_before", "load_after") if k in provenance]
    if not loads:
        return
    cpus = int(provenance["cpus"])
    nprocs = run.meta.nprocs or max((r.nprocs for r in run.results), default=1)
    # The 1-minute load average after the run counts its own ranks too.
    others = max(loads[0], loads[-1] - nprocs)
    detail = (
        f"1-minute load average {loads[0]:.2f} before and {loads[-1]:.2f} after the run, "
        f"{cpus} CPUs, {nprocs} ranks"
    )
    # Half a CPU of slack: the load average is a smoothed, noisy figure.
    if others + nprocs > cpus + LOAD_SLACK_CPUS:
        page.finding(
            "medium",
            "the machine was busy during the run",
            detail + ". Other processes took CPUs from the ranks: a descheduled rank delays "
            "the others in synchronized launches (times and invalid launches go up), while "
            "the loop method hides it. Re-run on an idle machine for reference numbers.",
        )
    else:
        page.finding("low", "the machine had a CPU for every rank", detail)


def _invalid_findings(page: Page, run: BenchRun) -> None:
    noisy = [
        r for r in run.results if r.method == SYNC_METHOD and invalid_share(r) > INVALID_SHARE_WARN
    ]
    if noisy:
        worst = max(noisy, key=invalid_share)
        page.finding(
            "medium",
            f"{len(noisy)} results rejected more than {INVALID_SHARE_WARN:.0%} of launches",
            f"worst: {worst.op} at {format_bytes(worst.size)} B, {invalid_share(worst):.0%} "
            f"invalid (late start {worst.invalid_late_start}, overrun {worst.invalid_overrun}). "
            "A launch is invalid when a rank starts it late or it overruns its window "
            "(other load on the node, or a window short next to the operation's jitter). "
            "Only valid launches enter the statistics, so they stay correct; the run just "
            "needed more launches.",
        )
    unconverged = [
        r
        for r in run.results
        if r.method == SYNC_METHOD and not math.isnan(r.rse) and r.rse > RSE_TARGET
    ]
    if unconverged:
        page.finding(
            "low",
            f"{len(unconverged)} results stopped at the launch limit above {RSE_TARGET:.0%} RSE",
            "Their confidence intervals are wider; raise the launch limit to tighten them: "
            + ", ".join(f"{r.op}/{format_bytes(r.size)}" for r in unconverged[:8]),
        )


def _loop_findings(page: Page, pairs: list[LoopVsSync]) -> None:
    ratios = [p for p in pairs if not math.isnan(p.ratio)]
    if not ratios:
        return
    worst = max(ratios, key=lambda p: abs(math.log(p.ratio)) if p.ratio > 0 else math.inf)
    ratio_values = sorted(p.ratio for p in ratios)
    median = ratio_values[len(ratio_values) // 2]
    detail = (
        f"{len(ratios)} pairs; median loop/synchronized ratio {median:.3g}; largest deviation "
        f"{worst.ratio:.3g}x for {worst.op} at {format_bytes(worst.size)} B on {worst.nprocs} "
        f"ranks ({_fmt_us(worst.loop.mean)} loop vs {_fmt_us(worst.sync.mean)} synchronized)"
    )
    if abs(worst.ratio - 1.0) > RELATIVE_TOLERANCE:
        page.finding("medium", "the loop method misstates collective times", detail)
    else:
        page.finding("low", "loop and synchronized methods agree within 10 %", detail)


def _clock_cell(run: BenchRun, r: BenchResult) -> str:
    valid = clock_verdict(run, r).valid
    return "–" if valid is None else "ok" if valid else "NOT VALID"


def _result_rows(run: BenchRun, results: Iterable[BenchResult]) -> list[list[Any]]:
    rows = []
    for r in sorted(results, key=lambda r: (r.nprocs, r.size, r.method)):
        invalid = "–"
        if r.invalid_late_start is not None or r.invalid_overrun is not None:
            invalid = f"{r.invalid_late_start or 0} / {r.invalid_overrun or 0}"
        rows.append(
            [
                format_bytes(r.size),
                r.nprocs,
                r.method,
                r.n_total,
                r.n_valid,
                r.n_used,
                us(r.mean),
                us(r.median),
                us(r.se),
                us(r.min),
                us(r.max),
                _fmt_ci(r.ci_low, r.ci_high),
                us(r.global_mean),
                r.rse * 100,
                invalid,
                _clock_cell(run, r),
            ]
        )
    return rows


def _ci_levels(run: BenchRun) -> list[str]:
    return sorted({level for r in run.results for level in r.ci}, key=float)


def _ci_table(page: Page, run: BenchRun) -> None:
    levels = _ci_levels(run)
    if not levels:
        return
    page.heading("Student-t error and confidence intervals", 3)
    page.paragraph(
        "E = t · SE (t: Student's coefficient at confidence level p), the half-width of the "
        "interval, for each level the program reported (µs).",
        "meta",
    )
    rows = []
    for r in run.results:
        row: list[Any] = [r.op, format_bytes(r.size), r.nprocs, r.method]
        for level in levels:
            low, high = r.ci.get(level, (math.nan, math.nan))
            row += [_fmt_ci(low, high), us((high - low) / 2)]
        rows.append(row)
    columns = ["op", "size, B", "ranks", "method"]
    for level in levels:
        columns += [f"CI {float(level):.0%}", f"E {float(level):.0%}"]
    page.table(columns, rows, text_columns=(0, 2, 3, *range(4, 4 + 2 * len(levels), 2)))


def _loop_table(page: Page, pairs: list[LoopVsSync]) -> None:
    order = {op: i for i, op in enumerate(dict.fromkeys(p.op for p in pairs))}
    rows = [
        [
            p.op,
            format_bytes(p.size),
            p.nprocs,
            p.loop_method,
            us(p.sync.mean),
            us(p.sync.global_mean),
            us(p.loop.mean),
            us(p.difference_s),
            p.ratio,
        ]
        for p in sorted(pairs, key=lambda p: (order[p.op], p.loop_method, p.nprocs, p.size))
    ]
    page.table(
        [
            "op",
            "size, B",
            "ranks",
            "loop method",
            "synchronized mean, µs",
            "synchronized global, µs",
            "loop mean, µs",
            "loop − sync, µs",
            "loop / sync",
        ],
        rows,
        text_columns=(0, 1, 3),
    )


MAX_RANK_COLUMNS = 8


def _rank_mean(entry: Mapping[str, Any]) -> float:
    value = entry.get("mean")
    return float(value) if isinstance(value, int | float) else math.nan


def _per_rank_tables(page: Page, run: BenchRun) -> None:
    """Per operation: each rank's mean local time, and which rank was slowest."""
    with_ranks = [r for r in run.results if r.per_rank]
    if not with_ranks:
        return
    page.heading("Per-rank times", 2)
    page.paragraph(
        "Mean local time of each rank in µs (the launch time above is the maximum over "
        "ranks). A rank that is always the slowest is on the algorithm's critical path; "
        f"with more than {MAX_RANK_COLUMNS} ranks only the spread is shown.",
        "meta",
    )
    for op in dict.fromkeys(r.op for r in with_ranks):
        results = sorted(
            (r for r in with_ranks if r.op == op), key=lambda r: (r.nprocs, r.size, r.method)
        )
        width = max(len(r.per_rank) for r in results)
        show_ranks = width <= MAX_RANK_COLUMNS
        columns = ["size, B", "ranks", "method"]
        columns += [f"rank {i}" for i in range(width)] if show_ranks else ["fastest", "slowest"]
        columns += ["slowest rank", "slowest / fastest"]
        rows = []
        for r in results:
            means = {int(e.get("rank", i)): _rank_mean(e) for i, e in enumerate(r.per_rank)}
            finite = {k: v for k, v in means.items() if not math.isnan(v)}
            row: list[Any] = [format_bytes(r.size), r.nprocs, r.method]
            if show_ranks:
                row += [us(means.get(i)) for i in range(width)]
            else:
                row += [
                    us(min(finite.values(), default=None)),
                    us(max(finite.values(), default=None)),
                ]
            if finite and min(finite.values()) > 0:
                slowest = max(finite, key=lambda k: finite[k])
                row += [slowest, max(finite.values()) / min(finite.values())]
            else:
                row += ["–", math.nan]
            rows.append(row)
        page.heading(op, 3)
        page.table(columns, rows, text_columns=(0, 2))


MAX_LAUNCH_PANELS = 6


def _launches_section(page: Page, run: BenchRun) -> None:
    """With --raw: every launch of the synchronized results that had most trouble."""
    with_raw = [r for r in run.results if r.raw is not None and r.method == SYNC_METHOD]
    if not with_raw:
        return
    # The results with the most invalid launches show the schedule at work;
    # ties go to the larger messages.
    shown = sorted(with_raw, key=lambda r: (-(r.n_total - r.n_valid), -r.size, r.op))[
        :MAX_LAUNCH_PANELS
    ]
    fig = launches_figure(shown)
    if fig is None:
        return
    page.heading("Every launch (raw)", 2)
    page.figure(
        fig,
        f"Local time (max over ranks) of each launch in run order, for {len(shown)} of "
        f"{len(with_raw)} synchronized results (those with the most invalid launches). "
        "Crosses are launches that started late or overran their window; they are not used.",
    )


def build_page(run: BenchRun, provenance: Mapping[str, Any] | None = None) -> Page:
    ops = run.ops()
    page = Page("hushmon bench: MPI collective timings")
    page.paragraph(
        f"{len(run.results)} measurements of {len(ops)} operations ({', '.join(ops)}) with "
        f"methods {', '.join(run.methods()) or 'none'}.",
    )
    page.heading("Run", 2)
    page.meta(meta_items(run, provenance))
    _params_table(page, run)

    page.heading("Can these numbers be trusted?", 2)
    if run.meta.simulated_skew_s:
        page.finding(
            "medium",
            "clocks were skewed on purpose",
            f"--simulate-skew-us made rank r's clock read r x {_fmt_us(run.meta.simulated_skew_s)} "
            "ahead, to test the clock synchronization; the timings are still valid if the "
            "offsets above recovered the skew.",
        )
    if run.meta.simulated_drift_ppm:
        page.finding(
            "medium",
            "clocks were made to drift on purpose",
            f"--simulate-drift-ppm made rank r's clock run r x {run.meta.simulated_drift_ppm:g} "
            "ppm fast without telling the sync, to test the clock check: results it did not "
            "flag below are the ones measured while the clocks still agreed.",
        )
    if not run.results:
        page.finding("high", "no results", "The results file holds no measurements.")
    _pattern_findings(page, run)
    _clock_findings(page, run)
    _load_findings(page, run, provenance)
    _invalid_findings(page, run)
    pairs = loop_vs_sync(run)
    _loop_findings(page, pairs)

    sweep = time_vs_size_figure(run)
    points = point_ops_figure(run)
    if sweep is not None or points is not None:
        page.heading("Time of each operation", 2)
    if sweep is not None:
        page.figure(
            sweep,
            "Mean time (µs, log scale) with confidence-interval bars; the dashed line is the "
            "synchronized time on the global clock. Sizes of 0 bytes are in the tables only.",
        )
    if points is not None:
        page.figure(points, "Operations measured at one size and process count (mean, CI bars).")

    if pairs:
        page.heading("Loop vs synchronized: the error the schedule removes", 2)
        ratio_fig = loop_ratio_figure(pairs)
        if ratio_fig is not None:
            page.figure(
                ratio_fig,
                "Ratio of the loop-method mean to the synchronized mean; 1 means no error.",
            )
        _loop_table(page, pairs)

    tools_section(page, run)
    passes_section(page, run)
    invalid_causes_section(page, run)

    page.heading("Results", 2)
    page.paragraph(
        "Times in µs. n_t launches in total, n_c valid, n_s used after trimming; invalid = "
        "late start / overrun; RSE = SE / mean; clock: whether the ranks' clocks agreed "
        "closely enough for the synchronized result to be valid.",
        "meta",
    )
    for op in ops:
        page.heading(op, 3)
        level = {r.ci_level for r in run.for_op(op)}
        ci_name = f"CI {level.pop():.0%}" if len(level) == 1 else "CI"
        page.table(
            [
                "size, B",
                "ranks",
                "method",
                "n_t",
                "n_c",
                "n_s",
                "mean",
                "median",
                "SE",
                "min",
                "max",
                ci_name,
                "global mean",
                "RSE, %",
                "invalid",
                "clock",
            ],
            _result_rows(run, run.for_op(op)),
            text_columns=(0, 2, 15),
        )
    _ci_table(page, run)
    _per_rank_tables(page, run)
    _launches_section(page, run)
    page.heading("Method", 2)
    page.paragraph(METHOD_EXPLANATION, "meta")
    return page


def write_report(
    run: BenchRun, html_path: Path, provenance: Mapping[str, Any] | None = None
) -> Path:
    page = build_page(run, provenance)
    try:
        return page.write(html_path)
    except OSError as exc:
        raise HushmonError(f"cannot write the report {html_path}: {exc.strerror or exc}") from exc


def _nan_to_none(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    return value


def summary(run: BenchRun, report_path: Path | None) -> dict[str, Any]:
    """What ``--json`` prints: where things are, the self-checks and the loop error."""
    return {
        "report": str(report_path) if report_path else None,
        "results_file": run.source,
        "nresults": len(run.results),
        "ops": run.ops(),
        "methods": run.methods(),
        "clock_offset_residual_max_s": run.meta.clock_offset_residual_max_s,
        "clock_drift_max_s": run.meta.clock_drift_max_s,
        "clock_error_max_s": clock_error_s(run),
        "results_clock_invalid": [
            {"op": r.op, "size": r.size, "nprocs": r.nprocs, "allowed_s": v.allowed_s}
            for r, v in clock_invalid(run)
        ],
        "pattern_checks": [
            {
                "op": c.op,
                "nprocs": c.nprocs,
                "true_s": c.true_s,
                "mean_s": _nan_to_none(c.mean_s),
                "global_mean_s": c.global_mean_s,
                "clock_valid": c.clock.valid,
                "passed": c.passed,
            }
            for c in pattern_checks(run)
        ],
        "passes": run.passes,
        "points": [
            {
                "op": p.op,
                "size": p.size,
                "nprocs": p.nprocs,
                "method": p.method,
                "median_s": _nan_to_none(p.median),
                "ci_low_s": _nan_to_none(p.ci_low),
                "ci_high_s": _nan_to_none(p.ci_high),
                "ci_level": _nan_to_none(p.ci_level),
                "spread": _nan_to_none(p.spread),
                "disagree": p.disagree,
                "invalid_rate": _nan_to_none(p.invalid_rate),
                "invalid_causes": dict(p.invalid_causes),
            }
            for p in run.points
        ],
        "loop_vs_sync": [
            {
                "op": p.op,
                "size": p.size,
                "nprocs": p.nprocs,
                "loop_method": p.loop_method,
                "sync_mean_s": _nan_to_none(p.sync.mean),
                "loop_mean_s": _nan_to_none(p.loop.mean),
                "ratio": _nan_to_none(p.ratio),
            }
            for p in loop_vs_sync(run)
        ],
    }
