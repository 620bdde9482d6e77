"""``hushmon metrics`` on a live bed (2 nodes in 2 racks, Slurm,
``--transport nats``): the bed's real agents, leaves, hub and reducers; a
real Prometheus scrapes the endpoint while an MPI job (butterfly, its
``cycle_time_s`` through libhushmon) runs under Slurm. PromQL shows each
agent's own cost per node and the job's series; the shipped dashboards'
queries return data (tests/transport/test_metrics_prometheus.py checks the
same with published batches, and the panels the bed has no data for)."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from bedlib import HUSHMON, bed_unavailable, bed_up
from waiting import wait_until

from hushmon.metrics import dashcheck
from hushmon.paths import REPO_ROOT, build_bin_dir
from hushmon.testbed import livecheck, transport
from hushmon.transport.natsserver import free_port

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

APP = ["--cycles", "40", "--comm-ms", "300", "--compute-ms", "700", "--length", "64K"]
# Panels the bed has no data for: butterfly sends no phases, and no
# `hushmon alert` runs here (the transport test publishes both).
NO_DATA_ON_THE_BED = ("hushmon_job_app_phase_seconds", 'phase!=""', "hushmon_job_alert")


@dataclass
class Bed:
    prom_url: str
    job: str
    nodes: list[str]


def _unavailable() -> str | None:
    reason = bed_unavailable()
    if reason:
        return reason
    for tool in ("nats-server", "prometheus"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/install-deps.sh)"
    if not (build_bin_dir() / "butterfly").exists():
        return f"{build_bin_dir() / 'butterfly'} is not built"
    return None


def _wait(what: str, check: Any, timeout_s: float) -> Any:
    return wait_until(check, what, timeout_s, step_s=0.5)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bool(r.status == 200)
    except OSError:  # refused, reset, or an HTTP error (URLError is an OSError)
        return False


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("metrics-bed")
    with bed_up("--nodes", "2", "--racks", "2", "--transport", "nats") as (info, _data):
        hub = str(info["transport"]["hub_url"])
        port, prom_port = free_port(), free_port()
        procs: list[subprocess.Popen[bytes]] = []
        log = (tmp / "metrics.log").open("wb")
        procs.append(subprocess.Popen(
            [*HUSHMON, "metrics", "--url", hub, "--port", str(port)], cwd=REPO_ROOT,
            stdout=log, stderr=log, env={**os.environ, **transport.client_env()},
        ))  # fmt: skip
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
            f"  - job_name: hushmon\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        )
        plog = (tmp / "prometheus.log").open("wb")
        procs.append(subprocess.Popen(
            [str(shutil.which("prometheus")), f"--config.file={tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp / 'prom'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=plog, stderr=plog,
        ))  # fmt: skip
        # Prometheus takes seconds to open its TSDB on a loaded machine: a
        # query before it listens is refused, not empty
        _wait("Prometheus ready", lambda: _ready(f"http://127.0.0.1:{prom_port}/-/ready"), 60)
        job = subprocess.Popen(
            ["srun", "-N", "2", str(build_bin_dir() / "butterfly"), *APP],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            found = livecheck.running_job(0, 60)
            assert found is not None, "the Slurm job did not start within 60 s"
            yield Bed(f"http://127.0.0.1:{prom_port}", found[0], found[1])
        finally:
            for p in (job, *procs):
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(timeout=20)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
            for name in ("metrics.log", "prometheus.log"):
                text = (tmp / name).read_text(errors="replace")[-2000:]
                print(f"--- {name}\n{text}")


def _series(url: str, query: str) -> dict[str, float]:
    """host (or jobid) -> value."""
    out = {}
    for r in dashcheck.promql(url, query):
        key = r["metric"].get("host") or r["metric"].get("jobid", "")
        out[key] = float(r["value"][1])
    return out


def test_each_bed_agents_own_cost(bed: Bed) -> None:
    cpu = _wait(
        "every node's agent CPU in Prometheus",
        lambda: (
            (s := _series(bed.prom_url, "hushmon_agent_cycle_cpu_seconds"))
            and set(bed.nodes) <= set(s)
            and s
        ),
        60,
    )
    rss = _series(bed.prom_url, "hushmon_agent_resident_memory_bytes")
    period = _series(bed.prom_url, "hushmon_agent_period_seconds")
    sent = _series(bed.prom_url, "hushmon_agent_batch_bytes")
    for host in bed.nodes:
        # a real agent: some CPU per cycle but far below its period, a few MiB
        assert 0 < cpu[host] < period[host], (host, cpu, period)
        assert 256 * 1024 < rss[host] < 256 * 1024 * 1024, (host, rss)
        assert sent[host] > 100, (host, sent)


def test_the_running_jobs_series(bed: Bed) -> None:
    sel = f'{{jobid="{bed.job}"}}'
    _wait(f"job {bed.job} with 2 nodes", lambda: _series(bed.prom_url, f"hushmon_job_nodes{sel}")
          .get(bed.job) == 2, 60)  # fmt: skip
    ranks = _wait(
        "cycle_time_s from 2 ranks",
        lambda: (
            _series(
                bed.prom_url, f'hushmon_job_app_ranks{{jobid="{bed.job}",metric="cycle_time_s"}}'
            ).get(bed.job)
            == 2
        ),
        60,
    )
    assert ranks
    avg = _series(bed.prom_url, f'hushmon_job_app_value{{jobid="{bed.job}",stat="avg"}}')
    assert 0.9 <= avg[bed.job] < 5.0  # a cycle: 0.3 s of messages and 0.7 s of compute
    cpu = _series(bed.prom_url, f'hushmon_job_cpu_user_percent{{jobid="{bed.job}",stat="max"}}')
    assert 0 < cpu[bed.job] <= 100


def test_the_dashboards_return_data_from_the_bed(bed: Bed) -> None:
    def scrapes() -> int:
        r = dashcheck.promql(bed.prom_url, f'hushmon_job_nodes{{jobid="{bed.job}"}}[10s]')
        return len(r[0]["values"]) if r else 0

    _wait("5 scrapes of the job (for rate())", lambda: scrapes() >= 5, 60)
    for name in ("hushmon-jobs.json", "hushmon-cost.json"):
        queries, problems = dashcheck.check(bed.prom_url, dashcheck.GRAFANA / name)
        left = [p for p in problems if not any(k in p for k in NO_DATA_ON_THE_BED)]
        assert queries >= 10 and not left, "\n".join(left)
