"""libhushmon with a real agent: a C program and Python report through the
application channel, their per-period aggregates reach the spool tagged
with their job; another uid cannot write into a job it does not own; no
agent = no-op; a stopped agent makes the library drop and count, never
wait."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from agentproc import RunningAgent, running_agent
from hushmon.paths import REPO_ROOT

PERIOD_MS = 200


@pytest.fixture
def work() -> Iterator[Path]:
    """A folder another uid can enter (pytest's tmp_path is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="hm_app_"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def agent(bin_dir: Path, work: Path) -> Iterator[RunningAgent]:
    with running_agent(bin_dir, work, "--period-ms", str(PERIOD_MS)) as a:
        yield a


def request(agent: RunningAgent, line: str) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(agent.sock))
        s.sendall(line.encode() + b"\n")
        return s.makefile().readline().strip()


def sender(bin_dir: Path) -> Path:
    path = bin_dir.parent / "tests" / "app_sender"
    if not path.is_file():
        pytest.fail(f"{path} missing: run 'make' before the tests")
    return path


def run_sender(
    exe: Path, env: dict[str, str], *args: str, user: int | None = None, timeout: float = 60
) -> dict[str, float]:
    proc = subprocess.run(
        [str(exe), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
        check=False,
        user=user,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def app_lines(agent: RunningAgent, work: Path) -> list[str]:
    assert request(agent, "flush").startswith("ok")
    lines = []
    for f in sorted((work / "spool").glob("*.lp*")):
        lines += [ln for ln in f.read_text().splitlines() if ln.startswith("app")]
    return lines


def app_lines_when(
    agent: RunningAgent, work: Path, enough: Callable[[list[str]], bool], what: str
) -> list[str]:
    """The app lines once enough(lines): the agent reads a bounded number of
    messages per client and period, so a loaded machine takes more periods
    to bring them all. The caller's exact checks then catch too many."""

    def read() -> list[str]:
        time.sleep(PERIOD_MS / 1000)
        lines = app_lines(agent, work)
        return lines if enough(lines) else []

    return wait_until(read, what)


def fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split(" ")[1].split(","))


def counts(lines: list[str], key: str) -> int:
    return sum(int(fields(ln)["count"].rstrip("i")) for ln in lines if key in ln.split(" ")[0])


def app_env(agent: RunningAgent, job: str) -> dict[str, str]:
    return {
        "HUSHMON_APP_SOCKET": str(agent.sock.parent / "app.sock"),
        "HUSHMON_JOB": job,
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_SIZE": "2",
    }


def test_c_and_python_reach_the_spool_with_their_job(
    bin_dir: Path, agent: RunningAgent, work: Path
) -> None:
    assert request(agent, "job begin j1") == "ok job j1 begins"
    env = app_env(agent, "j1")
    out = run_sender(sender(bin_dir), env, "--count", "1000", "--threads", "2", "--phases")
    assert out["opened"] == 0 and out["dropped_records"] == 0 and out["rank"] == 1
    code = (
        "from hushmon.app import Hushmon\n"
        "hm = Hushmon()\n"
        "assert hm.connected and hm.rank == 1 and hm.size == 2\n"
        "for i in range(10): hm.metric('py_iter_s', 0.5)\n"
        "with hm.phase('py_phase'): pass\n"
        "hm.profile_dump('region_s', [1.0, 3.0], ['a', 'b'])\n"
        "hm.event('done', 'ok')\n"
        "hm.close()\n"
    )
    py = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env, "PYTHONPATH": str(REPO_ROOT / "python")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert py.returncode == 0, py.stderr
    lines = app_lines_when(
        agent,
        work,
        lambda ls: (
            counts(ls, "metric=iter_time_s") >= 2000
            and counts(ls, "metric=py_iter_s") >= 10
            and any(ln.startswith("app_event,") for ln in ls)
        ),
        "the C and Python senders' records",
    )
    c_lines = [ln for ln in lines if "metric=iter_time_s" in ln]
    assert c_lines and all(",job=j1,rank=1," in ln for ln in c_lines)
    assert counts(lines, "metric=iter_time_s") == 2000
    assert counts(lines, "phase=solve") == 2 and counts(lines, "phase=halo") == 2
    assert counts(lines, "metric=py_iter_s") == 10
    assert counts(lines, "phase=py_phase") == 1
    assert any("metric=region_s.b " in ln and "mean=3" in ln for ln in lines)
    assert any(ln.startswith("app_event,") and 'text="ok"' in ln for ln in lines)
    chan = [fields(ln) for ln in lines if ln.startswith("app_channel,")]
    assert chan[-1]["unattributed"] == "0i" and chan[-1]["rejected_claims"] == "0i"


def test_another_uid_cannot_write_into_the_job(
    bin_dir: Path, agent: RunningAgent, work: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run a second uid")
    assert request(agent, "job begin j1") == "ok job j1 begins"  # owned by us (root)
    exe = work / "app_sender"
    shutil.copy(sender(bin_dir), exe)
    exe.chmod(0o755)
    env = app_env(agent, "j1")
    out = run_sender(exe, env, "--count", "100", user=65534)
    assert out["opened"] == 0  # it may connect: the agent decides what it is worth
    run_sender(sender(bin_dir), env, "--count", "7")  # the owner's own program

    def both_seen(ls: list[str]) -> bool:
        chan = [fields(ln) for ln in ls if ln.startswith("app_channel,")]
        return (
            counts(ls, "metric=iter_time_s") >= 7
            and bool(chan)
            and (int(chan[-1]["unattributed"].rstrip("i")) >= 100)
        )

    lines = app_lines_when(agent, work, both_seen, "the owner's 7 records, the other's 100")
    assert counts(lines, "metric=iter_time_s") == 7
    chan = fields([ln for ln in lines if ln.startswith("app_channel,")][-1])
    assert chan["rejected_claims"] == "1i"
    assert int(chan["unattributed"].rstrip("i")) >= 100
    assert "claims job 'j1'" in agent.log.read_text()


def test_absent_agent_is_a_no_op(bin_dir: Path, work: Path) -> None:
    env = {"HUSHMON_APP_SOCKET": str(work / "none.sock")}
    out = run_sender(sender(bin_dir), env, "--count", "1000000", "--bench")
    assert out["opened"] == 1 and out["records"] == 0 and out["connected"] == 0
    assert out["ns_per_call"] < 50  # one load and a branch; generous for a loaded machine


def test_stopped_agent_drops_and_counts(bin_dir: Path, agent: RunningAgent, work: Path) -> None:
    assert request(agent, "job begin j1") == "ok job j1 begins"
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        proc = subprocess.Popen(
            [
                str(sender(bin_dir)),
                "--count",
                "3000000",
                "--names",
                "64",
                "--bench",
                "--sleep-ms",
                "3000",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **app_env(agent, "j1")},
        )
        time.sleep(1.5)  # the loop is over long before: it never waits
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    out = json.loads(stdout)
    assert out["dropped_records"] > 0
    assert out["sent_records"] + out["dropped_records"] == out["records"]
    names = ("metric=iter_time_s", "metric=warmup", "metric=final")
    # The agent reads a bounded number of messages per client and period:
    # the backlog of the stopped time takes several periods to drain.
    lines = app_lines_when(
        agent,
        work,
        lambda ls: sum(counts(ls, n) for n in names) >= out["sent_records"],
        f"the {out['sent_records']} records sent",
    )
    assert sum(counts(lines, n) for n in names) == out["sent_records"]
    assert counts(lines, "metric=final") == 1
    chan = fields([ln for ln in lines if ln.startswith("app_channel,")][-1])
    assert int(chan["lib_dropped"].rstrip("i")) == out["dropped_records"]
