"""Build a job's digest: load, analyze, cluster, export, report.

``build_digest(db, job, out_dir)`` writes into ``out_dir``:
report.html (self-contained), digest.json, vectors.csv / .parquet / .arff,
and returns a :class:`Digest` that ``hushmon run`` prints from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from hushmon import __version__, jsonio
from hushmon.digest import plots
from hushmon.digest.agent_cpu import attach_agent_cpu
from hushmon.digest.fabric import load_fabric
from hushmon.digest.factors import FACTORS, app_timeline, parameters, run_factors
from hushmon.digest.factors.base import SEVERITIES, Finding, Skipped
from hushmon.digest.factors.roofline import attach_ceilings
from hushmon.digest.factors.work import work_matrix
from hushmon.digest.jobdata import JobData, load_job
from hushmon.digest.phase_report import phase_section
from hushmon.digest.phases import Phases, find_phases
from hushmon.digest.resolution import RAW, Resolution
from hushmon.digest.roofline_report import roofline_section
from hushmon.digest.scope import Scopes
from hushmon.digest.scope import describe as describe_scopes
from hushmon.digest.sensors import DERIVED
from hushmon.digest.states import States, find_states
from hushmon.digest.vectors import build_vectors, write_arff, write_csv, write_parquet
from hushmon.report.html import Page, escape

# Plotted over time when present, in this order.
KEY_SENSORS = (
    "cpu.user_pct",
    "cpu.system_pct",
    "cpu.iowait_pct",
    "cpu.host_busy_pct",
    "pmu.flops_per_s",
    "network.tx_bytes_per_s",
    "network.rx_bytes_per_s",
    "swap.pages_per_s",
    "vm.major_faults_per_s",
    "disk.bytes_per_s",
    "mem.used_pct",
    "mem.usage_pct",
    "load.load1",
    "gpu.sm_pct",
    "gpu.mem_used_pct",
    "gpu.power_w",
    "gpu.pcie_bytes_per_s",
)
# One heat map (node x period) each, when present.
PER_NODE_SENSORS = (
    "cpu.user_pct",
    "cpu.system_pct",
    "network.tx_bytes_per_s",
    "network.rx_bytes_per_s",
    "pmu.flops_per_s",
    "swap.pages_per_s",
    "mem.usage_pct",
    "gpu.sm_pct",
    "gpu.min_sm_pct",
    "gpu.mem_used_pct",
    "gpu.pcie_used_pct",
)
# Node links listed in the report's network table at most (the busiest).
MAX_LINK_ROWS = 32
# Columns of the correlation matrix, when present and varying.
CORR_SENSORS = (
    *KEY_SENSORS,
    "cpu.idle_pct",
    "pmu.ipc[cpu=total]",
    "pmu.mem_stall_pct[cpu=total]",
    "perf_sw.context_switches_per_s",
    "vm.pgmajfault_per_s",
    "disk.max_busy_pct",
    "loopback.tx_bytes_per_s",
)


@dataclass
class Digest:
    job: str
    out_dir: Path
    report_path: Path
    json_path: Path
    findings: list[Finding]
    skipped: list[Skipped]
    states: States
    nodes: list[str]
    duration_s: float
    sensors: int
    exports: dict[str, Path] = field(default_factory=dict)
    seconds: float = 0.0
    phases: Phases | None = None

    def summary_lines(self) -> list[str]:
        lines = [
            f"job {self.job}: {len(self.nodes)} node(s), {self.duration_s:.0f} s, "
            f"{self.sensors} sensors, {len(self.states.states)} state(s)"
        ]
        if not self.findings:
            lines.append("no factor limiting scalability was found in the monitoring data")
        for f in sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity)):
            cost = f" {f.loss.words()}" if f.loss is not None else ""
            lines.append(f"[{f.severity}] {f.title}: {f.hint}{cost}")
        for s in self.skipped:
            lines.append(f"(skipped {s.factor}: {s.detail})")
        if self.phases is not None and self.phases.several:
            lines.extend(self.phases.lines())
        lines.append(f"report: {self.report_path}")
        return lines


def _job_sensor_rows(job: JobData) -> list[dict[str, Any]]:
    rows = []
    for s in job.sensors:
        st = job.stats[s]
        node_means = job.node_means.get(s)
        with np.errstate(all="ignore"):
            spread = (
                float(np.nanstd(node_means) / abs(np.nanmean(node_means)))
                if node_means is not None and np.nanmean(node_means) != 0
                else float("nan")
            )
        # a binned job's extremes: its smallest and largest sample, not a bin mean's
        lo, hi = job.extremes.get(s, (float(np.nanmin(st.min)), float(np.nanmax(st.max))))
        rows.append(
            {
                "name": s,
                "derived": s in DERIVED,
                "min": lo,
                "avg": float(np.nanmean(st.avg)),
                "max": hi,
                "nodes": int(st.nodes.max()),
                "node_spread_cv": spread,
                # mean over the job per node, in the order of digest.json's "nodes"
                "node_means": [
                    None if not np.isfinite(v) else float(f"{v:.6g}")
                    for v in (node_means if node_means is not None else [])
                ],
            }
        )
    return rows


def _correlation(job: JobData) -> tuple[list[str], np.ndarray]:
    names = []
    cols = []
    for s in CORR_SENSORS:
        if not job.has(s):
            continue
        v = job.stats[s].avg
        ok = np.isfinite(v)
        if ok.sum() < 3 or np.nanstd(v) == 0:
            continue
        names.append(s)
        cols.append(np.where(ok, v, np.nanmean(v)))
    if len(cols) < 2:
        return names, np.empty((0, 0))
    return names, np.corrcoef(np.vstack(cols))


def attach_fabric(data: JobData, topology: Path | None, previous: Path | None) -> None:
    """Look up the racks (Slurm's topology.conf) for the analyzers."""
    data.fabric_info = load_fabric(
        topology, dict(parameters()["fabric"]), int(data.times_ns[0]), previous
    )


def build_digest(
    db_path: Path,
    job: str,
    out_dir: Path,
    topology: Path | None = None,
    max_bins: int | None = None,
) -> Digest:
    """Analyze ``job`` from the store at ``db_path``; write the report into ``out_dir``.

    ``topology``: Slurm's topology.conf (default: looked for, see hushmon.digest.fabric).
    ``max_bins``: a job with more periods is read as per-node bins (default:
    ``[resolution] max_bins`` in factors/parameters.toml).
    """
    started = time.perf_counter()
    data = load_job(Path(db_path), job, max_bins)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / "digest.json"
    attach_fabric(data, topology, previous if previous.exists() else None)
    attach_agent_cpu(data, Path(db_path))  # hushmon's own CPU time, for the energy factor
    attach_ceilings(data, Path(db_path))  # the probe's roofs, for the roofline factor
    result = run_factors(data)
    scopes = describe_scopes(data)
    states = find_states(data)
    phases = find_phases(data)  # each phase's main limit: the factors on its periods
    vec = build_vectors(data)
    vec.state = states.labels
    exports = {
        "vectors_csv": write_csv(vec, out_dir / "vectors.csv"),
        "vectors_parquet": write_parquet(vec, out_dir / "vectors.parquet"),
        "vectors_arff": write_arff(vec, out_dir / "vectors.arff", f"hushmon-job-{job}"),
    }
    sensor_rows = _job_sensor_rows(data)
    corr_names, corr = _correlation(data)
    digest = Digest(
        job=job,
        out_dir=out_dir,
        report_path=out_dir / "report.html",
        json_path=out_dir / "digest.json",
        findings=result.findings,
        skipped=result.skipped,
        states=states,
        nodes=data.hosts,
        duration_s=data.span_s,
        sensors=len(data.sensors),
        exports=exports,
        phases=phases,
    )
    payload = {
        "hushmon_version": __version__,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "job": job,
        "nodes": data.hosts,
        "start_ns": int(data.times_ns[0]),
        "end_ns": int(data.times_ns[-1]),
        # the job's own periods; a binned job's steps are in "resolution"
        "periods": (data.resolution or _full(data)).periods,
        "period_s": (data.resolution or _full(data)).period_s,
        "duration_s": digest.duration_s,
        "sensors": sensor_rows,
        "states": {
            "k_tried_silhouette": {str(k): v for k, v in states.k_tried.items()},
            "clustered_on": states.sensors,
            "states": [s.to_json() for s in states.states],
        },
        "resolution": {
            **(data.resolution or _full(data)).to_json(),
            "factors": result.data_used,
        },
        "findings": [f.to_json() for f in result.findings],
        "phases": phases.to_json(),
        "skipped": [s.to_json() for s in result.skipped],
        "fabric": data.fabric_info.to_json(data.hosts),
        "scopes": scopes.to_json(),
        "factors": [f.name for f in FACTORS],
        "correlation": {
            "sensors": corr_names,
            "matrix": [[round(float(x), 4) for x in row] for row in corr],
        },
        "exports": {k: p.name for k, p in exports.items()},
    }
    # indented for people up to 64 nodes; beyond, each sensor's node means make
    # it long and json's indenting encoder (pure Python) slow: compact then
    jsonio.write_atomic(digest.json_path, payload, 2 if len(data.hosts) <= 64 else None)
    _report(data, digest, sensor_rows, corr_names, corr, scopes).write(digest.report_path)
    digest.seconds = time.perf_counter() - started
    return digest


def _full(data: JobData) -> Resolution:
    return Resolution(RAW, len(data.times_ns), data.period_s, data.period_s, len(data.times_ns))


def _constant(data: JobData, sensor: str) -> bool:
    """A sensor with one value on every node and period (no swap device: 0)."""
    st = data.stats[sensor]
    lo, hi = np.nanmin(st.min), np.nanmax(st.max)
    return bool(np.isfinite(lo) and lo == hi)


def _finding_html(f: Finding) -> str:
    """A finding: title, severity, the hint, and its evidence as a small table."""
    rows = "".join(
        f"<tr><th class='text'>{escape(k.replace('_', ' '))}</th>"
        f"<td class='text'>{escape(f'{v:.4g}' if isinstance(v, float) else v)}</td></tr>"
        for k, v in f.evidence.items()
    )
    if f.span_s:
        rows += (
            "<tr><th class='text'>longest span</th>"
            f"<td class='text'>{f.span_s[0]:.0f}–{f.span_s[1]:.0f} s from the job's start</td></tr>"
        )
    return (
        f"<div class='finding {escape(f.severity)}'><b>{escape(f.title)}</b>"
        f" <span class='meta'>({escape(f.severity)}, factor {escape(f.factor)})</span><br>"
        f"{escape(f.hint)}{_loss_html(f)}"
        f"<details{' open' if f.severity in ('high', 'medium') else ''}>"
        "<summary>evidence</summary>"
        f"<table class='meta'>{rows}</table></details></div>"
    )


def _loss_html(f: Finding) -> str:
    """What removing the limit would buy, in words a user acts on, with what it assumes."""
    if f.severity == "info":
        return ""
    if f.loss is None:
        return (
            "<p class='meta'><b>Cost:</b> not estimated: "
            f"{escape(f.loss_unknown)}. Severity: {escape(f.severity_rule)}.</p>"
        )
    items = "".join(f"<li>{escape(a)}</li>" for a in f.loss.assumptions)
    return (
        f"<p><b>Cost: removing this would save {escape(f.loss.range_text())} of the run "
        f"time</b> ({escape(f.loss.basis)}), assuming:</p><ul class='meta'>{items}</ul>"
        f"<p class='meta'>Severity {escape(f.severity_rule)}.</p>"
    )


def _network_section(page: Page, data: JobData) -> None:
    """Racks, uplinks and node links: what the network analyzers measured against."""
    from hushmon.digest.factors import links

    info = data.fabric_info
    node_links = links.node_links(data, parameters()["network_bandwidth"])
    if not node_links:
        return
    page.heading("Network: links and racks")
    page.paragraph(f"Racks: {info.describe() if info is not None else 'not looked up'}.")
    rack_stats = [s for s in (links.link_stats(u) for u in links.uplinks(data)) if s is not None]
    fabric = data.fabric
    rows = []
    shown = node_links
    if len(node_links) > MAX_LINK_ROWS:
        # the busiest links: a table of thousands of nodes says less than its top
        def ceiling(link: links.Link) -> float:
            st = links.link_stats(link)
            return -1.0 if st is None else st.ceiling

        shown = sorted(node_links, key=ceiling, reverse=True)[:MAX_LINK_ROWS]
    for link in shown:
        st = links.link_stats(link)
        rows.append(
            (
                link.nodes[0],
                (fabric.leaf_of(link.nodes[0]) if fabric is not None else None) or "?",
                "–" if link.capacity is None else f"{link.capacity * 8 / 1e6:g}",
                link.source_kind,
                "–" if st is None else f"{st.ceiling / 1e6:.1f}",
                "–" if st is None or st.utilization is None else f"{100 * st.utilization:.0f}",
            )
        )
    sources = sorted({f"{link.source_kind}: {link.source}" for link in node_links})
    page.paragraph("Node links' capacity: " + "; ".join(sources[:8]) + ".", "meta")
    if len(shown) < len(node_links):
        page.paragraph(
            f"The {len(shown)} busiest of {len(node_links)} node links (highest ceiling).", "meta"
        )
    page.table(
        [
            "node",
            "rack",
            "link Mbit/s",
            "capacity from",
            "ceiling MB/s (message periods)",
            "% of capacity",
        ],
        rows,
        text_columns=(0, 1, 2, 3, 4, 5),
    )
    if rack_stats:
        page.table(
            [
                "uplink",
                "Mbit/s",
                "capacity from",
                "rack sends MB/s (upper bound)",
                "% of capacity",
                "stayed in rack, at least",
            ],
            [
                (
                    s.link.name,
                    f"{(s.link.capacity or 0) * 8 / 1e6:g}",
                    s.link.source,
                    f"{s.ceiling / 1e6:.1f}",
                    "–" if s.utilization is None else f"{100 * s.utilization:.0f}",
                    f"{s.stayed_share:.0%}",
                )
                for s in rack_stats
            ],
            text_columns=(0, 1, 2, 3, 4, 5),
        )
        page.figure(
            plots.link_load([s.link for s in rack_stats], data),
            "Each rack's traffic (transmit = bytes its job nodes sent: an upper bound of what "
            "crossed its uplink) against the uplink's capacity (dashed) and the share counted "
            "as near it (dotted).",
        )


def _scope_section(page: Page, scopes: Scopes) -> None:
    page.heading("Where the numbers come from")
    page.paragraph(scopes.summary() + ".")
    rows: list[tuple[str, str, str]] = []
    for source, names in scopes.node_scoped.items():
        rows.append(("node" if scopes.mode == "node" else "machine", source, _compact(names)))
    if scopes.host_wide:
        rows.append(
            ("host-wide", "the whole machine (tagged scope=host)", _compact(scopes.host_wide))
        )
    page.table(["scope", "source", "sensors"], rows, text_columns=(0, 1, 2))
    derived = [
        (name, d["scope"], ", ".join(d["from"]) or "–") for name, d in scopes.derived.items()
    ]
    if derived:
        page.paragraph(
            "The analyzers read these derived sensors; each is computed from the node's own "
            "series where the node has one, else from the host-wide one:",
            "meta",
        )
        page.table(["derived sensor", "scope", "computed from"], derived, text_columns=(0, 1, 2))


def _compact(names: list[str]) -> str:
    """Sensors grouped by measurement.field: 'net.tx_bytes_per_s[eth0, lo]'."""
    groups: dict[str, list[str]] = {}
    for n in names:
        base, _, tag_text = n.partition("[")
        groups.setdefault(base, []).append(tag_text.rstrip("]").replace(",scope=host", ""))
    parts = []
    for base, tag_list in groups.items():
        shown = [t for t in tag_list if t and t != "scope=host"]
        parts.append(base + (f" [{', '.join(shown)}]" if shown else ""))
    return "; ".join(parts)


def _app_section(page: Page, data: JobData) -> None:
    """The application's own timeline (libhushmon) beside the system sensors
    that move with it most (factor app_timeline)."""
    series = app_timeline.app_series(data)
    if not series:
        return
    shown = dict(sorted(series.items())[:6])
    sensors: list[str] = []
    for y in shown.values():
        for sensor, _rho, _x in app_timeline.correlations(data, y, 3)[:1]:
            if sensor not in sensors:
                sensors.append(sensor)
    page.heading("Application timeline (libhushmon)")
    more = (
        f" ({len(series) - len(shown)} more series not drawn)" if len(series) > len(shown) else ""
    )
    page.figure(
        plots.app_timeline(data, shown, sensors[:3]),
        "What the program reported (slowest rank per period) above the system sensor that moves "
        "most with each series (job average over nodes; factor app_timeline)." + more,
    )


def _periods_text(data: JobData) -> str:
    res = data.resolution or _full(data)
    text = f"{res.periods} periods of {res.period_s:g} s"
    return text + (f", read as {res.steps} bins of {res.bin_s:g} s" if res.binned else "")


def _resolution_text(data: JobData) -> str:
    res = data.resolution
    if res is None or res.source == RAW:
        return "every period of every node (raw data)"
    return f"{res.steps} time steps: {res.note()}"


def _report(
    data: JobData,
    digest: Digest,
    sensor_rows: list[dict[str, Any]],
    corr_names: list[str],
    corr: np.ndarray,
    scopes: Scopes,
) -> Page:
    page = Page(f"hushmon digest — job {data.job}")
    start = datetime.fromtimestamp(data.times_ns[0] / 1e9, UTC)
    hosts = ", ".join(data.hosts[:12]) + (" …" if len(data.hosts) > 12 else "")
    page.meta(
        [
            ("job", data.job),
            ("nodes", f"{len(data.hosts)}: {hosts}"),
            ("start (UTC)", start.isoformat(timespec="seconds")),
            (
                "duration",
                f"{digest.duration_s:.0f} s ({_periods_text(data)})",
            ),
            (
                "sensors",
                f"{len(data.sensors)} ({len(data.base_names)} measured, "
                f"{len(data.sensors) - len(data.base_names)} derived)",
            ),
            ("resolution", _resolution_text(data)),
            ("racks", data.fabric_info.describe() if data.fabric_info else "not looked up"),
            ("sensor scope", scopes.summary()),
            ("hushmon", __version__),
        ]
    )
    page.heading("Diagnosis")
    ranked = sorted(digest.findings, key=lambda f: SEVERITIES.index(f.severity))
    serious = [f for f in ranked if f.severity in ("high", "medium")]
    verdict = (
        f"Main limit: {serious[0].title.lower()}."
        if serious
        else "No factor limiting scalability stands out in the monitoring data."
    )
    page.paragraph(verdict, "verdict")
    for f in ranked:
        page.raw_html(_finding_html(f))
    if digest.skipped:
        page.heading("Analyzers that could not answer", 3)
        page.table(
            ["factor", "reason", "detail"],
            [(s.factor, s.reason.value, s.detail) for s in digest.skipped],
            text_columns=(0, 1, 2),
        )

    _network_section(page, data)
    present = [s for s in KEY_SENSORS if data.has(s) and not _constant(data, s)]
    constant = [
        f"{s} = {float(np.nanmax(data.stats[s].max)):g}"
        for s in KEY_SENSORS
        if data.has(s) and _constant(data, s)
    ]
    if present:
        page.heading("Sensors over time (min / average / max across nodes)")
        page.figure(
            plots.band(data, present),
            "Band = range across nodes per period; line = average over nodes."
            + (f" Constant over the job, not drawn: {', '.join(constant)}." if constant else ""),
        )
    _app_section(page, data)
    roofline_section(page, data)
    page.heading("Per node")
    for s in PER_NODE_SENSORS:
        if data.has(s) and not _constant(data, s):
            inputs = data.derived_inputs.get(s, [s])
            page.figure(
                plots.per_node(data, s),
                f"{s} per node and period ({DERIVED[s].description if s in DERIVED else s}; "
                f"from {', '.join(inputs)}).",
            )

    if digest.phases is not None:
        phase_section(page, digest.phases)
    st = digest.states
    page.heading("States")
    k_text = ", ".join(f"k={k}: {v:.2f}" for k, v in st.k_tried.items()) or "too few periods"
    page.paragraph(
        f"k-means on the per-period vectors ({len(st.sensors)} varying sensors, scaled); "
        f"k chosen by the mean silhouette ({k_text}); "
        f"{len(st.states)} state(s)."
    )
    page.figure(plots.states_timeline(data, st), "State of the job in each period.")
    page.table(
        ["state", "share of time", "periods", "description"],
        [(f"S{s.id}", f"{s.share:.1%}", s.periods, s.description) for s in st.states],
        text_columns=(0, 3),
    )

    page.heading("Dependencies")
    if data.has("network.tx_bytes_per_s") and data.has("network.rx_bytes_per_s"):
        page.figure(
            plots.scatter_grid(
                data, "network.rx_bytes_per_s", "network.tx_bytes_per_s", st, ("min", "avg", "max")
            ),
            "Transmit vs receive per period (seed 001, Figs. 5-7): a saturated link shows "
            "min/max bounded by constants and averages moving against each other.",
        )
    work = work_matrix(data)
    if (
        work is not None
        and data.has("swap.pages_per_s")
        and not _constant(data, "swap.pages_per_s")
    ):
        page.figure(
            plots.scatter_grid(data, "swap.pages_per_s", work[0], st, ("avg",)),
            f"Swap activity vs {work[0]} per period, colored by state (seed 001, Fig. 11).",
        )
    if work is not None and data.has("disk.bytes_per_s"):
        page.figure(
            plots.scatter_grid(data, "disk.bytes_per_s", work[0], st, ("avg",)),
            f"Disk traffic vs {work[0]} per period, colored by state.",
        )
    if len(corr_names) >= 2:
        page.figure(
            plots.correlation(corr_names, corr),
            "Correlation of the across-node averages over the job's periods.",
        )

    _scope_section(page, scopes)
    page.heading("All sensors (job summary)")
    page.table(
        ["sensor", "min", "average", "max", "nodes", "node spread (CV)"],
        [
            (
                r["name"] + (" *" if r["derived"] else ""),
                r["min"],
                r["avg"],
                r["max"],
                r["nodes"],
                r["node_spread_cv"],
            )
            for r in sensor_rows
        ],
    )
    page.paragraph("* derived from measured sensors (hushmon.digest.sensors).", "meta")
    page.heading("Files")
    page.raw_html(
        "<ul>"
        + "".join(
            f"<li><code>{escape(p.name)}</code></li>"
            for p in [digest.json_path, *digest.exports.values()]
        )
        + "</ul>"
    )
    return page
