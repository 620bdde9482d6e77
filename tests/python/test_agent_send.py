"""hushmon-agent --send: the control client that job prologs and epilogs use.
Exit 0 on an "ok" answer (printed), 1 on "error ..." (reason on stderr),
2 when no agent answers (one line naming the socket), and never longer than
its timeout."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentproc import RunningAgent, run_agent, running_agent


@pytest.fixture
def agent(bin_dir: Path, tmp_path: Path) -> Iterator[RunningAgent]:
    with running_agent(bin_dir, tmp_path) as a:
        yield a


def send(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_agent(bin_dir, *args, timeout=20)


def test_ok_answer_is_printed_exit_0(bin_dir: Path, agent: RunningAgent) -> None:
    proc = send(bin_dir, "--socket", str(agent.sock), "--send", "job begin 42")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "ok job 42 begins\n", "")
    status = send(bin_dir, "--socket", str(agent.sock), "--send", "status")
    assert status.returncode == 0 and " jobs=42 " in status.stdout
    proc = send(bin_dir, "--socket", str(agent.sock), "--send", "job end 42")
    assert (proc.returncode, proc.stdout) == (0, "ok job 42 ends\n")
    assert " jobs=- " in send(bin_dir, "--socket", str(agent.sock), "--send", "status").stdout


def test_error_answer_exit_1_reason_on_stderr(bin_dir: Path, agent: RunningAgent) -> None:
    proc = send(bin_dir, "--socket", str(agent.sock), "--send", "job end 999")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"hushmon-agent: agent on {agent.sock}: job 999 is not running on this node"
    ]


def test_socket_from_config_file(bin_dir: Path, agent: RunningAgent, tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'[control]\nsocket = "{agent.sock}"\n')
    proc = send(bin_dir, "--config", str(cfg), "--send", "status")
    assert proc.returncode == 0 and proc.stdout.startswith("ok period_ms=")


def test_no_agent_exit_2_one_line_naming_the_socket(bin_dir: Path, tmp_path: Path) -> None:
    sock = tmp_path / "nobody.sock"
    proc = send(bin_dir, "--socket", str(sock), "--send", "job begin 1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(sock) in lines[0] and "no agent answered" in lines[0]
    # a socket file nobody listens on (an agent that died)
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(dead))
    s.close()
    proc = send(bin_dir, "--socket", str(dead), "--send", "status")
    assert proc.returncode == 2 and "Connection refused" in proc.stderr and str(dead) in proc.stderr


def test_silent_agent_times_out(bin_dir: Path, tmp_path: Path) -> None:
    """A listener that never answers (a hung agent) costs the timeout, no more."""
    sock = tmp_path / "silent.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock))
        s.listen(1)
        t0 = time.monotonic()
        proc = send(bin_dir, "--socket", str(sock), "--send-timeout-ms", "300", "--send", "status")
        took = time.monotonic() - t0
    assert proc.returncode == 2
    assert f"no answer from {sock} within 300 ms" in proc.stderr
    assert 0.3 <= took < 3.0
    # the default is 3 s: a prolog is never held longer than that
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(tmp_path / "silent2.sock"))
        s.listen(1)
        t0 = time.monotonic()
        proc = send(bin_dir, "--socket", str(tmp_path / "silent2.sock"), "--send", "status")
        took = time.monotonic() - t0
    assert proc.returncode == 2 and "within 3000 ms" in proc.stderr
    assert 3.0 <= took < 10.0  # the default, and no hang (a loaded machine adds its start)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--socket", "", "--send", "status"], "no control socket configured"),
        (["--send", "status", "--once"], "--send talks to a running agent"),
        (["--send-timeout-ms", "0", "--send", "status"], "--send-timeout-ms"),
        (["--send", "status\nflush"], "one non-empty line"),
    ],
)
def test_bad_send_arguments(bin_dir: Path, args: list[str], message: str) -> None:
    proc = send(bin_dir, *args)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
