"""The series ``hushmon metrics`` serves, built from the live state.

Job series come from the top reducer's job summaries (the same snapshot as
``hushmon top``, python/hushmon/live/state.py) and carry only ``jobid``
(not ``job``: Prometheus gives every target a ``job`` label of its own),
``user`` (when Slurm knows it) and, where a figure has several,
``stat`` (min, avg, max over the job's nodes) or the application's
``metric``/``phase`` name: never a node, so a job's series do not grow
with its size. Node series (hushmon's own cost) carry ``host`` and
``rack``. The counts per job and per node are in docs/integration.md;
``tests/python/test_metrics_families.py`` checks them.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from hushmon.live.sensors import APP_MEASUREMENTS, KEY_SENSORS, ParsedSensor
from hushmon.metrics.alerts import Alerts
from hushmon.metrics.exposition import Family, Labels
from hushmon.metrics.nodecost import NodeCosts

# A key sensor's label (sensors.py) -> series name and help. A sensor added
# there without a line here still gets a series, named from its label.
KEY_SERIES: dict[str, tuple[str, str]] = {
    "cpu usr": ("hushmon_job_cpu_user_percent", "CPU time in user mode, % of the node"),
    "cpu sys": ("hushmon_job_cpu_system_percent", "CPU time in the kernel, % of the node"),
    "mem used": ("hushmon_job_memory_used_percent", "memory used, % of the node's"),
    "load1": ("hushmon_job_load1", "1-minute load average"),
    "net rx": (
        "hushmon_job_network_receive_bytes_per_second",
        "bytes received per second on the busiest interface (not lo)",
    ),
    "net tx": (
        "hushmon_job_network_transmit_bytes_per_second",
        "bytes sent per second on the busiest interface (not lo)",
    ),
    "disk busy": ("hushmon_job_disk_busy_percent", "busy time of the busiest disk, %"),
}
STATS = ("min", "avg", "max")
# An application may send many names (the agent bounds them per job too):
# at most this many per job are served, the rest counted as left out.
APP_NAMES_PER_JOB = 32
_UNIT_SUFFIX = {"%": "_percent", "B/s": "_bytes_per_second", "s": "_seconds", "": ""}


_SERVED = frozenset(
    {(c.measurement, c.field) for ks in KEY_SENSORS for c in ks.candidates}
    | {(m, f) for m, _tag, f, _unit in APP_MEASUREMENTS}
)


@functools.lru_cache(maxsize=1 << 16)  # a few thousand keys, every period
def served(sensor: ParsedSensor) -> bool:
    """Whether a summary's sensor feeds a served series: the others are not
    read (at 1000 nodes with 2 application ranks a node, 9 in 10 of a job
    summary's sensors are per-rank fields that are not served)."""
    return (sensor.measurement, sensor.field) in _SERVED


def key_series(label: str, unit: str) -> tuple[str, str]:
    known = KEY_SERIES.get(label)
    if known is not None:
        return known
    stem = re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")
    return f"hushmon_job_{stem}{_UNIT_SUFFIX.get(unit, '')}", f"{label} ({unit or 'no unit'})"


def _job_labels(job: str, users: dict[str, str]) -> Labels:
    user = users.get(job)
    return (("jobid", job), ("user", user)) if user else (("jobid", job),)


def job_families(snapshot: dict[str, Any], users: dict[str, str]) -> tuple[list[Family], int]:
    """The job series of a live snapshot, and how many app names were left out."""
    nodes = Family("hushmon_job_nodes", "gauge", "nodes in the job's newest summary")
    period = Family(
        "hushmon_job_period_timestamp_seconds",
        "gauge",
        "the sampling instant of the job's newest summary (Unix time)",
    )
    lag = Family(
        "hushmon_job_lag_seconds", "gauge", "how far the newest summary is behind the clock"
    )
    sensors: dict[str, Family] = {}
    for ks in KEY_SENSORS:
        name, text = key_series(ks.label, ks.unit)
        sensors[ks.label] = Family(name, "gauge", f"{text}: min, avg, max over the job's nodes")
    app = Family(
        "hushmon_job_app_value",
        "gauge",
        "an application metric (libhushmon hm_metric, the period's mean per rank): min, avg, "
        "max over ranks",
    )
    phase = Family(
        "hushmon_job_app_phase_seconds",
        "gauge",
        "an application phase's mean duration per rank: min, avg, max over ranks",
    )
    ranks = Family(
        "hushmon_job_app_ranks", "gauge", "ranks that sent the application metric or phase"
    )
    left_out = 0
    for j in snapshot["jobs"]:
        base = _job_labels(j["job"], users)
        nodes.add(base, len(j["nodes"]))
        period.add(base, j["time_ns"] / 1e9)
        lag.add(base, j["lag_s"])
        for s in j["sensors"]:
            fam = sensors.get(s["label"])
            if fam is not None:
                for stat in STATS:
                    fam.add((*base, ("stat", stat)), s[stat])
        for i, a in enumerate(j["app"]):
            if i >= APP_NAMES_PER_JOB:
                left_out += 1
                continue
            # state.app_metrics names a phase "phase <name>" with unit "s";
            # a metric's unit is always ""
            is_phase = a["unit"] == "s" and a["name"].startswith("phase ")
            fam, key = (phase, "phase") if is_phase else (app, "metric")
            name = a["name"][len("phase ") :] if is_phase else a["name"]
            for stat in STATS:
                fam.add((*base, (key, name), ("stat", stat)), a[stat])
            ranks.add((*base, (key, name)), a["ranks"])
    return [nodes, period, lag, *sensors.values(), app, phase, ranks], left_out


def alert_families(alerts: Alerts, users: dict[str, str]) -> Family:
    """The findings so far: one series per firing live alert."""
    fam = Family(
        "hushmon_job_alert",
        "gauge",
        "1 while a live rule's alert is firing for the job (hushmon alert, hm.alert.<job>)",
    )
    for (job, rule), tag in sorted(alerts.firing.items()):
        fam.add((*_job_labels(job, users), ("tag", tag), ("rule", rule)), 1)
    return fam


def alert_counts(alerts: Alerts) -> Family:
    fam = Family("hushmon_metrics_alerts", "counter", "alert messages read, by what became of them")
    fam.add((("outcome", "taken"),), alerts.messages - alerts.bad)
    fam.add((("outcome", "bad"),), alerts.bad)
    return fam


def node_families(costs: NodeCosts) -> list[Family]:
    """hushmon's own cost per node, from the agents' batches."""
    fams = {
        "cpu": Family(
            "hushmon_agent_cycle_cpu_seconds",
            "gauge",
            "CPU time of the agent's last complete sampling cycle (sources, spool write and "
            "publish); divide by hushmon_agent_period_seconds for the share of one CPU",
        ),
        "period": Family("hushmon_agent_period_seconds", "gauge", "the agent's sampling period"),
        "jitter": Family(
            "hushmon_agent_jitter_seconds", "gauge", "lateness of the agent's last wake-up"
        ),
        "rss": Family(
            "hushmon_agent_resident_memory_bytes", "gauge", "the agent's resident memory"
        ),
        "samples": Family(
            "hushmon_agent_samples_dropped",
            "counter",
            "lines the agent lost since it started (spool bound, failed writes, full batch "
            "buffer) plus periods it skipped",
        ),
        "batches": Family(
            "hushmon_agent_batches_dropped",
            "counter",
            "batches the agent dropped before publishing them, this spool epoch (Hm-Dropped)",
        ),
        "bytes": Family(
            "hushmon_agent_batch_bytes", "gauge", "size of the agent's last published batch"
        ),
        "lines": Family(
            "hushmon_agent_batch_lines", "gauge", "lines in the agent's last published batch"
        ),
        "time": Family(
            "hushmon_agent_last_sample_timestamp_seconds",
            "gauge",
            "sampling instant of the agent's newest hushmon_agent line (Unix time)",
        ),
    }
    for host in sorted(costs.nodes):
        n = costs.nodes[host]
        labels = (("host", n.host), ("rack", n.rack))
        fams["cpu"].add(labels, n.cycle_cpu_s)
        fams["period"].add(labels, n.period_s)
        fams["jitter"].add(labels, n.jitter_s)
        fams["rss"].add(labels, n.rss_bytes)
        fams["samples"].add(labels, n.samples_dropped)
        fams["batches"].add(labels, n.batches_dropped)
        fams["bytes"].add(labels, n.batch_bytes)
        fams["lines"].add(labels, n.batch_lines)
        fams["time"].add(labels, n.time_ns / 1e9 if n.time_ns else None)
    return list(fams.values())


def own_families(
    snapshot: dict[str, Any],
    superseded: int,
    costs: NodeCosts | None,
    app_left_out: int,
    render_s: float,
) -> list[Family]:
    """The exporter's own counts: what it read, refused and left out."""
    summaries = Family(
        "hushmon_metrics_summaries", "counter", "summary messages read, by what became of them"
    )
    taken = snapshot["messages"] - snapshot["bad"] - snapshot["late"] - snapshot["duplicates"]
    for outcome, value in (
        ("taken", taken),
        ("bad", snapshot["bad"]),
        ("late", snapshot["late"]),
        ("duplicate", snapshot["duplicates"]),
        # a newer period came before an answer was asked for: never parsed
        ("superseded", superseded),
    ):
        summaries.add((("outcome", outcome),), value)
    jobs = Family("hushmon_metrics_jobs", "gauge", "jobs served")
    jobs.add((), len(snapshot["jobs"]))
    left = Family(
        "hushmon_metrics_app_names_left_out",
        "gauge",
        f"application names not served (more than {APP_NAMES_PER_JOB} in a job)",
    )
    left.add((), app_left_out)
    out = [summaries, jobs, left]
    if costs is not None:
        batches = Family("hushmon_metrics_batches", "counter", "raw batches read for node costs")
        batches.add((("outcome", "taken"),), costs.batches - costs.bad)
        batches.add((("outcome", "bad"),), costs.bad)
        nodes = Family("hushmon_metrics_nodes", "gauge", "nodes whose cost is served")
        nodes.add((), len(costs.nodes))
        out += [batches, nodes]
    took = Family(
        "hushmon_metrics_render_seconds", "gauge", "time the previous answer took to build"
    )
    took.add((), render_s)
    out.append(took)
    return out
