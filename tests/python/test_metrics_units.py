"""hushmon metrics without a network: the exposition format, the deferred
state, node costs and the series per job (tests/fixtures/live: summaries
recorded from the real reducers)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hushmon.live.sensors import KEY_SENSORS
from hushmon.metrics.deferred import DeferredState, period_of
from hushmon.metrics.exposition import Family, render, wants_openmetrics
from hushmon.metrics.families import KEY_SERIES, job_families, served
from hushmon.metrics.nodecost import NodeCosts
from hushmon.metrics.server import Exporter
from hushmon.transport.wire import batch_headers

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "live" / "summaries.jsonl"


def _fixture() -> list[tuple[str, bytes]]:
    out = []
    for line in FIXTURE.read_text().splitlines():
        d = json.loads(line)
        out.append((d["subject"], json.dumps(d["payload"]).encode()))
    return out


def test_label_values_are_escaped_and_counters_named_per_format() -> None:
    fam = Family("x_dropped", "counter", 'help with "quotes" and \\ backslash')
    fam.add((("metric", 'a"b\\c\nd'),), 3)
    fam.add((("metric", "nan"),), float("nan"))  # not measured: left out
    g = Family("y", "gauge", "g")
    g.add((), 0.25)
    text = render([fam, g], openmetrics=False).decode()
    assert 'x_dropped_total{metric="a\\"b\\\\c\\nd"} 3\n' in text
    assert "# TYPE x_dropped_total counter" in text and "nan" not in text
    assert '# HELP x_dropped_total help with "quotes" and \\\\ backslash' in text
    om = render([fam, g], openmetrics=True).decode()
    assert "# TYPE x_dropped counter" in om and om.endswith("y 0.25\n# EOF\n")
    assert '# HELP x_dropped help with \\"quotes\\"' in om


def test_accept_header_picks_openmetrics_only_when_asked() -> None:
    prometheus = (
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )
    assert wants_openmetrics(prometheus)
    assert not wants_openmetrics("text/plain;version=0.0.4")
    assert not wants_openmetrics("")
    assert not wants_openmetrics("application/openmetrics-text;q=0")


def test_every_key_sensor_has_a_named_series() -> None:
    assert {k.label for k in KEY_SENSORS} <= set(KEY_SERIES)


def test_fixture_series_per_job_carry_no_node_and_unserved_sensors_are_not_read() -> None:
    ex = Exporter(keep_s=1e12, node_cost=False)
    for subject, payload in _fixture():
        ex.state.add(subject, payload, time.time_ns())
    text = ex.body(openmetrics=False).decode()
    job_lines = [line for line in text.splitlines() if line.startswith("hushmon_job_")]
    assert job_lines and all("host=" not in line and "rack=" not in line for line in job_lines)
    # 3 (nodes, period, lag) + 6 key sensors x 3 stats (no disk in the fixture) + 1 app x 4
    assert len(job_lines) == 3 + 6 * 3 + 4
    whole = ex.state.jobs["42"].whole
    assert whole is not None and all(served(s) for s in whole.sensors)
    assert ex.state.bad == 0


def test_deferred_state_keeps_only_the_newest_period_and_merges_its_parts() -> None:
    msgs = [(s, p) for s, p in _fixture() if s.startswith("hm.sum.job.")]
    assert period_of(msgs[0][1]) == json.loads(msgs[0][1])["time_ns"]
    st = DeferredState()
    for subject, payload in msgs:
        st.add(subject, payload, 1)
    newest = max(json.loads(p)["time_ns"] for _s, p in msgs)
    older = sum(1 for _s, p in msgs if json.loads(p)["time_ns"] < newest)
    assert st.messages == 0 and st.superseded == older  # nothing parsed yet
    st.flush()
    assert st.jobs["42"].whole is not None and st.jobs["42"].whole.time_ns == newest
    st.add(msgs[0][0], msgs[0][1], 2)  # an older period after the newest: dropped unparsed
    assert st.superseded == older + 1
    st.add("hm.sum.job.9", b'{"v": 1}', 3)  # no period: parsed at once, refused
    assert st.bad == 1


def test_node_cost_reads_the_agent_line_and_the_dropped_header() -> None:
    costs = NodeCosts.empty()
    data = (
        b"cpu,host=n1,cpu=total user_pct=5 1000\n"
        b"hushmon_agent,host=n1 cpu_us=212.5,jitter_us=61,rss_bytes=1258291i,"
        b"samples_dropped=4i,period_ms=1000i 1000\n"
    )
    assert costs.add("hm.raw.r1.n1", batch_headers("n1", 1, 7, 2, dropped=3), data, 5) == ""
    n = costs.nodes["n1"]
    assert (n.rack, n.cycle_cpu_s, n.rss_bytes, n.batches_dropped) == ("r1", 212.5e-6, 1258291, 3)
    assert (n.period_s, n.samples_dropped, n.batch_bytes, n.batch_lines) == (1.0, 4, len(data), 2)
    # another host's line in n1's batch is not n1's cost; a bad subject is refused
    liar = data.replace(b"hushmon_agent,host=n1", b"hushmon_agent,host=n2")
    costs.add("hm.raw.r1.n9", batch_headers("n9", 1, 1, 2), liar.replace(b"n1", b"n9", 1), 6)
    assert costs.nodes["n9"].cycle_cpu_s is None
    assert costs.add("hm.raw.r1", {}, data, 7) and costs.bad == 1
    costs.prune(now_ns=10 * 10**9, keep_s=5)
    assert not costs.nodes


def test_jobs_over_the_app_name_cap_are_cut_and_counted() -> None:
    app = [{"name": f"m{i}", "unit": "", "ranks": 1, "min": 1.0, "avg": 1.0, "max": 1.0}
           for i in range(40)]  # fmt: skip
    snap = {"jobs": [{"job": "1", "nodes": ["n1"], "time_ns": 0, "lag_s": 0.0, "sensors": [],
                      "app": app}]}  # fmt: skip
    fams, left_out = job_families(snap, {"1": "alice"})
    values = next(f for f in fams if f.name == "hushmon_job_app_value")
    assert len(values.samples) == 32 * 3 and left_out == 8
    assert values.samples[0][0][:2] == (("jobid", "1"), ("user", "alice"))


def test_the_http_server_wants_the_token_and_negotiates_the_format() -> None:
    """MetricsServer over real loopback HTTP (no NATS: an empty exporter)."""
    import asyncio

    from hushmon.live.serve import Access
    from hushmon.metrics.server import MetricsServer

    token = "t0ken-of-the-test-0123456789"

    async def get(port: int, path: str, headers: str = "") -> tuple[str, str]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        await writer.drain()
        raw = await reader.read()
        writer.close()
        head, _, body = raw.decode().partition("\r\n\r\n")
        return head, body

    async def run() -> list[tuple[str, str]]:
        srv = MetricsServer(Exporter(300.0, True), Access.for_bind(token, "0.0.0.0", []))
        server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        auth = f"Authorization: Bearer {token}\r\n"
        async with server:
            return [
                await get(port, "/metrics"),
                await get(port, "/metrics", "Authorization: Bearer wrong-token-xxxxxxxx\r\n"),
                await get(port, "/metrics", auth),
                await get(port, "/metrics", auth + "Accept: application/openmetrics-text\r\n"),
                await get(port, "/nope", auth),
            ]

    none, wrong, text, om, missing = asyncio.run(run())
    assert none[0].startswith("HTTP/1.1 401") and wrong[0].startswith("HTTP/1.1 401")
    assert "hushmon_metrics_jobs 0" in text[1] and "version=0.0.4" in text[0]
    assert "# EOF" not in text[1] and om[1].endswith("# EOF\n")
    assert "application/openmetrics-text" in om[0]
    assert missing[0].startswith("HTTP/1.1 404")
