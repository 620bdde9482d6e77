"""hushmon collect: idempotent, loses nothing across restarts, rejects a
lying node, counts bad input without crashing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest
from transport_batches import (
    Batch,
    hushmon,
    publish,
    publish_raw_messages,
    store_rows,
    synthetic_batch,
)

from hushmon.transport.natsserver import LocalNatsServer, free_port

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000


@pytest.fixture(params=["c.lake", "c.duckdb"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Both stores collect can write: a lake and the embedded file."""
    return tmp_path / str(request.param)


def _collect(url: str, db: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    r = hushmon("collect", "--url", url, "--db", str(db), "--once", *extra)
    assert r.returncode == 0, r.stderr
    return r


def _one(db: Path, sql: str) -> tuple:
    return store_rows(db, sql)[0]


def test_replayed_batches_change_nothing(nats_server: LocalNatsServer, db: Path) -> None:
    batches = [synthetic_batch(h, i + 1, T0 + i * S) for h in ("n1", "n2") for i in range(5)]
    assert publish(nats_server.url, batches) == [False] * 10
    _collect(nats_server.url, db)
    before = _one(db, "SELECT count(*), sum(value) FROM samples")
    assert before[0] == 10 * 3  # user, system, used_pct per batch
    assert _one(db, "SELECT count(*) FROM job_activity") == (10,)
    # the same ids: the stream drops them; new ids (a replay after the
    # stream's window): the store drops them by (host, epoch, seq)
    assert publish(nats_server.url, batches) == [True] * 10
    again = [
        Batch(b.host, b.rack, b.epoch, b.seq, b.data, replay=True, msg_id=f"x{i}")
        for i, b in enumerate(batches)
    ]
    assert publish(nats_server.url, again) == [False] * 10
    r = _collect(nats_server.url, db, "--json", "-")
    assert '"duplicate_batches": 10' in r.stdout and '"batches_stored": 0' in r.stdout
    assert _one(db, "SELECT count(*), sum(value) FROM samples") == before
    assert _one(db, "SELECT count(*), count(*) FILTER (WHERE replay) FROM transport_batches") == (
        10,
        0,
    )
    assert _one(db, "SELECT sum(count) FROM transport_events WHERE kind = 'duplicate'") == (10,)


async def _delivered(url: str) -> int:
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info("HM_RAW", "collect-raw")
        return int(info.delivered.stream_seq)
    except nats.js.errors.NotFoundError:  # the collector has not created it yet
        return 0
    finally:
        await nc.close()


def test_collector_killed_mid_stream_loses_nothing(nats_server: LocalNatsServer, db: Path) -> None:
    hosts = [f"n{i}" for i in range(1, 5)]
    first = [synthetic_batch(h, i + 1, T0 + i * S, value=i) for i in range(100) for h in hosts]
    publish(nats_server.url, first)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hushmon.cli",
            "collect",
            "--url",
            nats_server.url,
            "--db",
            str(db),
            "--fetch-batch",
            "16",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while asyncio.run(_delivered(nats_server.url)) < 120 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.kill()  # kill -9 mid-stream: groups delivered, some committed, some not
    proc.wait()
    delivered = asyncio.run(_delivered(nats_server.url))
    assert 120 <= delivered < 400, "the kill should land mid-stream"
    second = [
        synthetic_batch(h, i + 1, T0 + i * S, value=i) for i in range(100, 150) for h in hosts
    ]
    publish(nats_server.url, second)
    # a collector that is restarted and stopped by SIGTERM exits cleanly
    again = subprocess.Popen(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", nats_server.url, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # connected, not just started: its imports alone can take seconds under load
    port = int(nats_server.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while not _has_connection(again.pid, port) and time.monotonic() < deadline:
        time.sleep(0.1)
    again.send_signal(signal.SIGTERM)
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert "collected" in out
    _collect(nats_server.url, db)
    n = 150 * len(hosts)
    assert _one(db, "SELECT count(*), count(DISTINCT (host, seq)) FROM transport_batches") == (n, n)
    # every sample exactly once
    assert _one(db, "SELECT count(*), count(DISTINCT (series_id, time_ns)) FROM samples") == (
        3 * n,
        3 * n,
    )
    assert _one(db, "SELECT count(*) FROM job_activity") == (n,)


def test_a_lying_node_is_rejected_and_counted(nats_server: LocalNatsServer, db: Path) -> None:
    honest = synthetic_batch("n1", 1, T0)
    liar = synthetic_batch("n1", 2, T0 + S)
    # n1 sends lines tagged n2 (one line among honest ones)
    liar.data = liar.data.replace(b"mem,host=n1", b"mem,host=n2")
    escaped = synthetic_batch("n1", 3, T0 + 2 * S)  # the exact parser's path (escapes)
    escaped.data = escaped.data.replace(b"cpu,host=n1,cpu=total", b"cpu,host=n3,cpu=to\\ tal")
    publish(nats_server.url, [honest, liar, escaped, synthetic_batch("n2", 1, T0)])
    r = _collect(nats_server.url, db)
    assert "rejected 2 batch(es)" in r.stdout
    assert "headers say Hm-Host=n1" in r.stdout and "host=n2" in r.stdout
    # nothing stored under n3; n2 has only its own batch
    assert _one(db, "SELECT count(*) FROM series WHERE host = 'n3'") == (0,)
    assert _one(
        db,
        "SELECT count(DISTINCT time_ns) FROM samples JOIN series USING (series_id) "
        "WHERE host = 'n2'",
    ) == (1,)
    assert _one(db, "SELECT count(*) FROM transport_batches") == (2,)
    st = hushmon("transport", "status", "--db", str(db), "--json", "-")
    assert st.returncode == 0, st.stderr
    import json

    nodes = {n["host"]: n for n in json.loads(st.stdout)["nodes"]}
    assert nodes["n1"]["rejected"] == 2 and nodes["n1"]["missing"] == 0
    assert any("host=n2" in r for r in nodes["n1"]["reasons"])


def test_bad_messages_are_counted_not_fatal(nats_server: LocalNatsServer, db: Path) -> None:
    good = synthetic_batch("n1", 1, T0)
    bad_lines = synthetic_batch("n1", 2, T0 + S)
    bad_lines.data += b"cpu,host=n1 user_pct=abc 1\n\xff\xfe garbage\n"
    big = synthetic_batch("n1", 3, T0 + 2 * S)
    big.data += b"".join(f"x,host=n1 v={i} {T0}\n".encode() for i in range(400))
    publish(nats_server.url, [good, bad_lines, big])
    publish_raw_messages(
        nats_server.url,
        [
            ("hm.raw.r1.n1", b"cpu,host=n1 x=1 1\n", {"Hm-Host": "n1"}),  # no seq
            (
                "hm.raw.r1.n9",
                b"cpu,host=n9 x=1 1\n",
                {"Hm-Host": "n1", "Hm-Epoch": "1", "Hm-Seq": "1", "Hm-Lines": "1"},
            ),
            ("hm.sum.rack.r1", b"{not json", {}),
            ("hm.sum.rack.r1", b'{"v": 1, "level": "rack", "rack": "r2", "job": "j"}', {}),
        ],
    )
    r = _collect(nats_server.url, db, "--max-batch-bytes", "4096")
    assert "oversized" in r.stdout and "header Hm-Epoch missing" in r.stdout
    assert "subject names host n9" in r.stdout
    assert (
        "summaries: 0 stored, 0 duplicate(s), 0 overlapping (rebuilt from raw: 0), 2 rejected"
        in r.stdout
    )
    # the good lines of the batch with malformed ones are stored, the rest counted
    assert _one(db, "SELECT count(*) FROM transport_batches") == (2,)
    assert _one(db, "SELECT sum(count) FROM transport_events WHERE kind = 'malformed_lines'") == (
        2,
    )


def test_server_down_and_bad_db_give_one_line(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    r = hushmon("collect", "--url", url, "--db", str(tmp_path / "c.duckdb"), "--once")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot reach NATS" in r.stderr
    not_a_store = tmp_path / "text.duckdb"
    not_a_store.write_text("hello\n")
    r = hushmon("collect", "--url", url, "--db", str(not_a_store), "--once")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "store" in r.stderr
    r = hushmon("collect", "--url", url, "--db", str(tmp_path), "--once")
    assert r.returncode != 0 and "folder" in r.stderr and r.stderr.count("\n") == 1
    r = hushmon("collect", "--url", url, "--db", str(tmp_path / "m.duckdb"), "--memory-mib", "8")
    assert r.returncode != 0 and "--memory-mib" in r.stderr and r.stderr.count("\n") == 1


def test_the_store_keeps_its_memory_bound(tmp_path: Path) -> None:
    from hushmon.transport.collect_store import CollectorStore

    store = CollectorStore(tmp_path / "c.duckdb", memory_mib=300)
    try:
        limit = store.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        store.close()
    assert limit == "300.0 MiB", limit


def test_wait_connects_when_the_server_comes(tmp_path: Path) -> None:
    from hushmon.transport.natsserver import NatsServerConfig, ensure_streams

    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hushmon.cli",
            "collect",
            "--url",
            f"nats://127.0.0.1:{port}",
            "--db",
            str(tmp_path / "c.duckdb"),
            "--once",
            "--wait",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    first = proc.stderr.readline()  # blocks until the collector says it waits
    assert "waiting for NATS" in first and proc.poll() is None
    server = LocalNatsServer(
        NatsServerConfig(name="late", store_dir=tmp_path / "js", port=port), tmp_path
    )
    server.start()
    try:
        ensure_streams(server.url)
        publish(server.url, [synthetic_batch("n1", 1, T0)])
        out, err = proc.communicate(timeout=60)
    finally:
        server.stop()
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert "collected 1 batch(es)" in out, (out, err)


def _has_connection(pid: int, port: int) -> bool:
    """Whether process PID holds an established TCP connection to PORT."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        sockets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in fds}
    except OSError:
        return False
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        if remote_port == port and fields[3] == "01" and f"socket:[{fields[9]}]" in sockets:
            return True
    return False


def test_a_server_that_stops_first_ends_the_collector_cleanly(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """The test bed stops its servers before the collector: SIGTERM then
    finds a dead connection, which must not end in a traceback."""
    db = str(tmp_path / "c.duckdb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", nats_server.url, "--db", db],
        stderr=subprocess.PIPE,
        text=True,
    )
    # connected, not just started: its imports alone can take seconds under load
    port = int(nats_server.url.rsplit(":", 1)[1])
    deadline = time.monotonic() + 60
    while not _has_connection(proc.pid, port) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # its consumers bound
    nats_server.stop()
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert proc.returncode == 0, err


def test_groups_smaller_than_the_backlog_store_it_once(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    """The collector's own pull (collector._Puller): a backlog of 11 in
    groups of 3 is stored whole, each batch once, each group acked (a second
    run finds nothing)."""
    db = tmp_path / "c.duckdb"
    batches = [synthetic_batch("n1", i + 1, T0 + i * S) for i in range(11)]
    assert publish(nats_server.url, batches) == [False] * 11
    r = _collect(nats_server.url, db, "--fetch-batch", "3", "--json", "-")
    assert '"batches_stored": 11' in r.stdout and '"duplicate_batches": 0' in r.stdout
    assert '"redelivered": 0' in r.stdout
    assert _one(db, "SELECT count(*), count(DISTINCT seq) FROM transport_batches") == (11, 11)
    again = _collect(nats_server.url, db, "--json", "-")
    assert '"raw_messages": 0' in again.stdout
