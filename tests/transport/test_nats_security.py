"""The NATS attacks of issue 19 sent to a real nats-server set up as a site
(tests/transport/natssite.py: TLS with client certificates, the logins of
natsusers): a plain client, a client trusting another CA and one without a
certificate are refused; node n1 cannot publish n2's batches nor take n2's
control requests; each role is refused every JetStream action beyond its
own (stream delete, purge, update, create, message delete, another's
consumer) and the refusals are in the server's log with the user; the
agent (C) refuses a server its CA or name does not vouch for; the
collector counts a batch whose header claims another host against the
node whose subject (the server-checked identity) it came on."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import nats
import pytest
from natssite import RACKS, Site, client_env, secure_site

from hushmon.paths import REPO_ROOT
from hushmon.transport.natsserver import ensure_streams, site_consumers
from hushmon.transport.natstls import TlsFiles, client_context, make_ca, write_identity


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with secure_site(tmp_path) as s:
        for k, v in s.env("admin").items():
            monkeypatch.setenv(k, v)
        ensure_streams(s.url, consumers=site_consumers(RACKS))  # the admin's step
        yield s


async def refused_connect(site: Site, **options: object) -> str:
    """Why the server (or the client's check of it) refused; '' if it did not."""
    try:
        nc = await nats.connect(
            site.url.replace("tls://", "nats://") if options.pop("plain", False) else site.url,
            user="admin",
            password=site.password_file("admin").read_text().strip(),
            max_reconnect_attempts=0,
            connect_timeout=3,
            allow_reconnect=False,
            **options,  # type: ignore[arg-type]
        )
    except Exception as exc:  # noqa: BLE001 - nats-py raises many kinds
        return f"{type(exc).__name__}: {exc}"
    await nc.close()
    return ""


def test_tls_refuses_plain_clients_foreign_cas_and_clients_without_a_certificate(
    site: Site, tmp_path: Path
) -> None:
    async def attempts() -> dict[str, str]:
        other = tmp_path / "other-ca"
        make_ca(other, "someone else's CA")
        write_identity(other, "intruder", "intruder")
        bare = ssl.create_default_context(cafile=str(site.tls_files("admin").ca_file))
        return {
            "plain": await refused_connect(site, plain=True),
            "foreign CA": await refused_connect(
                site, tls=client_context(TlsFiles(other / "ca.pem"))
            ),
            "foreign client certificate": await refused_connect(
                site,
                tls=client_context(
                    TlsFiles(
                        site.tls_files("admin").ca_file,
                        other / "intruder.pem",
                        other / "intruder.key",
                    )
                ),
            ),
            "no client certificate": await refused_connect(site, tls=bare),
            "the site's admin": await refused_connect(site, tls=site.context("admin")),
        }

    why = asyncio.run(attempts())
    assert why.pop("the site's admin") == "", "the control case must connect"
    for case, reason in why.items():
        assert reason, f"{case}: connected"
    assert "CERTIFICATE_VERIFY_FAILED" in why["foreign CA"]
    log = site.log
    # the server saw the bad client certificates (and says so, with the address)
    assert log.count("TLS handshake error") >= 2, log[-3000:]


def test_a_node_cannot_publish_or_take_another_nodes_subjects(site: Site) -> None:
    async def attack() -> list[str]:
        n1 = await site.connect("n1")
        js = n1.jetstream()
        ack = await js.publish("hm.raw.r1.n1", b"cpu,host=n1 x=1 1\n")  # its own: fine
        assert ack.stream == "HM_RAW"
        await n1.publish("hm.raw.r1.n2", b"cpu,host=n2 x=1 1\n")  # forge n2's batch
        await n1.publish("hm.raw.r2.n2", b"cpu,host=n2 x=1 1\n")  # in any rack
        await n1.subscribe("hm.ctl.host.n2")  # take n2's control requests
        await n1.subscribe("hm.ctl.>")
        await n1.subscribe("_INBOX.>")  # read others' replies and pulled batches
        await n1.flush()
        await asyncio.sleep(0.5)
        await n1.close()
        return [e.lower() for e in site.errors["n1"]]

    errors = asyncio.run(attack())
    for what in (
        'publish to "hm.raw.r1.n2"',
        'publish to "hm.raw.r2.n2"',
        'subscription to "hm.ctl.host.n2"',
        'subscription to "hm.ctl.>"',
        'subscription to "_inbox.>"',
    ):
        assert any(f"permissions violation for {what}" in e for e in errors), (what, errors)
    log = site.log
    assert 'Publish Violation - User "n1", Subject "hm.raw.r1.n2"' in log, log[-3000:]
    assert 'Subscription Violation - User "n1", Subject "hm.ctl.host.n2"' in log
    # nothing of n2 reached the stream: n1's one batch only

    async def raw_count() -> int:
        nc = await site.connect("admin")
        info = await nc.jetstream().stream_info("HM_RAW")
        await nc.close()
        return int(info.state.messages)

    assert asyncio.run(raw_count()) == 1


RAW, SUM = "HM_RAW", "HM_SUM"
CONSUMERS = (
    (RAW, "collect-raw"), (SUM, "collect-sum"), (SUM, "reduce-top"),
    (RAW, "reduce-r1"), (RAW, "reduce-r2"),
)  # fmt: skip
# Every action that changes or takes what is not the role's own. The
# leaf forwards its clients' API calls as $JS.hub.API (its mapping).
_SHRINK = {"name": RAW, "subjects": ["hm.raw.>"], "max_msgs": 1, "storage": "file"}
# A consumer pushing HM_SUM to the agents' control subject: the server does
# not check a deliver subject against its creator's permissions.
_PUSH_TO_CTL = {"stream_name": SUM, "config": {"deliver_subject": "hm.ctl.all"}}
FORBIDDEN: list[tuple[str, dict[str, object]]] = [
    (f"STREAM.DELETE.{RAW}", {}),
    (f"STREAM.PURGE.{RAW}", {}),
    (f"STREAM.UPDATE.{RAW}", _SHRINK),
    ("STREAM.CREATE.HM_EVIL", {"name": "HM_EVIL", "subjects": ["hm.evil.>"]}),
    (f"STREAM.MSG.DELETE.{RAW}", {"seq": 1}),
    (f"STREAM.DELETE.{SUM}", {}),
    *((f"CONSUMER.DELETE.{st}.{c}", {}) for st, c in CONSUMERS),
    # a consumer's messages, its state
    *((f"CONSUMER.MSG.NEXT.{st}.{c}", {"batch": 1}) for st, c in CONSUMERS),
    *((f"CONSUMER.INFO.{st}.{c}", {}) for st, c in CONSUMERS),
    # made or redefined, in every form clients use: none but the admin's
    *((f"CONSUMER.{verb}.{st}.{c}", {"stream_name": st, "config": {}})
      for verb in ("DURABLE.CREATE", "CREATE") for st, c in CONSUMERS),
    (f"CONSUMER.CREATE.{RAW}.reduce-r1.hm.raw.r1.>", {"stream_name": RAW, "config": {}}),
    (f"CONSUMER.CREATE.{SUM}", _PUSH_TO_CTL),  # ephemeral, push
    (f"CONSUMER.CREATE.{SUM}", {"stream_name": SUM, "config": {}}),  # ephemeral, pull
]  # fmt: skip
_INFO_ALL = {f"CONSUMER.INFO.{st}.{c}" for st, c in CONSUMERS}
# What each role may do of the list above: its own consumer (pull, state),
# the state of all for the roles that report it (transport status).
OWN = {
    "viewer": _INFO_ALL,
    "collect": {f"CONSUMER.MSG.NEXT.{RAW}.collect-raw", f"CONSUMER.MSG.NEXT.{SUM}.collect-sum"}
    | _INFO_ALL,
    "reduce-r1": {f"CONSUMER.MSG.NEXT.{RAW}.reduce-r1", f"CONSUMER.INFO.{RAW}.reduce-r1"},
    "reduce-top": {f"CONSUMER.MSG.NEXT.{SUM}.reduce-top", f"CONSUMER.INFO.{SUM}.reduce-top"},
    # a rack leaf forwards its reducers' pulls (each checked by the leaf
    # against that reducer's own login)
    "leaf": {f"CONSUMER.MSG.NEXT.{RAW}.reduce-r1", f"CONSUMER.MSG.NEXT.{RAW}.reduce-r2"}
    | _INFO_ALL,
}
# Summaries each role may publish.
PUBLISHES = {
    "reduce-r1": {"hm.sum.rack.r1"},
    "reduce-top": {"hm.sum.job.j1"},
    "leaf": {"hm.sum.rack.r1", "hm.sum.rack.r2"},
}


@pytest.mark.parametrize("role", ["viewer", "collect", "reduce-r1", "reduce-top", "n1", "leaf"])
def test_each_role_is_refused_every_forbidden_action(site: Site, role: str) -> None:
    """Every role (but the admin) is refused stream changes, message
    deletes, consumer deletes, every form of consumer creation (durable,
    named, filtered, ephemeral push to hm.ctl.all, ephemeral pull), and
    another's consumer (pull, state): rack reducer r1 cannot touch r2's."""

    async def setup() -> None:
        nc = await site.connect("admin")
        await nc.jetstream().publish("hm.raw.r1.n1", b"cpu,host=n1 x=1 1\n")
        await nc.close()

    async def attack() -> list[str]:
        nc = await site.connect(role)
        tried = []
        for tail, body in FORBIDDEN:
            if tail in OWN.get(role, set()):
                continue
            for prefix in ("$JS.API", "$JS.hub.API"):
                subject = f"{prefix}.{tail}"
                tried.append(subject)
                await nc.publish(subject, json.dumps(body).encode(), reply=f"_INBOX.{role}.x")
        for subject in ("hm.ctl.all", "hm.sum.rack.r1", "hm.sum.rack.r2", "hm.sum.job.j1"):
            if subject not in PUBLISHES.get(role, set()):
                tried.append(subject)
                await nc.publish(subject, b"x")
        await nc.flush()
        await asyncio.sleep(0.5)
        await nc.close()
        return tried

    async def state() -> tuple[int, list[str], list[str]]:
        nc = await site.connect("admin")
        js = nc.jetstream()
        raw = await js.stream_info(RAW)
        streams = sorted([s.config.name for s in await js.streams_info()])
        consumers = sorted(
            [
                f"{st}/{c.name}/{c.config.ack_wait}/{c.config.deliver_subject}/{c.delivered}"
                for st in (RAW, SUM)
                for c in await js.consumers_info(st)
            ]
        )
        await nc.close()
        return int(raw.state.messages), streams, consumers

    asyncio.run(setup())
    before = asyncio.run(state())
    tried = asyncio.run(attack())
    errors = " ".join(site.errors.get(role, [])).lower()
    log = site.log
    for subject in tried:
        assert f'permissions violation for publish to "{subject.lower()}"' in errors, (
            role,
            subject,
        )
        assert f'Publish Violation - User "{role}", Subject "{subject}"' in log, (role, subject)
    # nothing deleted, purged, shrunk, added, redefined or pulled
    assert asyncio.run(state()) == before
    assert before[0] == 1 and before[1] == [RAW, SUM] and len(before[2]) == len(CONSUMERS)


def test_a_reducer_reads_its_own_inbox_only(site: Site) -> None:
    """A rack reducer's replies (pulled batches, acks) come to its own
    inbox (hushmon-reduce sets it from its login); it cannot subscribe to
    another's, where r2's pulled batches arrive."""

    async def go() -> list[str]:
        nc = await site.connect("reduce-r1")
        for subject in ("_INBOX.>", "_INBOX.reduce-r2.>", "hm.raw.>"):
            await nc.subscribe(subject)
        await nc.flush()
        await asyncio.sleep(0.3)
        await nc.close()
        return site.errors.get("reduce-r1", [])

    errors = " ".join(asyncio.run(go())).lower()
    for subject in ("_INBOX.>", "_INBOX.reduce-r2.>", "hm.raw.>"):
        assert f'permissions violation for subscription to "{subject.lower()}"' in errors, errors
        assert f'Subscription Violation - User "reduce-r1", Subject "{subject}"' in site.log


def test_the_collector_counts_a_forged_host_against_the_subjects_node(
    site: Site, tmp_path: Path
) -> None:
    """n1 may publish only its own subject; a batch there claiming to be n2
    (header and host tags) is rejected by the collector and recorded as
    n1's, the identity the server checked."""

    async def forge() -> None:
        nc = await site.connect("n1")
        await nc.jetstream().publish(
            "hm.raw.r1.n1",
            b"cpu,host=n2,cpu=total user_pct=5 1795000000000000000\n",
            headers={"Nats-Msg-Id": "n2:7:1", "Hm-Host": "n2", "Hm-Epoch": "7", "Hm-Seq": "1",
                     "Hm-Lines": "1", "Hm-Dropped": "0"},
        )  # fmt: skip
        await nc.close()

    asyncio.run(forge())
    db = tmp_path / "store.duckdb"
    r = subprocess.run(
        [sys.executable, "-m", "hushmon.cli", "collect", "--url", site.url, "--db", str(db),
         "--once", "--json", "-"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**client_env(site.env("collect")), "PYTHONPATH": str(REPO_ROOT / "python")},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["batches_stored"], doc["rejected_batches"]) == (0, 1), doc
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT kind, host, reason FROM transport_events").fetchall()
    assert [(k, h) for k, h, _ in rows] == [("rejected", "n1")], rows
    assert "n2" in rows[0][2]  # the reason names the claim


def test_the_agent_checks_the_servers_certificate(
    site: Site, tmp_path: Path, bin_dir: Path
) -> None:
    """The C client (agent; hushmon-reduce shares hm_nats_client.h) connects
    and is acknowledged with the site's CA, and never connects when it
    trusts another CA or expects another server name."""
    other = tmp_path / "other-ca"
    make_ca(other, "someone else's CA")

    def agent_status(env: dict[str, str], name: str, wait_s: float, *args: str) -> str:
        sock = tmp_path / f"{name}.sock"
        log = tmp_path / f"{name}.log"
        agent = subprocess.Popen(
            [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--host", "n1", "--sources",
             "self", "--period-ms", "200", "--sink", "nats", "--nats-url", site.url,
             "--spool-dir", str(tmp_path / name), *args],
            env=client_env(env), stdout=subprocess.DEVNULL, stderr=log.open("wb"),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + wait_s
            while True:
                if agent.poll() is not None:
                    return f"exited {agent.returncode}: {log.read_text()}"
                status = ""
                if sock.exists():
                    status = subprocess.run(
                        [str(bin_dir / "hushmon-agent"), "--socket", str(sock), "--send",
                         "status"],
                        capture_output=True, text=True, timeout=30, check=False,
                    ).stdout  # fmt: skip
                acked = re.search(r" acked_seq=(\d+)", status)
                if (acked and int(acked.group(1)) >= 2) or time.monotonic() > deadline:
                    return status
                time.sleep(0.2)
        finally:
            agent.terminate()
            agent.wait(timeout=30)

    good = agent_status(site.env("n1"), "good", 15)
    assert "exited" not in good, good
    assert " connected=1 " in good and int(re.findall(r" acked_seq=(\d+)", good)[0]) >= 2, good
    # a few seconds: a local connection attempt every 0.5 s, each refused
    # A refused server never gets a batch, and the agent stays up sampling
    # into its spool and dials again (libnats closes a connection whose
    # first TLS handshake failed; the sink makes a new one, with back-off):
    # the server sees each agent try again.
    foreign_ca = {**site.env("n1"), "HUSHMON_NATS_CA_FILE": str(other / "ca.pem")}
    wrong_name_env = {**site.env("n1"), "HUSHMON_NATS_TLS_HOSTNAME": "elsewhere"}
    for env, name in ((foreign_ca, "ca"), (wrong_name_env, "nm")):
        before = site.log.count("TLS handshake error")
        refused = agent_status(env, name, 4)
        assert "exited" not in refused, refused
        assert " connected=0 " in refused and " acked_seq=0 " in refused, refused
        assert site.log.count("TLS handshake error") >= before + 2, refused

    # The TLS files from the agent's configuration file only ([nats]), its
    # environment holding the login alone; a setting in the file wins over
    # its variable (here a CA that would be refused).
    tls = site.tls_files("n1")
    conf = tmp_path / "agent.toml"
    conf.write_text(
        f'[nats]\nca_file = "{tls.ca_file}"\ncert_file = "{tls.cert_file}"\n'
        f'key_file = "{tls.key_file}"\ntls_hostname = "127.0.0.1"\n'
    )
    login = {k: v for k, v in site.env("n1").items() if k.startswith("HUSHMON_NATS_USER")
             or k.startswith("HUSHMON_NATS_PASSWORD")}  # fmt: skip
    from_file = agent_status(login, "file", 15, "--config", str(conf))
    assert " connected=1 " in from_file and int(re.findall(r" acked_seq=(\d+)", from_file)[0]) >= 2
    overridden = {**login, "HUSHMON_NATS_CA_FILE": str(other / "ca.pem")}
    wins = agent_status(overridden, "wins", 15, "--config", str(conf))
    assert " connected=1 " in wins and int(re.findall(r" acked_seq=(\d+)", wins)[0]) >= 2, wins
    # a file the agent cannot read: refused when the configuration loads
    conf.write_text(f'[nats]\nca_file = "{tmp_path / "missing.pem"}"\n')
    r = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--config", str(conf), "--sink", "nats", "--nats-url",
         site.url, "--spool-dir", str(tmp_path / "bad"), "--socket", "", "--once"],
        env=client_env(login), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr
    assert "nats.ca_file" in r.stderr and "missing.pem" in r.stderr, r.stderr


def test_services_bind_only_and_stop_when_the_admin_made_no_consumer(
    tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streams declared, consumers not: the rack reducer, the top reducer
    and the collector, each with its login, stop with one line telling the
    operator to run the admin step, and never try to make the consumer
    (the server logs no violation)."""
    with secure_site(tmp_path) as site:
        for k, v in site.env("admin").items():
            monkeypatch.setenv(k, v)
        ensure_streams(site.url, consumers=[])
        runs = {
            "reduce-r1": [str(bin_dir / "hushmon-reduce"), "--rack", "r1", "--url", site.url],
            "reduce-top": [str(bin_dir / "hushmon-reduce"), "--top", "--url", site.url],
            "collect": [sys.executable, "-m", "hushmon.cli", "collect", "--url", site.url,
                        "--db", str(tmp_path / "c.duckdb"), "--once"],
        }  # fmt: skip
        for user, argv in runs.items():
            env = {**client_env(site.env(user)), "PYTHONPATH": str(REPO_ROOT / "python")}
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
            assert r.returncode == 1, (user, r.stderr)
            last = r.stderr.strip().splitlines()[-1]
            assert "an admin declares" in last and "deploy streams" in last, (user, r.stderr)
            assert "Traceback" not in r.stderr
        assert "Violation" not in site.log, site.log[-2000:]
