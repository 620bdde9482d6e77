"""The NATS logins of the deploy configs (python/hushmon/transport/natsusers.py)
on a real nats-server: over NATS the uid in a control request is only a
claim, so the server must keep steering to the admin login. A real agent
logged in as "agent" publishes its batches (acknowledged by JetStream) and
answers the admin's `hushmon ctl`; the agent, viewer and reduce logins are
refused when they publish a control request, with a clear error, and the
agent's period does not change; a wrong password or none is refused."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from hushmon.paths import REPO_ROOT
from hushmon.transport.natsserver import LocalNatsServer, NatsServerConfig, ensure_streams
from hushmon.transport.natsusers import generate_passwords, render_users


@pytest.fixture
def secured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """A JetStream server with the deploy configs' logins; the passwords
    folder as `deploy passwords` writes it."""
    folder = tmp_path / "pw"
    generate_passwords(folder, ["127.0.0.1"], 7422)
    for line in (folder / "nats-server.env").read_text().split():
        key, value = line.split("=", 1)
        monkeypatch.setenv(key, value)  # the server's EnvironmentFile
    cfg = NatsServerConfig(name="secured", store_dir=tmp_path / "js", users_block=render_users())
    with LocalNatsServer(cfg, tmp_path) as server:
        yield server.url, folder


def login(folder: Path, user: str, password_file: Path | None = None) -> dict[str, str]:
    return {
        "HUSHMON_NATS_USER": user,
        "HUSHMON_NATS_PASSWORD_FILE": str(password_file or folder / f"{user}.password"),
    }


def hushmon_as(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A hushmon command with exactly the login in env (none if empty)."""
    full = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "python"), **env}
    for k in ("HUSHMON_NATS_USER", "HUSHMON_NATS_PASSWORD_FILE"):
        if k not in env:
            full.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args],
        capture_output=True, text=True, timeout=60, check=False, env=full,
    )  # fmt: skip


def hushmon_ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return hushmon_as(env, "ctl", *args)


def test_a_refused_login_is_one_line_for_every_client(
    secured: tuple[str, Path], tmp_path: Path
) -> None:
    # nats-py tries a refused login again without end: the collector (which
    # waits for a server with --wait), the status and the live view would
    # have waited silently
    url, folder = secured
    bad = tmp_path / "wrong.password"
    bad.write_text("notthepassword\n")
    for args in (
        ("collect", "--url", url, "--db", str(tmp_path / "c.duckdb"), "--wait"),
        ("transport", "status", "--url", url, "--db", str(tmp_path / "c.duckdb")),
        ("top", "--url", url, "--once"),
    ):
        r = hushmon_as(login(folder, "viewer", bad), *args)
        assert r.returncode == 1, (args, r.stderr)
        # the error is the last line (the collector logs what NATS said before it)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"hushmon: NATS server {url} refused the login of user 'viewer'")
        assert "Traceback" not in r.stderr, r.stderr


async def publish_refused(url: str, folder: Path, user: str, subject: str) -> str:
    """The server's error for this login publishing there ('' when allowed)."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    pw = (folder / f"{user}.password").read_text().strip()
    nc = await nats.connect(url, user=user, password=pw, error_cb=on_error)
    await nc.publish(subject, b"x")
    await nc.flush()
    await asyncio.sleep(0.3)  # the -ERR comes after the PONG
    await nc.close()
    return " ".join(errors)


def agent_status(bin_dir: Path, sock: Path) -> str:
    out = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--send", "status"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_only_the_admin_login_may_steer_the_agents(
    bin_dir: Path, tmp_path: Path, secured: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, folder = secured
    for k, v in login(folder, "collect").items():
        monkeypatch.setenv(k, v)
    ensure_streams(url)  # the collect login declares the streams
    sock = tmp_path / "agent.sock"
    log = tmp_path / "agent.log"
    agent = subprocess.Popen(
        [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--host", "n1", "--sources",
         "self", "--period-ms", "300", "--sink", "nats", "--nats-url", url,
         "--spool-dir", str(tmp_path / "spool")],
        env={**os.environ, **login(folder, "agent")},
        stdout=subprocess.DEVNULL, stderr=log.open("wb"),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 15
        while True:  # connected, and JetStream acknowledged its batches
            assert agent.poll() is None, log.read_text()
            status = agent_status(bin_dir, sock) if sock.exists() else ""
            acked = re.search(r" acked_seq=(\d+)", status)
            if " connected=1 " in status and acked and int(acked.group(1)) >= 2:
                break
            assert time.monotonic() < deadline, status + log.read_text()
            time.sleep(0.1)

        admin = login(folder, "admin")
        r = hushmon_ctl(admin, "set", "period=500ms", "--nodes", "n1", "--url", url)
        assert r.returncode == 0 and "n1\tok\tperiod_ms=500" in r.stdout, r.stdout + r.stderr
        for user in ("agent", "viewer", "reduce", "collect"):
            r = hushmon_ctl(login(folder, user), "set", "period=200ms", "--nodes", "n1",
                            "--url", url)  # fmt: skip
            assert r.returncode == 1, (user, r.stdout, r.stderr)
            assert "NATS refused the request" in r.stderr, (user, r.stderr)
            assert 'permissions violation for publish to "hm.ctl.host.n1"' in r.stderr.lower()
            assert "Traceback" not in r.stderr
        r = hushmon_ctl(login(folder, "viewer"), "app", "*", "dump", "--job", "1", "--url", url)
        assert r.returncode == 1 and "NATS refused the request" in r.stderr, r.stderr
        assert "period_ms=500 " in agent_status(bin_dir, sock)  # unchanged

        bad = tmp_path / "wrong.password"
        bad.write_text("notthepassword\n")
        r = hushmon_ctl(login(folder, "admin", bad), "status", "--nodes", "n1", "--url", url)
        assert r.returncode == 1 and "authorization violation" in r.stderr.lower(), r.stderr
        r = hushmon_ctl({}, "status", "--nodes", "n1", "--url", url)
        assert r.returncode == 1 and "authorization violation" in r.stderr.lower(), r.stderr
    finally:
        agent.terminate()
        agent.wait(timeout=10)

    async def roles() -> None:
        # what each role needs is allowed, steering is not
        assert await publish_refused(url, folder, "reduce", "hm.sum.rack.r1") == ""
        assert await publish_refused(url, folder, "agent", "hm.raw.r1.n1") == ""
        for user, subject in (
            ("agent", "hm.ctl.all"),
            ("reduce", "hm.ctl.all"),
            ("viewer", "hm.sum.rack.r1"),  # a viewer cannot forge summaries either
            ("agent", "hm.sum.rack.r1"),
            ("viewer", "$JS.API.STREAM.DELETE.HM_RAW"),
        ):
            why = await publish_refused(url, folder, user, subject)
            assert "permissions violation" in why.lower(), (user, subject, why)
        # a viewer reads the agents' batches
        pw = (folder / "viewer.password").read_text().strip()
        nc = await nats.connect(url, user="viewer", password=pw)
        sub = await nc.subscribe("hm.raw.>")
        apw = (folder / "agent.password").read_text().strip()
        nc2 = await nats.connect(url, user="agent", password=apw)
        await nc2.publish("hm.raw.r1.n1", b"cpu x=1")
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"cpu x=1"
        await nc2.close()
        await nc.close()

    asyncio.run(roles())


T0 = 1_795_000_000_000_000_000


def test_reducers_collector_and_viewer_work_with_their_logins(
    bin_dir: Path, tmp_path: Path, secured: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path under the logins: batches published as `agent`, rack
    and top reducers as `reduce`, summaries read as `viewer` (JetStream
    ordered consumer), the store filled as `collect`."""
    url, folder = secured
    for k, v in login(folder, "collect").items():
        monkeypatch.setenv(k, v)
    ensure_streams(url)

    async def publish_batches() -> None:
        pw = (folder / "agent.password").read_text().strip()
        nc = await nats.connect(url, user="agent", password=pw)
        js = nc.jetstream()
        for period in range(4):
            t = T0 + period * 1_000_000_000
            for seq_host, host in enumerate(("a1", "a2")):
                text = f"cpu,host={host},cpu=total user_pct={10 + seq_host}.5 {t}\n"
                text += f"job,host={host},job=j1 active=1i {t}\n"
                await js.publish(
                    f"hm.raw.r1.{host}",
                    text.encode(),
                    headers={
                        "Nats-Msg-Id": f"{host}:7:{period + 1}", "Hm-Host": host,
                        "Hm-Epoch": "7", "Hm-Seq": str(period + 1), "Hm-Lines": "2",
                        "Hm-Dropped": "0",
                    },
                )  # fmt: skip
        await nc.close()

    asyncio.run(publish_batches())
    reducers = []
    for args in (("--rack", "r1"), ("--top",)):
        log = tmp_path / f"reduce{len(reducers)}.log"
        reducers.append(
            (
                subprocess.Popen(
                    [
                        str(bin_dir / "hushmon-reduce"),
                        "--url",
                        url,
                        "--period-grace-ms",
                        "300",
                        *args,
                    ],
                    env={**os.environ, **login(folder, "reduce")},
                    stdout=subprocess.DEVNULL,
                    stderr=log.open("wb"),
                ),
                log,
            )
        )

    async def read_summaries() -> list[bytes]:
        pw = (folder / "viewer.password").read_text().strip()
        nc = await nats.connect(url, user="viewer", password=pw)
        js = nc.jetstream()
        sub = await js.subscribe("hm.sum.job.>", ordered_consumer=True)
        out = []
        try:
            while True:
                out.append((await sub.next_msg(timeout=1.0)).data)
        except nats.errors.TimeoutError:
            pass
        await nc.close()
        return out

    try:
        deadline = time.monotonic() + 30
        while len(summaries := asyncio.run(read_summaries())) < 3:
            for proc, log in reducers:
                assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, [log.read_text()[-1500:] for _, log in reducers]
        assert all(b'"job": "j1"' in s or b'"job":"j1"' in s for s in summaries), summaries[0]
    finally:
        for proc, _ in reducers:
            proc.terminate()
            proc.wait(timeout=30)
    for _, log in reducers:
        assert "violation" not in log.read_text().lower(), log.read_text()

    r = subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", url, "--db",
         str(tmp_path / "store.duckdb"), "--once", "--json", "-"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "python"), **login(folder, "collect")},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["batches_stored"], doc["rejected_batches"]) == (8, 0), doc
    assert doc["summaries_stored"] >= 3, doc
