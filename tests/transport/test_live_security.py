"""Hostile names and strangers against ``hushmon top`` and ``hushmon serve``,
through the real path: job summaries published to a real nats-server (as
the reducers publish them) with job ids ``constructor`` and ``__proto__``
and names holding terminal escape sequences; ``top`` prints them without
one escape code of theirs; the page rendered in headless Chromium shows
every job; ``serve`` refuses requests without the token or with a foreign
Host header (counted, logged with the peer), and never shows the password
given in ``--url``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from hushmon.transport.natsserver import LocalNatsServer

pytest.importorskip("nats")

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
FIXTURE = Path(__file__).parent.parent / "fixtures" / "live" / "summaries.jsonl"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202e"
# subject token -> the job id the summary carries
JOBS = {"constructor": "constructor", "proto": "__proto__", "esc": f"job{ESCAPES}"}
HOST = f"n1{ESCAPES}"
METRIC = "it\x1b[5mer"


def hostile_summaries() -> list[tuple[str, bytes]]:
    """The recorded job-wide summary of job 42 (real reducers' output) under
    hostile job ids, a host and an application metric name."""
    out = []
    for token, job in JOBS.items():
        last = [json.loads(ln) for ln in FIXTURE.read_text().splitlines()][-1]
        assert last["subject"] == "hm.sum.job.42"
        payload = last["payload"]
        payload["sensors"] = {
            key.replace("iter_s", METRIC).replace("job=42,", f"job={job},"): value
            for key, value in last["payload"]["sensors"].items()
        }
        payload["job"] = job
        payload["time_ns"] = time.time_ns() // 1_000_000_000 * 1_000_000_000
        payload["sources"][0][0] = HOST
        out.append((f"hm.sum.job.{token}", json.dumps(payload).encode()))
    return out


async def _publish(url: str, msgs: list[tuple[str, bytes]]) -> None:
    import nats

    nc = await nats.connect(url)
    js = nc.jetstream()
    for subject, payload in msgs:
        await js.publish(subject, payload)
    await nc.close()


@pytest.fixture
def hostile(nats_server: LocalNatsServer) -> str:
    asyncio.run(_publish(nats_server.url, hostile_summaries()))
    return nats_server.url


def hushmon(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HUSHMON, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def test_top_shows_hostile_names_escaped_never_obeyed(hostile: str) -> None:
    url = hostile.replace("nats://", "nats://viewer:s3cret-pass@")
    r = hushmon("top", "--url", url, "--once", "--stale-s", "0")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\x9b" not in r.stdout
    assert "\u202e" not in r.stdout
    assert r"job\x1b]0;owned\x07\x1b[2J\x9b31m\u202e" in r.stdout, r.stdout
    assert r"n1\x1b]0;owned" in r.stdout and r"it\x1b[5mer" in r.stdout, r.stdout
    for job in ("constructor", "__proto__"):
        assert re.search(rf"^{job} +4 ", r.stdout, re.M), r.stdout
    assert "s3cret-pass" not in r.stdout + r.stderr and "nats://***@127.0.0.1" in r.stdout


@contextlib.contextmanager
def serving(url: str, log: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``hushmon serve`` on a free port: the URL it printed, and the process."""
    with log.open("w") as f:
        proc = subprocess.Popen(
            [*HUSHMON, "serve", "--url", url, "--port", "0", "--stale-s", "0", *args], stderr=f
        )
    try:
        deadline = time.monotonic() + 30
        while not (m := re.search(r"(http://\S+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield m.group(1), proc
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert "Traceback" not in log.read_text()


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body; redirects are not followed."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *_args: object, **_kw: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_serve_needs_the_token_and_a_known_host(hostile: str, tmp_path: Path) -> None:
    url = hostile.replace("nats://", "nats://viewer:s3cret-pass@")
    log = tmp_path / "serve.err"
    with serving(url, log) as (printed, _proc):
        m = re.fullmatch(r"(http://127\.0\.0\.1:\d+/)\?token=([\w-]{32,})", printed)
        assert m, printed
        base, token = m.groups()
        assert "s3cret-pass" not in log.read_text()
        bearer = {"Authorization": f"Bearer {token}"}

        assert get(base + "state")[0] == 401
        assert get(base + "state", {"Authorization": "Bearer " + "x" * len(token)})[0] == 401
        assert get(base + "events?max=1", {"Cookie": "hushmon_token=nope"})[0] == 401
        # DNS rebinding: the right token, but the page of another name
        assert (
            get(base + "state", {**bearer, "Host": f"evil.example:{base.split(':')[2]}"})[0] == 403
        )

        status, _h, body = get(base + "state", bearer)
        assert status == 200
        assert {j["job"] for j in json.loads(body)["jobs"]} == set(JOBS.values())
        status, headers, _b = get(f"{base}?token={token}&max=2")
        assert status == 303 and headers["Location"] == "/?max=2"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        status, _h, page = get(base, {"Cookie": cookie})
        assert status == 200 and b"s3cret-pass" not in page and b"nats://***@127.0.0.1" in page
        assert get(base + "history", {"Cookie": cookie})[0] == 200
    text = log.read_text()
    refusals = re.findall(r"refused GET (\S+) HTTP/1.1 from 127\.0\.0\.1:\d+: (.+) \((\d+) ", text)
    assert [(p, why) for p, why, _n in refusals] == [
        ("/state", "no token"),
        ("/state", "wrong token"),
        ("/events?max=1", "wrong token"),
        ("/state", "Host not allowed"),
    ], text
    assert refusals[-1][2] == "4"


def test_page_in_chromium_shows_constructor_and_proto_jobs(hostile: str, tmp_path: Path) -> None:
    from hushmon.report.screenshot import _FLAGS, chromium_path

    browser = chromium_path()
    assert browser, "chromium missing: scripts/install-deps.sh"
    token_file = tmp_path / "token"
    token_file.write_text("t0ken-for-the-chromium-test-0123456789\n")
    token_file.chmod(0o600)
    with serving(hostile, tmp_path / "serve.err", "--token-file", str(token_file)) as (base, _p):
        assert "token=" not in base  # a token from a file is not printed
        dom = subprocess.run(
            [browser, *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=20000", "--dump-dom",
             f"{base}?token=t0ken-for-the-chromium-test-0123456789&max=3"],
            capture_output=True, text=True, timeout=120, check=False,
        ).stdout  # fmt: skip
    assert re.search(r'id="updates">3<', dom), dom[-3000:]
    for job in ("constructor", "__proto__"):
        assert f'data-job="{job}"' in dom, dom[-3000:]
        assert re.search(rf"job {job}: 4 node\(s\) [^<]*, \d+ period\(s\) shown", dom), dom[-3000:]
    assert dom.count('<tr data-job="') == len(JOBS)  # the escaped one is a row like the others
    assert dom.count("<canvas") >= 3


def test_bad_token_files_are_refused_in_one_line(hostile: str, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.write_text("a-token-long-enough-0123456789\n")
    loose.chmod(0o644)
    short = tmp_path / "short"
    short.write_text("abc\n")
    short.chmod(0o600)
    for path, why in (
        (loose, "is readable by others (mode 0644): chmod 600"),
        (short, "must be at least 16 letters, digits or -._~+/="),
        (tmp_path / "none", "No such file or directory"),
    ):
        r = hushmon("serve", "--url", hostile, "--port", "0", "--token-file", str(path))
        assert r.returncode != 0 and why in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
