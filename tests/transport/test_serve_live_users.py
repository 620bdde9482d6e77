"""``hushmon serve``'s live paths per user: job summaries of two jobs on a
real nats-server (the recorded job-wide summary of the real reducers,
under job ids 11 and 21), job records naming alice and bob as their
owners; over real HTTP each user's token gets only their job in
``/state``, ``/history`` and ``/events``, the operator's token both."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hushmon.history.records import JobRecord, record_job
from hushmon.store.schema import open_store
from hushmon.transport.natsserver import LocalNatsServer

pytest.importorskip("nats")

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
FIXTURE = Path(__file__).parent.parent / "fixtures" / "live" / "summaries.jsonl"
OWNERS = {"11": "alice", "21": "bob"}


def _summaries() -> list[tuple[str, bytes]]:
    last = [json.loads(ln) for ln in FIXTURE.read_text().splitlines()][-1]
    assert last["subject"] == "hm.sum.job.42"
    out = []
    for job in OWNERS:
        payload = dict(last["payload"])
        payload["sensors"] = {
            k.replace("job=42,", f"job={job},"): v for k, v in last["payload"]["sensors"].items()
        }
        payload["job"] = job
        payload["time_ns"] = time.time_ns() // 1_000_000_000 * 1_000_000_000
        out.append((f"hm.sum.job.{job}", json.dumps(payload).encode()))
    return out


async def _publish(url: str, msgs: list[tuple[str, bytes]]) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    for subject, payload in msgs:
        await js.publish(subject, payload)
    await nc.close()


def _get(url: str, token: str) -> Any:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read().decode()
    if body.startswith("retry"):  # server-sent events: the snapshots, not the end event
        return [json.loads(ln[6:]) for ln in body.splitlines() if ln.startswith('data: {"')]
    return json.loads(body)


def test_live_paths_show_each_user_their_own_jobs(
    nats_server: LocalNatsServer, tmp_path: Path
) -> None:
    asyncio.run(_publish(nats_server.url, _summaries()))
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    db = data / "hushmon.duckdb"
    open_store(db).close()
    record_job(
        db, [JobRecord(job=j, owner=o, state="RUNNING", source="test") for j, o in OWNERS.items()]
    )
    tokens = {}
    for user in OWNERS.values():
        cmd = [*HUSHMON, "serve", "token", "--user", user, "--tokens-dir", str(tmp_path / "tok")]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        tokens[user] = out.stdout.strip()
    log = tmp_path / "serve.err"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [*HUSHMON, "serve", "--url", nats_server.url, "--port", "0", "--stale-s", "0",
             "--data-dir", str(data), "--tokens-dir", str(tmp_path / "tok")],
            stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        base, admin = m.groups()
        # both summaries read and the owners' map filled (refreshed in a thread)
        while True:
            everyone = {j["job"] for j in _get(f"{base}/state", admin)["jobs"]}
            mine = {j["job"] for j in _get(f"{base}/state", tokens["alice"])["jobs"]}
            if everyone == {"11", "21"} and mine:
                break
            assert time.monotonic() < deadline, (everyone, mine, log.read_text())
            time.sleep(0.5)
        for job, user in OWNERS.items():
            state = _get(f"{base}/state", tokens[user])
            assert [j["job"] for j in state["jobs"]] == [job]
            assert set(_get(f"{base}/history", tokens[user])) <= {job}
            events = _get(f"{base}/events?max=2", tokens[user])
            assert len(events) == 2 and all([j["job"] for j in e["jobs"]] == [job] for e in events)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    assert "Traceback" not in log.read_text()
