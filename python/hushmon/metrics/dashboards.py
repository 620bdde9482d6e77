"""The Grafana dashboards of deploy/grafana/, as data.

``python -m hushmon.metrics.dashboards deploy/grafana`` writes them; a test
checks the files are what this renders, and runs every panel's query
against a real Prometheus (and VictoriaMetrics). Each dashboard takes its
data source as a variable (``ds``, any Prometheus-type source: Prometheus
itself or VictoriaMetrics), so it imports as it is.

- **jobs**: the job series of ``hushmon metrics`` (labels jobid, user,
  stat, metric, phase);
- **nodes**: one node's own samples, as the collector forwards them to
  VictoriaMetrics (``hushmon collect --forward-lp``: the measurement_field
  names of docs/formats.md with the line's tags, ``host`` among them) —
  Prometheus does not take line protocol, so this one needs a
  VictoriaMetrics data source;
- **cost**: hushmon's own cost per node (``hushmon_agent_*`` of
  ``hushmon metrics``) and the exporter's own counts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DS = {"type": "prometheus", "uid": "${ds}"}


def _ds_variable() -> dict[str, Any]:
    return {"name": "ds", "label": "data source", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0}  # fmt: skip


def _query_variable(name: str, metric: str, label: str, multi: bool = True) -> dict[str, Any]:
    text = f"label_values({metric}, {label})"
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": text,
        "query": {"query": text, "refId": f"{name}-values"},
        "refresh": 2,  # on time range change: jobs come and go
        "multi": multi,
        "includeAll": multi,
        "sort": 1,
        "current": {},
        "hide": 0,
    }


def _panel(pid: int, title: str, unit: str, targets: list[tuple[str, str]],
           x: int, y: int, w: int = 12, kind: str = "timeseries") -> dict[str, Any]:  # fmt: skip
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def _grid(panels: list[tuple[str, str, list[tuple[str, str]]]]) -> list[dict[str, Any]]:
    """Two panels a row, in order."""
    return [
        _panel(i + 1, title, unit, targets, x=12 * (i % 2), y=8 * (i // 2))
        for i, (title, unit, targets) in enumerate(panels)
    ]


def _dashboard(uid: str, title: str, variables: list[dict[str, Any]],
               panels: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    return {
        "uid": uid,
        "title": title,
        "tags": ["hushmon"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [_ds_variable(), *variables]},
        "panels": panels,
    }


def _job_sensor(metric: str) -> list[tuple[str, str]]:
    return [(f'{metric}{{jobid=~"$job"}}', "{{jobid}} {{stat}}")]


def jobs() -> dict[str, Any]:
    panels = _grid(
        [
            ("Nodes reporting", "none", [('hushmon_job_nodes{jobid=~"$job"}', "{{jobid}}")]),
            ("CPU user % (min, avg, max over nodes)", "percent",
             _job_sensor("hushmon_job_cpu_user_percent")),
            ("CPU system %", "percent", _job_sensor("hushmon_job_cpu_system_percent")),
            ("Memory used %", "percent", _job_sensor("hushmon_job_memory_used_percent")),
            ("Load (1 min)", "none", _job_sensor("hushmon_job_load1")),
            ("Disk busy % (busiest disk)", "percent", _job_sensor("hushmon_job_disk_busy_percent")),
            ("Network received (busiest interface)", "Bps",
             _job_sensor("hushmon_job_network_receive_bytes_per_second")),
            ("Network sent (busiest interface)", "Bps",
             _job_sensor("hushmon_job_network_transmit_bytes_per_second")),
            ("Application metrics (over ranks)", "none",
             [('hushmon_job_app_value{jobid=~"$job"}', "{{jobid}} {{metric}} {{stat}}")]),
            ("Ranks sending", "none",
             [('hushmon_job_app_ranks{jobid=~"$job",metric!=""}', "{{jobid}} {{metric}}"),
              ('hushmon_job_app_ranks{jobid=~"$job",phase!=""}', "{{jobid}} phase {{phase}}")]),
            ("Application phases (mean duration over ranks)", "s",
             [('hushmon_job_app_phase_seconds{jobid=~"$job"}', "{{jobid}} {{phase}} {{stat}}")]),
            ("Live alerts firing (hushmon alert)", "none",
             [('hushmon_job_alert{jobid=~"$job"}', "{{jobid}} {{tag}}")]),
            ("Summary lag behind the clock", "s",
             [('hushmon_job_lag_seconds{jobid=~"$job"}', "{{jobid}}")]),
        ]
    )  # fmt: skip
    return _dashboard("hushmon-jobs", "hushmon: jobs",
                      [_query_variable("job", "hushmon_job_nodes", "jobid")], panels)  # fmt: skip


def nodes() -> dict[str, Any]:
    h = 'host=~"$host"'
    panels = _grid(
        [
            ("Jobs on the node", "none", [(f"job_active{{{h}}}", "{{host}} job {{job}}")]),
            ("CPU user %", "percent", [(f'cpu_user_pct{{{h},cpu="total"}}', "{{host}}")]),
            ("CPU system %", "percent", [(f'cpu_system_pct{{{h},cpu="total"}}', "{{host}}")]),
            ("Memory used %", "percent", [(f"mem_used_pct{{{h}}}", "{{host}}")]),
            ("Load (1 min)", "none", [(f"load_load1{{{h}}}", "{{host}}")]),
            ("Network received", "Bps",
             [(f'net_rx_bytes_per_s{{{h},iface!="lo"}}', "{{host}} {{iface}}")]),
            ("Network sent", "Bps",
             [(f'net_tx_bytes_per_s{{{h},iface!="lo"}}', "{{host}} {{iface}}")]),
            ("hushmon agent: CPU per cycle", "µs", [(f"hushmon_agent_cpu_us{{{h}}}", "{{host}}")]),
        ]
    )  # fmt: skip
    # every agent writes period_ms each period: the hosts that report
    variables = [_query_variable("host", "hushmon_agent_period_ms", "host")]
    return _dashboard("hushmon-nodes", "hushmon: nodes", variables, panels)


def cost() -> dict[str, Any]:
    sel = 'rack=~"$rack",host=~"$host"'
    share = f"hushmon_agent_cycle_cpu_seconds{{{sel}}} / hushmon_agent_period_seconds{{{sel}}}"
    panels = _grid(
        [
            ("Agent CPU, share of one CPU", "percentunit", [(share, "{{host}}")]),
            ("Agent CPU, 10 costliest nodes", "percentunit", [(f"topk(10, {share})", "{{host}}")]),
            ("Agent resident memory", "bytes",
             [(f"hushmon_agent_resident_memory_bytes{{{sel}}}", "{{host}}")]),
            ("Published per second (batch size / period)", "Bps",
             [(f"hushmon_agent_batch_bytes{{{sel}}} / hushmon_agent_period_seconds{{{sel}}}",
               "{{host}}")]),
            ("Batches dropped before publishing (total)", "none",
             [(f"hushmon_agent_batches_dropped_total{{{sel}}}", "{{host}}")]),
            ("Samples dropped (total)", "none",
             [(f"hushmon_agent_samples_dropped_total{{{sel}}}", "{{host}}")]),
            ("Wake-up lateness", "s", [(f"hushmon_agent_jitter_seconds{{{sel}}}", "{{host}}")]),
            ("Agent CPU per rack (sum of shares)", "percentunit",
             [(f"sum by (rack) ({share})", "{{rack}}")]),
            ("Exporter: summaries read per second", "none",
             [("rate(hushmon_metrics_summaries_total[$__rate_interval])", "{{outcome}}")]),
            ("Exporter: time to build an answer", "s",
             [("hushmon_metrics_render_seconds", "{{instance}}")]),
        ]
    )  # fmt: skip
    variables = [
        _query_variable("rack", "hushmon_agent_period_seconds", "rack"),
        _query_variable("host", 'hushmon_agent_period_seconds{rack=~"$rack"}', "host"),
    ]
    return _dashboard("hushmon-cost", "hushmon: its own cost", variables, panels)


DASHBOARDS = {"hushmon-jobs.json": jobs, "hushmon-nodes.json": nodes, "hushmon-cost.json": cost}


def render(name: str) -> str:
    return json.dumps(DASHBOARDS[name](), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hushmon.metrics.dashboards FOLDER", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    for name in DASHBOARDS:
        (folder / name).write_text(render(name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
