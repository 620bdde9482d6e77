"""hushmon top and hushmon serve on live summaries: a real nats-server,
agent-like batches each second and the real reducers (livetraffic.py).
top: one frame with --once, and the live view under tmux redrawn with a
newer period; serve: the page in headless Chromium renders and takes
events (the plots hold several periods), /state, and errors in one line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livetraffic import JOB, LiveTraffic
from waiting import wait_until

from hushmon.report.screenshot import _FLAGS, chromium_path
from hushmon.transport.natsserver import LocalNatsServer, free_port

pytest.importorskip("nats")

HUSHMON = [sys.executable, "-m", "hushmon.cli"]
TOKEN = "live-views-test-token-0123456789"


def hushmon(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HUSHMON, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def traffic(nats_server: LocalNatsServer, bin_dir: Path, tmp_path: Path) -> Iterator[str]:
    """The server's URL once job 42's first job-wide summary is in HM_SUM."""
    live = LiveTraffic(nats_server.url, bin_dir, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = hushmon("top", "--url", nats_server.url, "--once")
            if r.returncode == 0 and re.search(rf"^{JOB} +4 ", r.stdout, re.M):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no summary of job {JOB} within 30 s:\n{r.stdout}{r.stderr}")
        yield nats_server.url
    finally:
        live.stop()


def periods(frame: str) -> list[str]:
    return re.findall(rf"^{JOB} +4 +(\d\d:\d\d:\d\d) ", frame, re.M)


def whole_frame(*args: str) -> subprocess.CompletedProcess[str]:
    """`hushmon top --once ARGS` until its frame holds the whole period: a
    period the reducers closed while a node's batch was late on a loaded
    machine shows fewer nodes, and the next one all four again."""
    last: list[subprocess.CompletedProcess[str]] = []

    def frame() -> subprocess.CompletedProcess[str] | None:
        r = hushmon("top", "--once", *args)
        last[:] = [r]
        whole = re.search(r"^  iter_s +4 ", r.stdout, re.M) or "--job" in args
        if r.returncode == 0 and f"job {JOB}: 4 node(s) n1 n2 n3 n4" in r.stdout and whole:
            return r
        return None

    try:
        return wait_until(frame, "a top frame with job 42's 4 nodes", timeout_s=60, step_s=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last frame:\n{last[0].stdout}{last[0].stderr}") from None


def test_top_once_shows_the_job_racks_and_app_metric(traffic: str) -> None:
    r = whole_frame("--url", traffic)
    assert len(periods(r.stdout)) == 1
    assert re.search(r"^  r1 +n1,n2 ", r.stdout, re.M) and re.search(
        r"^  r2 +n3,n4 ", r.stdout, re.M
    )
    app = re.search(r"^  iter_s +4 +[0-9.]+ +[0-9.]+ +[0-9.]+$", r.stdout, re.M)
    assert app, r.stdout
    # a cluster's servers as a list (the test bed's hub is three), the first one down
    servers = f"nats://127.0.0.1:{free_port()},{traffic}"
    whole_frame("--url", servers, "--job", JOB)
    r = hushmon("top", "--url", traffic, "--once", "--job", "999")
    assert r.returncode == 0 and "no summaries yet for job 999" in r.stdout
    assert "iter_s" not in r.stdout


def test_top_under_tmux_redraws_with_newer_periods(traffic: str, tmp_path: Path) -> None:
    assert shutil.which("tmux"), "tmux missing: run scripts/install-deps.sh"
    session = f"hm-top-{os.getpid()}"
    cmd = " ".join([*HUSHMON, "top", "--url", traffic])
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", cmd], check=True
    )
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(set(seen)) < 3:
            time.sleep(1.0)
            pane = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            seen += periods(pane)
        (tmp_path / "pane.txt").write_text(pane)
        assert len(set(seen)) >= 3, f"the view did not move on; last pane:\n{pane}"
        assert "iter_s" in pane and "hushmon top" in pane and "Traceback" not in pane
        assert "disk busy %" in pane  # the last column: the whole width is used
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)


def run_chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    browser = chromium_path()
    assert browser, "chromium missing: scripts/install-deps.sh"
    proc = subprocess.Popen(
        [browser, *_FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


@contextlib.contextmanager
def serving(url: str, log: Path, *args: str) -> Iterator[str]:
    """``hushmon serve`` on a free port, with :data:`TOKEN`: its base URL while it runs."""
    token_file = log.with_suffix(".token")
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    with log.open("w") as f:
        proc = subprocess.Popen([*HUSHMON, "serve", "--url", url, "--port", "0",
                                 "--token-file", str(token_file), *args], stderr=f)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (m := re.search(r"(http://\S+/)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield m.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) == 0
        assert "Traceback" not in log.read_text()


@pytest.fixture
def served(traffic: str, tmp_path: Path) -> Iterator[str]:
    with serving(traffic, tmp_path / "serve.err") as base:
        yield base


def open_url(url: str) -> Any:
    """GET with the token, as a script or a reverse proxy sends it."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    return urllib.request.urlopen(request, timeout=10)


def get_json(url: str) -> Any:
    return json.loads(open_url(url).read())


def job_summaries_stored(url: str) -> int:
    """How many of job 42's job-wide summaries HM_SUM holds."""

    async def count() -> int:
        import nats

        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().stream_info("HM_SUM", subjects_filter=f"hm.sum.job.{JOB}")
            return sum((info.state.subjects or {}).values())
        finally:
            await nc.close()

    return asyncio.run(count())


def test_serve_starts_with_the_periods_before_it(traffic: str, tmp_path: Path) -> None:
    # a few more job summaries in HM_SUM (4 s alone, a loaded machine's
    # publisher and reducers may take longer)
    wait_until(lambda: job_summaries_stored(traffic) >= 5, "5 summaries of the job in HM_SUM")
    with serving(traffic, tmp_path / "a.err") as base:
        entries = get_json(base + "history")[JOB]
    times = [e["time_ns"] for e in entries]
    assert len(times) >= 4 and times == sorted(set(times)), times
    assert all(e["series"]["cpu usr"][1] is not None for e in entries)
    with serving(traffic, tmp_path / "b.err", "--history-s", "0") as base:
        assert len(get_json(base + "history").get(JOB, [])) <= 2  # the newest, maybe one more


def test_serve_page_renders_and_updates_in_headless_chromium(served: str, tmp_path: Path) -> None:
    page = open_url(served).read().decode()
    # offline: nothing fetched from elsewhere (a link to this server's own
    # job history, href="/jobs", fetches nothing)
    elsewhere = r"""src=|href="(?!/jobs")|https?://(?!127)"""
    assert not re.search(elsewhere, page.replace(served, "")), page
    state = json.loads(open_url(served + "state").read())
    assert [j["job"] for j in state["jobs"]] == [JOB]
    with pytest.raises(urllib.error.HTTPError, match="404"):
        open_url(served + "nothing")
    with pytest.raises(urllib.error.HTTPError, match="400"):
        open_url(served + "events?max=0")

    dom = run_chromium(["--virtual-time-budget=30000", "--dump-dom",
                        f"{served}?token={TOKEN}&max=5"], tmp_path / "p1").stdout  # fmt: skip
    assert re.search(r'id="updates">5<', dom), dom[-3000:]
    before = re.search(r'id="history">(\d+)<', dom)
    shown = re.search(rf"job {JOB}: 4 node\(s\) n1 n2 n3 n4, (\d+) period\(s\) shown", dom)
    assert before and shown, dom[-3000:]
    # one event a second over 4 s, a period a second: the events added periods
    assert int(shown.group(1)) >= int(before.group(1)) + 3, dom[-3000:]
    assert re.search(r'data-sensor="cpu usr">[0-9.]+ \([0-9.]+-[0-9.]+\)<', dom)
    assert dom.count("<canvas") >= 7 and 'data-rack="r2"' in dom and "iter_s" in dom

    png = tmp_path / "live.png"
    shot = run_chromium(["--window-size=1400,1000", "--virtual-time-budget=30000",
                         f"--screenshot={png}", f"{served}?token={TOKEN}&max=3"],
                        tmp_path / "p2")  # fmt: skip
    assert shot.returncode == 0 and png.stat().st_size > 20_000, shot.stderr[-2000:]


def test_unreachable_server_and_bad_flags_are_one_line(nats_server: LocalNatsServer) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    busy_port = busy.getsockname()[1]
    for args in (["top", "--url", url, "--once"], ["top", "--url", url],
                 ["serve", "--url", url, "--port", "0"]):  # fmt: skip
        r = hushmon(*args, timeout=30)
        assert r.returncode == 1, r
        line = r.stderr.strip()
        assert line.startswith(f"hushmon: cannot reach the NATS server at {url}: "), line
        assert len(line.splitlines()) == 1, r.stderr
        assert "Connection refused" in r.stderr and r.stdout == ""
    for args, why in (
        (["serve", "--url", url, "--port", "70000"], "--port 70000 is not a TCP port"),
        (
            ["serve", "--url", nats_server.url, "--host", "127.0.0.1", "--port", str(busy_port)],
            f"cannot listen on 127.0.0.1:{busy_port}: Address already in use",
        ),
        (["top", "--url", url, "--stale-s", "-1"], "--stale-s must be 0 or positive"),
    ):
        r = hushmon(*args)
        assert (r.returncode, r.stderr.strip()) == (2, f"hushmon: {why}")


def test_serve_follows_a_server_killed_and_restarted(
    nats_server: LocalNatsServer, served: str
) -> None:
    def newest() -> int:
        state = json.loads(open_url(served + "state").read())
        return max((j["time_ns"] for j in state["jobs"]), default=0)

    before = newest()
    nats_server.stop(kill=True)
    time.sleep(2.0)
    assert newest() >= before  # the page's server still answers with what it had
    nats_server.start()
    deadline = time.monotonic() + 30
    while newest() <= before + 2_000_000_000:
        assert time.monotonic() < deadline, "no newer period within 30 s of the restart"
        time.sleep(0.5)
