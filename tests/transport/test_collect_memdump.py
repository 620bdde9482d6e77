"""A running collector writes a memory report to its log on SIGUSR2
(transport/memdump.py): the kernel's, glibc's, Arrow's, DuckDB's and
Python's view of its memory and its long-lived containers' sizes, and
keeps collecting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
from transport_batches import publish, publish_raw_messages, rack_partial, store_rows
from transport_batches import synthetic_batch as batch

from hushmon.errors import HushmonError
from hushmon.transport.natsserver import LocalNatsServer

T0 = 1_795_000_000_000_000_000
S = 1_000_000_000
WAIT_S = 60.0  # a loaded CI worker starts the collector in seconds, not a minute


def _wait_stored(lake: Path, proc: subprocess.Popen[bytes], partials: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            if store_rows(lake, _COUNT) == [(partials,)]:
                return
        except (HushmonError, duckdb.Error):
            pass  # the collector has not made the lake yet
        assert proc.poll() is None, f"collector exited {proc.returncode}"
        assert time.monotonic() < deadline, f"{partials} partial(s) not stored in {WAIT_S} s"
        time.sleep(0.2)


_COUNT = "SELECT count(*) FROM summary_messages"


def _wait_for(log: Path, proc: subprocess.Popen[bytes], text: str, count: int = 1) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        out = log.read_text(errors="replace")
        if out.count(text) >= count:
            return out
        assert proc.poll() is None, f"collector exited {proc.returncode}: {out[-2000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} x{count} within {WAIT_S} s: {log.read_text()[-2000:]}")


def test_sigusr2_writes_a_memory_report_and_collection_goes_on(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    url, lake, log = nats_server.url, tmp_path / "s.lake", tmp_path / "collect.log"
    raw = [batch(h, 1, T0, rack="r1", value=k) for k, h in enumerate(("n1", "n2"))]
    publish(url, raw)
    publish_raw_messages(
        url, [("hm.sum.rack.r1", rack_partial(raw, "r1", "j1", T0), {"Nats-Msg-Id": "r1:j1:0"})]
    )
    argv = [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--db", str(lake)]
    env = {**os.environ, "HUSHMON_TRACEMALLOC": "1"}
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*argv, "--summaries-only"], stderr=err, stdout=subprocess.DEVNULL, env=env
        )
    try:
        # the handler is set before it collects: once it has stored, it is there
        _wait_stored(lake, proc, 1)
        proc.send_signal(signal.SIGUSR2)
        first = _wait_for(log, proc, "memdump: report 1 ")
        # a second report compares Python's heap with the first's
        publish_raw_messages(
            url,
            [("hm.sum.rack.r1", rack_partial(raw, "r1", "j1", T0 + S), {"Nats-Msg-Id": "r1:1"})],
        )
        proc.send_signal(signal.SIGUSR2)
        out = _wait_for(log, proc, "memdump: report 2 ")
        _wait_stored(lake, proc, 2)  # and it goes on collecting
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 0, log.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    report = first[first.index("memdump: report 1 ") :]
    for part in (
        "RssAnon",
        "resident by mapping MiB: heap",
        "largest anonymous mappings, resident/size MiB: ",
        "glibc heap MiB: in_use",
        "; set at start: arena_max 2, mmap_threshold_bytes 1048576, arrow_pool system",
        "python object arenas: not readable while tracemalloc traces (HUSHMON_TRACEMALLOC=1)",
        " MiB by owner: glibc's other arenas ",
        ", Python's object arenas ",
        "arrow pool system: allocated",
        "duckdb allocator (duckdb) MiB: allocated",
        "duckdb allocator (ducklake) MiB: allocated",
        "duckdb buffer manager",
        "memory_limit=",
        "gc: counts",
        "containers: stats.log=0, sensor_keys=",
        "writer.reopens=0",
        "nats.subs=",
        "python heap traced",
        "top sites by size:",
        "duckdb allocator (duckdb) background purge thread: on; freed pages kept by arena",
        "given back when told (DuckDB's allocators purged: duckdb, ",
        "glibc trimmed: yes): RssAnon ",
    ):
        assert part in report, (part, report)
    assert "top growth since the last report:" in out[out.index("memdump: report 2 ") :]
