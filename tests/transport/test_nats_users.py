"""The NATS logins of the deploy configs (python/hushmon/transport/natsusers.py)
on a real nats-server with TLS on, set up as `deploy secrets` sets up a site
(tests/transport/natssite.py): over NATS the uid in a control request is
only a claim, so the server must keep steering to the admin login. A real
agent logged in as its node publishes its batches (acknowledged by
JetStream) and answers the admin's `hushmon ctl`; the node, viewer, reduce
and collect logins are refused when they publish a control request, with a
clear error, and the agent's period does not change; a wrong password or
none is refused."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from natssite import RACKS, Site, client_env, secure_site

from hushmon.paths import REPO_ROOT
from hushmon.transport.natsserver import ensure_streams, site_consumers


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    with secure_site(tmp_path) as s:
        yield s


def hushmon_as(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A hushmon command with exactly the login in env (none if empty)."""
    full = {**client_env(env), "PYTHONPATH": str(REPO_ROOT / "python")}
    return subprocess.run(
        [sys.executable, "-m", "hushmon.cli", *args],
        capture_output=True, text=True, timeout=60, check=False, env=full,
    )  # fmt: skip


def hushmon_ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return hushmon_as(env, "ctl", *args)


def test_a_refused_login_is_one_line_for_every_client(site: Site, tmp_path: Path) -> None:
    # nats-py tries a refused login again without end: the collector (which
    # waits for a server with --wait), the status and the live view would
    # have waited silently
    url = site.url
    bad = tmp_path / "wrong.password"
    bad.write_text("notthepassword\n")
    for args in (
        ("collect", "--url", url, "--db", str(tmp_path / "c.duckdb"), "--wait"),
        ("transport", "status", "--url", url, "--db", str(tmp_path / "c.duckdb")),
        ("top", "--url", url, "--once"),
    ):
        r = hushmon_as(site.env("viewer", bad), *args)
        assert r.returncode == 1, (args, r.stderr)
        # the error is the last line (the collector logs what NATS said before it)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"hushmon: NATS server {url} refused the login of user 'viewer'")
        assert "Traceback" not in r.stderr, r.stderr


async def publish_refused(site: Site, user: str, subject: str) -> str:
    """The server's error for this login publishing there ('' when allowed)."""
    nc = await site.connect(user)
    await nc.publish(subject, b"x")
    await nc.flush()
    await asyncio.sleep(0.3)  # the -ERR comes after the PONG
    await nc.close()
    return " ".join(site.errors.pop(user, []))


def agent_status(bin_dir: Path, sock: Path) -> str:
    out = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--send", "status"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_only_the_admin_login_may_steer_the_agents(
    bin_dir: Path, tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = site.url
    for k, v in site.env("admin").items():
        monkeypatch.setenv(k, v)
    ensure_streams(url, consumers=site_consumers(RACKS))  # the admin's step
    sock = tmp_path / "agent.sock"
    log = tmp_path / "agent.log"
    agent = subprocess.Popen(
        [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--host", "n1", "--sources",
         "self", "--period-ms", "300", "--sink", "nats", "--nats-url", url,
         "--spool-dir", str(tmp_path / "spool")],
        env=client_env(site.env("n1")),
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

        admin = site.env("admin")
        r = hushmon_ctl(admin, "set", "period=500ms", "--nodes", "n1", "--url", url)
        assert r.returncode == 0 and "n1\tok\tperiod_ms=500" in r.stdout, r.stdout + r.stderr
        for user in ("n1", "n2", "viewer", "reduce-r1", "reduce-top", "collect"):
            r = hushmon_ctl(site.env(user), "set", "period=200ms", "--nodes", "n1",
                            "--url", url)  # fmt: skip
            assert r.returncode == 1, (user, r.stdout, r.stderr)
            assert "NATS refused the request" in r.stderr, (user, r.stderr)
            # a node or a reducer may not even read the reply inbox ctl subscribes to
            own_inbox = user in ("n1", "n2") or user.startswith("reduce-")
            what = "subscription to" if own_inbox else 'publish to "hm.ctl.host.n1"'
            assert f"permissions violation for {what}" in r.stderr.lower(), r.stderr
            assert "Traceback" not in r.stderr
        r = hushmon_ctl(site.env("viewer"), "app", "*", "dump", "--job", "1", "--url", url)
        assert r.returncode == 1 and "NATS refused the request" in r.stderr, r.stderr
        assert "period_ms=500 " in agent_status(bin_dir, sock)  # unchanged

        bad = tmp_path / "wrong.password"
        bad.write_text("notthepassword\n")
        r = hushmon_ctl(site.env("admin", bad), "status", "--nodes", "n1", "--url", url)
        assert r.returncode == 1 and "authorization violation" in r.stderr.lower(), r.stderr
        r = hushmon_ctl(site.tls_files("admin").env(), "status", "--nodes", "n1", "--url", url)
        assert r.returncode == 1 and "authorization violation" in r.stderr.lower(), r.stderr
    finally:
        agent.terminate()
        agent.wait(timeout=10)

    async def roles() -> None:
        # what each role needs is allowed, steering is not
        assert await publish_refused(site, "reduce-r1", "hm.sum.rack.r1") == ""
        assert await publish_refused(site, "reduce-top", "hm.sum.job.j1") == ""
        assert await publish_refused(site, "n1", "hm.raw.r1.n1") == ""
        assert await publish_refused(site, "alert", "hm.alert.j1") == ""
        for user, subject in (
            ("n1", "hm.ctl.all"),
            ("reduce-r1", "hm.ctl.all"),
            ("reduce-r1", "hm.sum.rack.r2"),  # another rack's partials
            ("reduce-r1", "hm.sum.job.j1"),
            ("reduce-top", "hm.sum.rack.r1"),
            ("viewer", "hm.sum.rack.r1"),  # a viewer cannot forge summaries either
            ("n1", "hm.sum.rack.r1"),
            ("viewer", "$JS.API.STREAM.DELETE.HM_RAW"),
            ("viewer", "hm.alert.j1"),  # only hushmon alert's login raises alerts
            ("alert", "hm.sum.job.j1"),
            ("alert", "hm.ctl.all"),
        ):
            why = await publish_refused(site, user, subject)
            assert "permissions violation" in why.lower(), (user, subject, why)
        # a viewer reads the agents' batches
        nc = await site.connect("viewer")
        sub = await nc.subscribe("hm.raw.>")
        nc2 = await site.connect("n1")
        await nc2.publish("hm.raw.r1.n1", b"cpu x=1")
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"cpu x=1"
        await nc2.close()
        await nc.close()

    asyncio.run(roles())


T0 = 1_795_000_000_000_000_000


def test_reducers_collector_and_viewer_work_with_their_logins(
    bin_dir: Path, tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path under the logins, over TLS, bound to the consumers the
    admin step made: batches published by two nodes (each its own login),
    the rack reducer as `reduce-r1`, the top reducer as `reduce-top`,
    summaries seen by `hushmon top --once` as `viewer` (direct get and a
    core subscription: no consumer), the store filled as `collect`. No
    client trips a permission."""
    url = site.url
    for k, v in site.env("admin").items():
        monkeypatch.setenv(k, v)
    ensure_streams(url, consumers=site_consumers(RACKS))

    async def publish_batches() -> None:
        for seq_host, host in enumerate(("a1", "a2")):
            nc = await site.connect(host)
            js = nc.jetstream()
            for period in range(4):
                t = T0 + period * 1_000_000_000
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
    for user, args in (("reduce-r1", ("--rack", "r1")), ("reduce-top", ("--top",))):
        log = tmp_path / f"{user}.log"
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
                    env=client_env(site.env(user)),
                    stdout=subprocess.DEVNULL,
                    stderr=log.open("wb"),
                ),
                log,
            )
        )

    async def job_summaries() -> int:
        nc = await site.connect("admin")
        info = await nc.jetstream().stream_info("HM_SUM", subjects_filter="hm.sum.job.>")
        await nc.close()
        return sum((info.state.subjects or {}).values())

    try:
        deadline = time.monotonic() + 30
        while asyncio.run(job_summaries()) < 3:
            for proc, log in reducers:
                assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, [log.read_text()[-1500:] for _, log in reducers]
            time.sleep(0.2)
        top = hushmon_as(site.env("viewer"), "top", "--url", url, "--once", "--stale-s", "0")
        assert top.returncode == 0, top.stderr
        assert "jobs 1" in top.stdout and "job j1: 2 node(s) a1 a2" in top.stdout, top.stdout
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
        env={**client_env(site.env("collect")), "PYTHONPATH": str(REPO_ROOT / "python")},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["batches_stored"], doc["rejected_batches"]) == (8, 0), doc
    assert doc["summaries_stored"] >= 3, doc
    assert "Violation" not in site.log, site.log[-3000:]
