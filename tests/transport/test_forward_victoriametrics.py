"""hushmon collect --forward-lp: the stored raw batches reach a real
VictoriaMetrics (Debian package victoria-metrics) and are queryable."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from transport_batches import hushmon, publish, synthetic_batch

from hushmon.transport.forward import LineForwarder
from hushmon.transport.natsserver import LocalNatsServer, free_port

BINARY = shutil.which("victoria-metrics")


@pytest.fixture()
def victoria(tmp_path: Path) -> Iterator[str]:
    if BINARY is None:
        pytest.skip("victoria-metrics not installed: run 'make deps' (Debian victoria-metrics)")
    port = free_port()
    log = (tmp_path / "vm.log").open("wb")
    proc = subprocess.Popen(
        [BINARY, f"-storageDataPath={tmp_path / 'vm'}", f"-httpListenAddr=127.0.0.1:{port}"],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.read().strip() == b"OK":
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"victoria-metrics did not start: {(tmp_path / 'vm.log').read_text()}"
                    )
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _export(url: str, match: str) -> list[dict]:
    urllib.request.urlopen(url + "/internal/force_flush", timeout=10).read()
    q = urllib.parse.urlencode({"match[]": match})
    with urllib.request.urlopen(f"{url}/api/v1/export?{q}", timeout=10) as r:
        return [json.loads(line) for line in r.read().splitlines() if line.strip()]


def test_forwarded_series_are_queryable(
    nats_server: LocalNatsServer, victoria: str, tmp_path: Path
) -> None:
    now_ns = (time.time_ns() // 10**9 - 60) * 10**9  # inside VictoriaMetrics' retention
    batches = [
        synthetic_batch(h, i + 1, now_ns + i * 10**9, value=10.0 + i)
        for h in ("n1", "n2")
        for i in range(5)
    ]
    liar = synthetic_batch("n1", 6, now_ns + 5 * 10**9)
    liar.data = liar.data.replace(b"host=n1", b"host=n3")
    publish(nats_server.url, [*batches, liar])
    r = hushmon(
        "collect",
        "--url",
        nats_server.url,
        "--db",
        str(tmp_path / "c.duckdb"),
        "--once",
        "--forward-lp",
        victoria,
    )
    assert r.returncode == 0, r.stderr
    assert "forwarded to" in r.stdout and "10 batch(es)" in r.stdout and "0 failed" in r.stdout
    deadline = time.monotonic() + 20
    while True:
        series = _export(victoria, '{__name__="cpu_user_pct"}')
        if len(series) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    by_host = {s["metric"]["host"]: s for s in series}
    assert set(by_host) == {"n1", "n2"}  # the liar's n3 never reached it either
    assert by_host["n1"]["metric"]["cpu"] == "total"
    assert sorted(by_host["n1"]["values"]) == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert by_host["n2"]["timestamps"][0] == now_ns // 10**6


def test_a_full_queue_drops_and_counts_and_a_dead_server_fails_counted() -> None:
    forwarder = LineForwarder(
        f"http://127.0.0.1:{free_port()}", queue_batches=2, retry_delays_s=(0.01,)
    )
    for _ in range(50):
        forwarder.offer(b"cpu,host=n1 v=1 1\n")  # the store path never waits
    stats = forwarder.close(timeout_s=10)
    assert stats.dropped_queue_full > 0
    assert stats.failed_batches + stats.dropped_queue_full == 50 and stats.retries >= 1
    assert stats.posted_batches == 0 and stats.last_error


def test_the_queue_is_bounded_by_bytes_and_counts_what_it_drops() -> None:
    """Large batches to a server that takes connections but never answers:
    the queue holds at most queue_bytes (a count bound alone would hold
    10,000 of them); the rest is dropped, counted in batches and bytes."""
    import socket

    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(64)  # never accepted: every post waits for an answer
    mib = 1 << 20
    forwarder = LineForwarder(
        f"http://127.0.0.1:{stalled.getsockname()[1]}",
        queue_bytes=4 * mib,
        retry_delays_s=(0.01,),
    )
    try:
        batch = b"cpu,host=n1 v=1 1\n" * (mib // 18)
        for _ in range(40):
            forwarder.offer(batch)
            assert forwarder.queued_bytes() <= 4 * mib
        stats = forwarder.stats
        assert stats.queued <= 5  # 4 queued, and maybe 1 the posting thread took
        assert stats.dropped_queue_full == 40 - stats.queued
        assert stats.dropped_bytes == stats.dropped_queue_full * len(batch)
        forwarder.offer(b"x" * (5 * mib))  # one batch larger than the bound
        assert stats.dropped_queue_full == 41 - stats.queued
    finally:
        stalled.close()  # the stuck post fails, the thread drains the queue
        forwarder.close(timeout_s=30)
