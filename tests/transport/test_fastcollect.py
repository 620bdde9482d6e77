"""The C hot path (libhushmon_collect through hushmon.transport.fastcollect)
against the Python path on a real nats-server: the same messages give the
same rows and the same decisions and reasons; a killed process's unacked
messages come again; bad input to open is one line."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from natssite import client_env, secure_site
from transport_batches import publish, spool_batches

from hushmon.errors import HushmonError
from hushmon.paths import REPO_ROOT
from hushmon.store.lake import series_id_of
from hushmon.transport import fuzz
from hushmon.transport.collect_raw import RawGroupBuilder
from hushmon.transport.collect_records import Message
from hushmon.transport.collector import _message
from hushmon.transport.fastcollect import FastSource, library_path
from hushmon.transport.natsserver import MAX_PAYLOAD_BYTES, RAW_STREAM, LocalNatsServer
from hushmon.transport.raw_group import RawGroup

pytestmark = pytest.mark.skipif(
    not library_path().exists(), reason="libhushmon_collect.so not built (run make)"
)

BED = REPO_ROOT / "tests" / "fixtures" / "spool" / "testbed-4n2r"
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
GROUP = 4096


def _poison(count: int, seed: int) -> list[Message]:
    """The fuzz run's raw messages: valid batches and mutated ones (headers
    above int64, digits of other scripts, bad subjects, flipped bytes...)."""
    rng = random.Random(seed)
    pool = [fuzz.valid_batch(f"node{i}", i + 1, f"r{i % 3}") for i in range(32)]
    out = []
    for i in range(count):
        if i % 5 == 0:
            out.append(fuzz.valid_batch(f"keep{i % 50}", i + 1, f"r{i % 3}"))
        else:
            out.append(fuzz._mutate_batch(rng, rng.choice(pool)))
    return out


def _publish_core(url: str, messages: list[Message]) -> int:
    """Core publishes (no stream ack): a subject the stream does not take
    is simply not stored, as on a real site. Returns how many it holds."""

    async def run() -> int:
        nc = await nats.connect(url)
        for m in messages:
            await nc.publish(m.subject, m.data, headers=m.headers or None)
        await nc.flush()
        js = nc.jetstream()
        last, stable = -1, 0
        while stable < 3:  # the stream stores what the server took: until it settles
            seq = (await js.stream_info(RAW_STREAM)).state.last_seq
            stable = stable + 1 if seq == last else 0
            last = seq
            await asyncio.sleep(0.1)
        await nc.close()
        return int(last)

    return asyncio.run(run())


def _stream_messages(url: str, count: int) -> list[Message]:
    """What HM_RAW holds, as the Python collector receives it (nats-py's
    pull, collector._message), through a consumer of the test's own."""

    async def run() -> list[Message]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        sub = await js.pull_subscribe("hm.raw.>", durable="py-truth", stream=RAW_STREAM)
        out: list[Message] = []
        while len(out) < count:
            for m in await sub.fetch(count - len(out), timeout=5):
                out.append(_message(m))
                await m.ack()
        await nc.close()
        return out

    return asyncio.run(run())


def _rows(group: RawGroup) -> dict[str, list[tuple[Any, ...]]]:
    """A RawGroup as comparable rows: tables in their order (samples and
    series sorted: the paths meet values in another order), events sorted."""
    batches = group.batches.drop_columns(["received_at"])
    return {
        "samples": _sorted([tuple(r.values()) for r in group.samples.to_pylist()]),
        "series": _sorted(list({tuple(r.values()) for r in group.series.to_pylist()})),
        "activity": _sorted([tuple(r.values()) for r in group.activity.to_pylist()]),
        "batches": [tuple(r.values()) for r in batches.to_pylist()],
        "events": _sorted(
            [(e.kind, e.host, e.subject, e.epoch, e.seq, e.count, e.reason) for e in group.events]
        ),
        "recheck": [(i,) for i in group.recheck],
    }


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: tuple((x is None, str(x)) for x in r))


def _c_group(url: str, expected: int) -> RawGroup:
    with FastSource(url) as source:
        group = source.fetch_group(GROUP, 64 << 20, 5.0)
        assert source.messages == expected, (source.messages, expected)
        for r in group.series.to_pylist():  # the lake's id, computed in C
            assert r["series_id"] == series_id_of(
                r["host"], r["measurement"], r["tags"], r["field"]
            )
        # in the lake's order, (series_id, time_ns), which the writer's files keep
        keys = list(
            zip(
                group.samples["series_id"].to_pylist(),
                group.samples["time_ns"].to_pylist(),
                strict=True,
            )
        )
        assert keys == sorted(keys)
        source.in_progress()  # a slow commit's +WPI: accepted, nothing acked yet
        source.ack_group()
        assert source.fetch_group(GROUP, 0, 0.2).batches.num_rows == 0  # acked: none left
    return group


def test_the_same_raw_group_as_the_python_path(nats_server: LocalNatsServer) -> None:
    publish(nats_server.url, spool_batches(BED, RACKS))  # the agent's real line set
    stored = _publish_core(nats_server.url, _poison(1500, seed=6))
    messages = _stream_messages(nats_server.url, stored)
    py = _rows(RawGroupBuilder(MAX_PAYLOAD_BYTES).build(messages))
    c = _rows(_c_group(nats_server.url, len(messages)))
    assert len(py["samples"]) > 10_000 and len(py["events"]) > 100
    kinds = {e[0] for e in py["events"]}
    assert {"rejected", "malformed_lines", "duplicate"} <= kinds
    for table in ("batches", "series", "activity", "events", "recheck", "samples"):
        assert c[table] == py[table], table


def test_rechecks_follow_the_newest_seq_stored(nats_server: LocalNatsServer) -> None:
    """A batch at or below the newest seq stored for its (host, epoch) may be
    stored: the C source marks it as the Python builder does."""
    batches = spool_batches(BED, RACKS)[:6]
    publish(nats_server.url, batches)
    with FastSource(nats_server.url) as source:
        b = batches[3]
        source.note_stored({(b.host, b.epoch): b.seq})
        group = source.fetch_group(GROUP, 0, 5.0)
        keys = list(
            zip(*(group.batches.column(c).to_pylist() for c in ("host", "seq")), strict=True)
        )
        expect = [i for i, (h, q) in enumerate(keys) if h == b.host and q <= b.seq]
        assert expect and group.recheck == expect


def test_a_killed_collectors_unacked_messages_come_again(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    async def short_consumer() -> None:  # collect-raw's AckWait is 30 s: too long for a test
        nc = await nats.connect(nats_server.url)
        await nc.jetstream().add_consumer(
            RAW_STREAM, durable_name="collect-t", ack_policy="explicit", ack_wait=1.0
        )
        await nc.close()

    asyncio.run(short_consumer())
    batches = spool_batches(BED, RACKS)[:20]
    publish(nats_server.url, batches)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time\n"
            "from hushmon.transport.fastcollect import FastSource\n"
            "s = FastSource(sys.argv[1], durable='collect-t')\n"
            "g = s.fetch_group(8, 0, 5.0)\n"
            "print(g.batches.num_rows, flush=True)\n"
            "time.sleep(60)\n",
            nats_server.url,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "8"  # fetched, not acked
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    with FastSource(nats_server.url, durable="collect-t") as source:
        seen: dict[int, bool] = {}
        deadline = time.monotonic() + 10
        while len(seen) < len(batches) and time.monotonic() < deadline:
            group = source.fetch_group(64, 0, 1.0)
            again = set(group.recheck)
            for i, seq in enumerate(group.batches.column("stream_seq").to_pylist()):
                seen[seq] = i in again
            source.ack_group()
        assert len(seen) == len(batches)
        # the 8 the killed process held came again, marked to be looked up
        assert sum(seen.values()) == 8
        assert source.fetch_group(64, 0, 1.5).batches.num_rows == 0


def _one_line(exc: pytest.ExceptionInfo[HushmonError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_bad_input_to_open_is_one_line(nats_server: LocalNatsServer, tmp_path: Path) -> None:
    with pytest.raises(HushmonError) as e:
        FastSource("nats://127.0.0.1:1")
    assert "127.0.0.1:1" in _one_line(e)
    with pytest.raises(HushmonError) as e:
        FastSource("not a url at all")
    _one_line(e)
    with pytest.raises(HushmonError) as e:
        FastSource(nats_server.url, durable="no-such-consumer")
    assert "does not exist" in _one_line(e)


def test_a_refused_login_and_a_missing_library_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with secure_site(tmp_path) as site:
        wrong = tmp_path / "wrong.password"
        wrong.write_text("not-the-password\n")
        for k, v in client_env(site.env("collect", wrong)).items():
            monkeypatch.setenv(k, v)
        with pytest.raises(HushmonError) as e:
            FastSource(site.url)
        assert "uthorization" in _one_line(e)
    monkeypatch.setenv("HUSHMON_COLLECT_LIB", str(tmp_path / "missing.so"))
    with pytest.raises(HushmonError) as e:
        FastSource("nats://127.0.0.1:4222")
    assert "run 'make'" in _one_line(e)
