"""deploy/nats/: the shipped configuration set is what natsserver.py renders
(the test bed's servers come from the same code), nats-server accepts each
server file, and the settings the transport relies on are in it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hushmon.paths import REPO_ROOT
from hushmon.transport import deploy
from hushmon.transport import natsserver as ns
from hushmon.transport import natsusers as nu

DEPLOY = REPO_ROOT / "deploy" / "nats"


def test_the_shipped_files_are_what_the_code_renders() -> None:
    assert deploy.stale(DEPLOY) == [], "run: python -m hushmon.transport.deploy write deploy/nats"
    assert (DEPLOY / "README.md").is_file()


def deployed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A server's folder as deployed (`deploy secrets`, the server's own pair
    as tls/server.pem and .key, the configs rendered for that folder) and
    its environment (nats-server.env)."""
    folder = tmp_path / "nats"
    nu.generate_secrets(
        folder, deploy.HUB_HOSTS, ["leaf1.example"], ["n1", "n2"], ns.LEAF_PORT, ["r1"]
    )
    tls = folder / nu.TLS_DIR
    for ext in ("pem", "key"):
        shutil.copy(tls / f"server-{deploy.HUB_HOSTS[0]}.{ext}", tls / f"server.{ext}")
    for name, text in deploy.render(folder).items():
        (folder / name).write_text(text)
    env = dict(line.split("=", 1) for line in (folder / "nats-server.env").read_text().split())
    return folder, {**os.environ, **env}


@pytest.mark.parametrize(("name", "env"), [("hub.conf", "HUB_NAME"), ("leaf.conf", "LEAF_NAME")])
def test_nats_server_accepts_them(name: str, env: str, tmp_path: Path) -> None:
    server = shutil.which("nats-server")
    if server is None:
        pytest.skip("nats-server is not installed (scripts/install-deps.sh)")
    folder, server_env = deployed(tmp_path)
    # the shipped file is the rendered one but for the secrets' folder
    shipped = (DEPLOY / name).read_text()
    assert (folder / name).read_text().replace(str(folder), str(deploy.SECRETS_DIR)) == shipped
    ok = subprocess.run(
        [server, "-t", "-c", str(folder / name)],
        capture_output=True,
        text=True,
        env={**server_env, env: "x1"},
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    # A broken file is refused (so the check above can fail).
    (folder / "broken.conf").write_text((folder / name).read_text() + "cluster {\n")
    bad = subprocess.run(
        [server, "-t", "-c", str(folder / "broken.conf")],
        capture_output=True,
        text=True,
        env={**server_env, env: "x1"},
        check=False,
    )
    assert bad.returncode != 0
    # Every listener speaks TLS and checks its peers; the monitor is local.
    text = (folder / name).read_text()
    assert text.count("verify: true") + text.count("verify_cert_and_check_known_urls") >= (
        3 if name == "hub.conf" else 1
    )
    assert 'include "users.conf"' in text and "password" not in text


def _setting(text: str, pattern: str) -> str:
    m = re.search(pattern, text)
    assert m, pattern
    return m.group(1)


def test_hub_settings_match_natsserver() -> None:
    hub = (DEPLOY / "hub.conf").read_text()
    assert _setting(hub, r'listen: "0\.0\.0\.0:(\d+)"') == str(ns.CLIENT_PORT)
    assert _setting(hub, r'domain: "(\w+)"') == ns.JS_DOMAIN
    assert _setting(hub, r'cluster \{ name: "([\w-]+)"') == ns.HUB_CLUSTER_NAME
    routes = re.findall(r"nats-route://[\w.]+:(\d+)", hub)
    assert routes == [str(ns.CLUSTER_PORT)] * 3
    assert _setting(hub, r'leafnodes \{ listen: "0\.0\.0\.0:(\d+)"') == str(ns.LEAF_PORT)
    assert _setting(hub, r"max_payload: (\d+)") == str(ns.MAX_PAYLOAD_BYTES)


def test_leaf_settings_match_natsserver() -> None:
    leaf = (DEPLOY / "leaf.conf").read_text()
    assert "jetstream" not in leaf.split("mappings")[0]  # no JetStream of its own
    assert f'"$JS.API.>": "$JS.{ns.JS_DOMAIN}.API.>"' in leaf
    # the hubs' leaf URLs carry the leaf login: from the servers' environment file
    assert re.findall(r"\$HM_NATS_HUB(\d)_LEAF_URL", leaf) == ["1", "2", "3"]
    assert "tls {" in leaf.split("remotes")[1]  # the uplink is TLS too
    assert _setting(leaf, r'ping_interval: "(\d+)s"') == str(ns.LEAF_PING_INTERVAL_S)
    assert _setting(leaf, r"ping_max: (\d+)") == str(ns.LEAF_PING_MAX)


def test_agent_config_uses_the_nats_sink(tmp_path: Path) -> None:
    text = (DEPLOY / "agent.toml").read_text()
    assert 'type = "nats"' in text and "[nats]" in text
    agent = REPO_ROOT / "build" / "bin" / "hushmon-agent"
    if not agent.exists():
        pytest.skip("hushmon-agent not built")
    # The agent parses the file (its --help lists the keys; a bad key is refused).
    conf = tmp_path / "agent.toml"
    conf.write_text(text.replace("/var/spool/hushmon", str(tmp_path / "spool")))
    out = subprocess.run(
        [str(agent), "--config", str(conf), "--sink", "stdout", "--once", "--socket", ""],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("[nats]", "[nats]\nno_such_key = 1"))
    refused = subprocess.run(
        [str(agent), "--config", str(bad), "--sink", "stdout", "--once", "--socket", ""],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode != 0


def test_each_unit_finds_its_own_secrets(tmp_path: Path) -> None:
    """Every file a service unit loads (its password, certificate and key;
    the rack reducer's for rack r1) is one `deploy secrets --racks r1`
    made: each reducer has a login of its own (reduce-r1, reduce-top)."""
    folder, _ = deployed(tmp_path)
    users = (folder / nu.USERS_FILE).read_text()
    for unit in (
        "hushmon-reduce@.service",
        "hushmon-reduce-top.service",
        "hushmon-collect.service",
        "hushmon-collect-raw@.service",
        "hushmon-collect-summaries@.service",
    ):
        text = deploy.render(folder)[unit].replace("%i", "r1")
        user = re.findall(r"HUSHMON_NATS_USER=(\S+)", text)
        assert len(user) == 1 and f'user: "{user[0]}"' in users, (unit, user)
        loaded = re.findall(r"LoadCredential=[^:]+:(\S+)", text)
        assert len(loaded) == 3, (unit, loaded)
        for path in loaded:
            local = folder / Path(path).relative_to(deploy.SECRETS_DIR)
            assert local.is_file(), (unit, path)
            assert user[0] in local.name, (unit, path)
