"""Control messages to applications end to end: a real agent (with its
NATS sink on a real nats-server), two real programs registered through the
Python binding of libhushmon (hm_on_control, hm_poll in their loop), and
`hushmon ctl app` as a user runs it, over the local socket and over NATS.
Every process of the job takes the message once and the command says how
many acknowledged; a wrong name, a job not on the node, a callback that
fails and another uid are reported, with exit status 1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from as_other_uid import hushmon_as

from agentproc import RunningAgent, running_agent
from hushmon.paths import REPO_ROOT
from hushmon.transport.natsserver import LocalNatsServer

PROGRAM = """\
import pathlib, sys, time
from hushmon.app import Hushmon
out = pathlib.Path(sys.argv[1])
hm = Hushmon()
def on_control(command, args):
    with out.open("a") as f:
        f.write(f"{command}|{args}\\n")
    return 2 if command == "fail" else 0
assert hm.on_control(on_control), "no agent"
comm = pathlib.Path("/proc/self/comm").read_text().strip()
pathlib.Path(f"{out}.ready").write_text(comm)
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not (out.parent / "stop").exists():
    hm.metric("iter_s", 0.01)
    hm.poll()
    time.sleep(0.01)
"""


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder another uid can enter (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="hm_ctlapp_"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def hushmon_ctl(*args: str, uid: int | None = None) -> subprocess.CompletedProcess[str]:
    if uid is not None:  # another user, from a checkout it may not read
        return hushmon_as(uid, ["ctl", *args])
    cmd = [sys.executable, "-m", "hushmon.cli", "ctl", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "python")}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False, env=env)


def start_programs(
    agent: RunningAgent, work: Path, job: str, n: int
) -> list[subprocess.Popen[bytes]]:
    script = work / "program.py"
    script.write_text(PROGRAM)
    procs = []
    for rank in range(n):
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT / "python"),
            "HUSHMON_APP_SOCKET": str(agent.sock.parent / "app.sock"),
            "HUSHMON_JOB": job,
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_SIZE": str(n),
        }
        procs.append(
            subprocess.Popen([sys.executable, str(script), str(work / f"rank{rank}.txt")], env=env)
        )
    deadline = time.monotonic() + 30
    while not all((work / f"rank{r}.txt.ready").exists() for r in range(n)):
        assert all(p.poll() is None for p in procs), "a program ended before registering"
        assert time.monotonic() < deadline, "the programs did not register"
        time.sleep(0.05)
    return procs


def received(work: Path, n: int) -> list[list[str]]:
    return [
        (work / f"rank{r}.txt").read_text().splitlines() if (work / f"rank{r}.txt").exists() else []
        for r in range(n)
    ]


def test_every_process_of_the_job_takes_it_once_over_the_socket_and_nats(
    bin_dir: Path, work: Path, nats_server: LocalNatsServer
) -> None:
    url = nats_server.url
    with running_agent(
        bin_dir, work, "--period-ms", "500", "--sink", "nats", "--nats-url", url
    ) as agent:
        assert agent_send(agent, "job begin j1") == "ok job j1 begins"
        procs = start_programs(agent, work, "j1", 2)
        try:
            comm = (work / "rank0.txt.ready").read_text()
            sock = ["--socket", str(agent.sock)]
            t0 = time.monotonic()
            r = hushmon_ctl("app", comm, "dump-profile", "now", "--job", "j1", *sock, "--json", "-")
            took = time.monotonic() - t0
            assert r.returncode == 0, r.stdout + r.stderr
            doc = json.loads(r.stdout)
            assert (doc["processes"], doc["acknowledged"]) == (2, 2)
            assert "delivered to 2 of 2 processes" in r.stderr
            assert received(work, 2) == [["dump-profile|now"]] * 2
            # no hang: the command's own Python start alone can take ~10 s
            # on a loaded machine
            assert took < 30

            # over NATS, to every agent (hm.ctl.all): the one running j1 answers
            r = hushmon_ctl("app", "*", "set", "level=3", "--job", "j1", "--url", url)
            assert r.returncode == 0, r.stdout + r.stderr
            assert "2 of 2 processes on 1 agents acknowledged" in r.stdout
            assert received(work, 2) == [["dump-profile|now", "set|level=3"]] * 2

            r = hushmon_ctl("app", "nosuch", "x", "--job", "j1", *sock)
            assert r.returncode == 1 and "no process of the job by that name" in r.stdout
            r = hushmon_ctl("app", "*", "x", "--job", "j9", *sock)
            assert r.returncode == 1 and "job j9 does not run on n1" in r.stdout, r.stdout
            r = hushmon_ctl("app", "*", "fail", "--job", "j1", *sock)
            assert r.returncode == 1 and "(2 callbacks returned an error)" in r.stdout, r.stdout
            r = hushmon_ctl("app", "*", "x", "--job", "j1", "--nodes", "n1", *sock)
            assert r.returncode == 2 and "--nodes needs --url" in r.stderr
            r = hushmon_ctl("app", "*", "dump", "--job", "j1", *sock, "--nodes", "n1", "--url", url)
            assert r.returncode == 0 and "n1\tok\tdelivered to 2 of 2" in r.stdout, r.stdout
            r = hushmon_ctl("app", "*", "a", "b", "c", "d", "e", "f", "--job", "j1", *sock)
            assert r.returncode == 2 and "at most 4 arguments" in r.stderr
            assert "Traceback" not in r.stderr
        finally:
            (work / "stop").write_text("")
            for p in procs:
                p.wait(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="two uids need root (setpriv)")
def test_only_the_jobs_owner_may_send_to_its_programs(bin_dir: Path, work: Path) -> None:
    with running_agent(bin_dir, work, "--period-ms", "500") as agent:
        agent.sock.chmod(0o666)  # both users reach the socket; the agent tells them apart
        assert agent_send(agent, "job begin j1 uid=61021") == "ok job j1 begins"
        procs = start_programs(agent, work, "j1", 1)
        try:
            sock = ["--socket", str(agent.sock)]
            r = hushmon_ctl("app", "*", "dump", "--job", "j1", *sock, uid=61022)
            assert r.returncode == 1
            assert "not authorized: uid 61022 is not the owner of job j1 (owner 61021)" in r.stdout
            assert received(work, 1) == [[]]
            r = hushmon_ctl("app", "*", "dump", "--job", "j1", *sock, uid=61021)
            assert r.returncode == 0, r.stdout + r.stderr
            assert received(work, 1) == [["dump|"]]
        finally:
            (work / "stop").write_text("")
            for p in procs:
                p.wait(timeout=30)


def agent_send(agent: RunningAgent, request: str) -> str:
    proc = subprocess.run(
        [str(agent.bin), "--socket", str(agent.sock), "--send", request],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()
