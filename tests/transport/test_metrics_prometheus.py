"""``hushmon metrics`` scraped by a real Prometheus (Debian ``prometheus``):
job 42's summaries come from the real reducers, PromQL returns what the
top reducer published; the agents' own cost per node; the text format
checked by promtool and the OpenMetrics one by Prometheus itself."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from livetraffic import JOB
from metricsite import (
    COST_CPU_US,
    COST_DROPPED_BATCHES,
    COST_NODES,
    COST_RSS,
    KNOWN_JOB,
    ODD_METRIC,
    PROMETHEUS,
    PROMTOOL,
    Site,
    forward_to_victoria,
    get,
    newest_job_period,
    promql,
    start_site,
    stop_site,
    wait_for,
)

from hushmon.metrics import dashcheck
from hushmon.metrics.dashboards import DASHBOARDS
from hushmon.metrics.dashboards import render as render_dashboard
from hushmon.paths import build_bin_dir


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if PROMETHEUS is None:
        pytest.skip("prometheus not installed: run 'make deps' (Debian prometheus)")
    bin_dir = build_bin_dir()
    if not (bin_dir / "hushmon-reduce").exists():
        pytest.fail(f"{bin_dir}/hushmon-reduce missing: run 'make' before the tests")
    site, server, traffic = start_site(tmp_path_factory.mktemp("metrics"), bin_dir)
    try:
        # job 42 scraped with its 4 nodes, then the traffic stops: its last
        # summary stays, and what Prometheus holds can be compared with it
        wait_for(
            "job 42 in Prometheus with 4 nodes",
            lambda: any(
                r["value"][1] == "4"
                for r in promql(site.prom_url, f'hushmon_job_nodes{{jobid="{JOB}"}}')
            ),
            timeout_s=60,
        )
        time.sleep(3)  # a few periods with the app metric
        # ... and what the tests below read, however long a loaded machine
        # takes to bring it: the app metric of all 4 ranks, the idle alert
        wait_for(
            "job 42's app metric over 4 ranks in Prometheus",
            lambda: any(
                r["value"][1] == "4"
                for r in promql(
                    site.prom_url, f'hushmon_job_app_ranks{{jobid="{JOB}",metric="iter_s"}}'
                )
            ),
            timeout_s=60,
        )
        wait_for(
            "job 42's idle alert in Prometheus",
            lambda: promql(site.prom_url, f'hushmon_job_alert{{jobid="{JOB}"}}'),
            timeout_s=60,
        )
        traffic.stop()
        yield site
    finally:
        stop_site(site, server, traffic)


def _value(site: Site, query: str) -> float:
    result = promql(site.prom_url, query)
    assert len(result) == 1, (query, result)
    return float(result[0]["value"][1])


def test_job_figures_in_promql_are_what_the_top_reducer_published(site: Site) -> None:
    time_ns, sensors = newest_job_period(site.nats_url, JOB)
    # the last summary scraped: its period's timestamp in Prometheus
    wait_for(
        "the last period scraped",
        lambda: (
            _value(site, f'hushmon_job_period_timestamp_seconds{{jobid="{JOB}"}}') == time_ns / 1e9
        ),
    )
    cpu = sensors["cpu,cpu=total,scope=host user_pct"]
    for stat, want in (("avg", cpu.mean), ("min", cpu.min), ("max", cpu.max)):
        got = _value(site, f'hushmon_job_cpu_user_percent{{jobid="{JOB}",stat="{stat}"}}')
        assert math.isclose(got, want, rel_tol=1e-12), (stat, got, want)
    rx = max(
        (s for k, s in sensors.items() if k.startswith("net,iface=eth0 rx_bytes_per_s")),
        key=lambda s: s.max,
    )
    got = _value(site, f'hushmon_job_network_receive_bytes_per_second{{jobid="{JOB}",stat="max"}}')
    assert got == rx.max  # eth0, never lo's 9e9
    # the application metric over ranks: 4 ranks, mean of their means
    ranks = _value(site, f'hushmon_job_app_ranks{{jobid="{JOB}",metric="iter_s"}}')
    assert ranks == 4
    # a job's series carry no node: the label sets are job, user, stat, metric/phase
    for r in promql(site.prom_url, f'{{__name__=~"hushmon_job_.*",jobid="{JOB}"}}'):
        assert set(r["metric"]) <= {"__name__", "jobid", "user", "stat", "metric", "phase",
                                    "instance", "job", "tag", "rule"}, r["metric"]  # fmt: skip


def test_known_summary_exactly_and_an_odd_name_survives(site: Site) -> None:
    assert _value(site, f'hushmon_job_cpu_user_percent{{jobid="{KNOWN_JOB}",stat="avg"}}') == 30
    assert _value(site, f'hushmon_job_cpu_user_percent{{jobid="{KNOWN_JOB}",stat="min"}}') == 10
    assert _value(site, f'hushmon_job_memory_used_percent{{jobid="{KNOWN_JOB}",stat="max"}}') == 44
    assert _value(site, f'hushmon_job_nodes{{jobid="{KNOWN_JOB}"}}') == 3
    result = promql(site.prom_url, f'hushmon_job_app_value{{jobid="{KNOWN_JOB}",stat="avg"}}')
    assert [r["metric"]["metric"] for r in result] == [ODD_METRIC]
    assert float(result[0]["value"][1]) == 2.0


def test_live_alerts_firing_are_series_and_cleared_ones_are_gone(site: Site) -> None:
    result = promql(site.prom_url, f'hushmon_job_alert{{jobid="{JOB}"}}')
    assert [(r["metric"]["rule"], r["metric"]["tag"], r["value"][1]) for r in result] == [
        ("idle_allocation", "idle_alloc", "1")
    ]


def test_each_agents_own_cost_per_node(site: Site) -> None:
    for host, rack in COST_NODES.items():
        sel = f'{{host="{host}",rack="{rack}"}}'
        assert _value(site, f"hushmon_agent_cycle_cpu_seconds{sel}") == COST_CPU_US[host] / 1e6
        assert _value(site, f"hushmon_agent_resident_memory_bytes{sel}") == COST_RSS[host]
        assert (
            _value(site, f"hushmon_agent_batches_dropped_total{sel}") == COST_DROPPED_BATCHES[host]
        )
        assert _value(site, f"hushmon_agent_samples_dropped_total{sel}") == 5
        share = _value(
            site, f"hushmon_agent_cycle_cpu_seconds{sel} / hushmon_agent_period_seconds{sel}"
        )
        assert math.isclose(share, COST_CPU_US[host] / 1e6)
    # LiveTraffic's nodes publish a hushmon_agent line too (period only)
    hosts = {r["metric"]["host"] for r in promql(site.prom_url, "hushmon_agent_batch_bytes")}
    assert hosts == {"n1", "n2", "n3", "n4", "c1", "c2"}


def test_text_format_passes_promtool_and_openmetrics_ends_with_eof(site: Site) -> None:
    status, ctype, text = get(site.metrics_url)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    if PROMTOOL is not None:
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           timeout=30, check=False)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    body = text.decode()
    assert "# EOF" not in body
    assert "# TYPE hushmon_agent_batches_dropped_total counter" in body
    assert (
        f'metric="{ODD_METRIC.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        in body
    )
    status, ctype, om = get(site.metrics_url, accept="application/openmetrics-text; version=1.0.0")
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    lines = om.decode().splitlines()
    assert lines[-1] == "# EOF" and lines.count("# EOF") == 1
    assert "# TYPE hushmon_agent_batches_dropped counter" in lines
    # every family has HELP and TYPE before its samples
    declared = {m for m in re.findall(r"^# TYPE (\S+) ", om.decode(), re.M)}
    for line in lines:
        if line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            assert name in declared or name.removesuffix("_total") in declared, line
    # Prometheus scraped it as OpenMetrics (it asks for it first) without errors
    up = promql(site.prom_url, 'up{job="hushmon"}')
    assert up and up[0]["value"][1] == "1"


def test_bad_flags_are_one_line(tmp_path: Path) -> None:
    for args, want in (
        (["--url", "nats://127.0.0.1:1"], "cannot reach the NATS server"),
        (["--url", "nats://127.0.0.1:1", "--keep-s", "0"], "--keep-s must be"),
        (["--url", "nats://127.0.0.1:1", "--port", "70000"], "is not a TCP port"),
    ):
        r = subprocess.run([sys.executable, "-m", "hushmon.cli", "metrics", *args],
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
        assert r.returncode != 0 and want in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


# --- the Grafana dashboards of deploy/grafana/ (Grafana itself is not here:
# every panel's query runs against the real Prometheus / VictoriaMetrics) ---


def _check_dashboard(url: str, name: str) -> int:
    queries, problems = dashcheck.check(url, dashcheck.GRAFANA / name)
    assert not problems, "\n".join(problems)
    return queries


def test_dashboard_files_are_what_the_code_renders() -> None:
    for name in DASHBOARDS:
        assert (dashcheck.GRAFANA / name).read_text() == render_dashboard(name), (
            f"deploy/grafana/{name} differs: python -m hushmon.metrics.dashboards deploy/grafana"
        )


def test_every_dashboard_query_returns_data_with_its_legend_labels(site: Site) -> None:
    jobs = _check_dashboard(site.prom_url, "hushmon-jobs.json")
    cost = _check_dashboard(site.prom_url, "hushmon-cost.json")
    assert jobs >= 13 and cost >= 10


def test_the_same_data_reaches_victoriametrics(site: Site, tmp_path: Path) -> None:
    """VictoriaMetrics scrapes hushmon metrics as Prometheus does, and takes the
    raw batches from `hushmon collect --forward-lp`: every dashboard, the
    node view included, returns data there."""
    if not site.vm_url:
        pytest.skip("victoria-metrics not installed: run 'make deps' (Debian victoria-metrics)")
    forward_to_victoria(site, tmp_path / "store.duckdb")
    wait_for(
        "forwarded samples queryable",
        lambda: promql(site.vm_url, 'cpu_user_pct{host="n1",cpu="total"}'),
    )
    wait_for(
        "job 42 scraped by VictoriaMetrics",
        lambda: promql(site.vm_url, f'hushmon_job_nodes{{jobid="{JOB}"}}'),
    )
    for name in DASHBOARDS:
        _check_dashboard(site.vm_url, name)
    # the same job figure in both
    q = f'hushmon_job_cpu_user_percent{{jobid="{KNOWN_JOB}",stat="avg"}}'
    assert float(promql(site.vm_url, q)[0]["value"][1]) == 30


def test_once_prints_one_answer_and_exits(site: Site) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "metrics", "--url", site.nats_url, "--once",
         "--no-node-cost"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f'hushmon_job_nodes{{jobid="{KNOWN_JOB}"}} 3' in r.stdout.splitlines()
    assert "hushmon_agent_" not in r.stdout and "# EOF" not in r.stdout
