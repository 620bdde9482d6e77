"""A small site for the ``hushmon metrics`` tests: a nats-server with the
streams, the real reducers fed by LiveTraffic (job 42 on 4 nodes in 2
racks), ``hushmon metrics`` on a loopback port, two agents' batches with a
full ``hushmon_agent`` line, one job summary with known values, and a real
Prometheus (Debian ``prometheus``) scraping the endpoint every second.

A plain module (not conftest): tests import it by name."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livetraffic import LiveTraffic
from waiting import wait_until

from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    free_port,
    site_consumers,
)
from hushmon.transport.summary import Summary
from hushmon.transport.wire import batch_headers, raw_subject

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
VICTORIA = shutil.which("victoria-metrics")
# A job whose summary is published as is: its figures are known exactly.
KNOWN_JOB = "7:0"
KNOWN_CPU = [10.0, 30.0, 50.0]  # user_pct of its three nodes: avg 30, min 10, max 50
ODD_METRIC = 'we"ird\\name'  # a quote and a backslash through to Prometheus
# Two agents' own cost, as their hushmon_agent line says it.
COST_NODES = {"c1": "r1", "c2": "r2"}
COST_CPU_US = {"c1": 250.0, "c2": 410.0}
COST_RSS = {"c1": 1_258_291, "c2": 2_000_000}
COST_DROPPED_BATCHES = {"c1": 3, "c2": 0}


@dataclass
class Site:
    nats_url: str
    metrics_url: str
    prom_url: str
    vm_url: str = ""  # VictoriaMetrics, when installed: scrapes too, takes --forward-lp
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


def get(url: str, accept: str = "", token: str = "") -> tuple[int, str, bytes]:
    req = urllib.request.Request(url)
    if accept:
        req.add_header("Accept", accept)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def forward_to_victoria(site: Site, db: Path) -> None:
    """The raw batches in HM_RAW through `hushmon collect --forward-lp`."""
    r = subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", site.nats_url, "--db", str(db),
         "--once", "--forward-lp", site.vm_url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert r.returncode == 0 and "0 failed" in r.stdout, r.stdout + r.stderr
    get(site.vm_url + "/internal/force_flush")


def promql(prom_url: str, query: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": query})
    status, _, body = get(f"{prom_url}/api/v1/query?{q}")
    doc = json.loads(body)
    assert status == 200 and doc["status"] == "success", (query, body[:300])
    return list(doc["data"]["result"])


def wait_for(what: str, check: Any, timeout_s: float = 30.0) -> Any:
    return wait_until(check, what, timeout_s, step_s=0.3)


def known_summary() -> bytes:
    now_ns = time.time_ns() // 10**9 * 10**9
    sensors = {
        "cpu,cpu=total,scope=host user_pct": Summary.of(KNOWN_CPU),
        "mem,scope=host used_pct": Summary.of([40.0, 42.0, 44.0]),
        f"app,job={KNOWN_JOB},rank=0,metric={ODD_METRIC} mean": Summary.of([1.5]),
        f"app,job={KNOWN_JOB},rank=1,metric={ODD_METRIC} mean": Summary.of([2.5]),
        f"app_phase,job={KNOWN_JOB},rank=0,phase=solve mean_s": Summary.of([0.25]),
        "disk,scope=host,device=sda busy_pct": Summary.of([5.0, 7.0, 9.0]),
    }
    sources = [[f"k{i}", 1, 1] for i in range(3)]
    doc = {"v": 1, "level": "job", "job": KNOWN_JOB, "time_ns": now_ns, "sources": sources}
    doc["sensors"] = {k: s.to_json() for k, s in sensors.items()}
    return json.dumps(doc).encode()


def cost_batch(host: str, seq: int) -> tuple[str, bytes, dict[str, str]]:
    t = time.time_ns() // 10**9 * 10**9
    text = (
        f"cpu,host={host},cpu=total user_pct=5 {t}\n"
        f"hushmon_agent,host={host} cpu_us={COST_CPU_US[host]},jitter_us=80,"
        f"rss_bytes={COST_RSS[host]}i,samples_dropped=5i,period_ms=1000i {t}\n"
    )
    h = batch_headers(host, 1_700_000_000_000_000_000, seq, 2, COST_DROPPED_BATCHES[host])
    return raw_subject(COST_NODES[host], host), text.encode(), h


# hushmon alert's messages: one firing for job 42, one raised and cleared
ALERTS = [("42", "idle_allocation", "firing"), ("42", "memory_near_limit", "firing"),
          ("42", "memory_near_limit", "cleared")]  # fmt: skip


def alert(job: str, rule: str, state: str) -> bytes:
    tag = {"idle_allocation": "idle_alloc", "memory_near_limit": "memory_at_limit"}[rule]
    doc = {"job": job, "rule": rule, "tag": tag, "state": state, "hint": "..."}
    doc.update({"period_ns": time.time_ns(), "nodes": ["n1"], "nhr_class": ""})
    return json.dumps(doc).encode()


def publish_core(url: str, messages: list[tuple[str, bytes]]) -> None:
    import nats

    async def run() -> None:
        nc = await nats.connect(url)
        for subject, data in messages:
            await nc.publish(subject, data)
        await nc.flush()
        await nc.close()

    asyncio.run(run())


def publish(url: str, messages: list[tuple[str, bytes, dict[str, str] | None]]) -> None:
    import nats

    async def run() -> None:
        nc = await nats.connect(url)
        js = nc.jetstream()
        for subject, data, headers in messages:
            await js.publish(subject, data, headers=headers)
        await nc.close()

    asyncio.run(run())


def newest_job_period(url: str, job: str) -> tuple[int, dict[str, Summary]]:
    """Every job summary of ``job``'s newest period in HM_SUM, merged per
    sensor: what the top reducer said, read apart from the exporter."""
    import nats

    async def run() -> list[dict[str, Any]]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        sub = await js.subscribe(f"hm.sum.job.{job}", ordered_consumer=True)
        out = []
        # to the stream's end as the server counts it (a second without a
        # message, the old end, can come early on a loaded machine)
        while True:
            msg = await sub.next_msg(timeout=30.0)
            out.append(json.loads(msg.data))
            if msg.metadata.num_pending == 0:
                break
        await nc.close()
        return out

    docs = asyncio.run(run())
    newest = max(d["time_ns"] for d in docs)
    merged: dict[str, Summary] = {}
    for d in docs:
        if d["time_ns"] != newest:
            continue
        for key, value in d["sensors"].items():
            merged.setdefault(key, Summary()).merge(Summary.from_json(value, with_sketch=False))
    return newest, merged


def prometheus_config(path: Path, metrics_port: int) -> None:
    path.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: hushmon\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{metrics_port}']\n"
    )


def start_site(tmp: Path, bin_dir: Path) -> tuple[Site, LocalNatsServer, LiveTraffic]:
    server = LocalNatsServer(NatsServerConfig(name="metrics-hub", store_dir=tmp / "js"), tmp)
    server.start()
    ensure_streams(server.url, consumers=site_consumers(("r1", "r2")))
    traffic = LiveTraffic(server.url, bin_dir, tmp)
    publish(server.url, [(f"hm.sum.job.{KNOWN_JOB}", known_summary(), None)])
    port = free_port()
    log = (tmp / "metrics.log").open("wb")
    exporter = subprocess.Popen(
        [sys.executable, "-m", "hushmon.cli", "metrics", "--url", server.url, "--port", str(port)],
        stdout=log,
        stderr=log,
    )
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    site = Site(server.url, metrics_url, "", procs=[exporter])
    wait_for("hushmon metrics answers", lambda: _answers(metrics_url))
    # the exporter reads batches and alerts from now on (core subscriptions)
    for seq in (1, 2):
        publish(server.url, [cost_batch(h, seq) for h in COST_NODES])

    # Alerts are core messages: one sent before the exporter's subscription
    # reached the server is lost (its HTTP port can answer first; on a loaded
    # CI machine the idle alert never came). The whole sequence is sent again
    # until the exporter shows it; sent twice it ends in the same states.
    def alerts_shown() -> bool:
        publish_core(server.url, [(f"hm.alert.{job}", alert(job, rule, state))
                                  for job, rule, state in ALERTS])  # fmt: skip
        return b'rule="idle_allocation"' in get(metrics_url)[2]

    wait_for("the exporter showing the alerts sent to hm.alert", alerts_shown)
    prom_port = free_port()
    prometheus_config(tmp / "prometheus.yml", port)
    plog = (tmp / "prometheus.log").open("wb")
    assert PROMETHEUS is not None
    site.procs.append(
        subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'prom'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=plog,
            stderr=plog,
        )
    )
    site.prom_url = f"http://127.0.0.1:{prom_port}"
    if VICTORIA is not None:
        vm_port = free_port()
        vlog = (tmp / "vm.log").open("wb")
        site.procs.append(
            subprocess.Popen(
                [
                    VICTORIA,
                    f"-storageDataPath={tmp / 'vm'}",
                    f"-httpListenAddr=127.0.0.1:{vm_port}",
                    f"-promscrape.config={tmp / 'prometheus.yml'}",
                    "-search.latencyOffset=1s",  # newest samples queryable at once (default 30 s)
                ],
                stdout=vlog,
                stderr=vlog,
            )
        )
        site.vm_url = f"http://127.0.0.1:{vm_port}"
        wait_for("victoria-metrics ready", lambda: _answers(site.vm_url + "/health"))
    wait_for("prometheus ready", lambda: _answers(site.prom_url + "/-/ready"))
    return site, server, traffic


def _answers(url: str) -> bool:
    try:
        return get(url)[0] == 200
    except OSError:
        return False


def stop_site(site: Site, server: LocalNatsServer, traffic: LiveTraffic) -> None:
    traffic.stop()
    for p in site.procs:
        p.terminate()
    for p in site.procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    server.stop()
