"""The Slurm prolog and epilog (c/agent/slurm/): against a real agent they
announce the job (status shows it) and end it; whatever goes wrong -- no
agent, no binary, no job id, an agent that refuses -- they exit 0, since a
failing prolog drains the node, and log why to syslog (a stand-in `logger`
records it here) and stderr."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentproc import RunningAgent, running_agent
from hushmon.paths import REPO_ROOT

SLURM_DIR = REPO_ROOT / "c" / "agent" / "slurm"


@pytest.fixture
def agent(bin_dir: Path, tmp_path: Path) -> Iterator[RunningAgent]:
    with running_agent(bin_dir, tmp_path) as a:
        yield a


@pytest.fixture
def fake_logger(tmp_path: Path) -> Path:
    """A `logger` first on PATH that appends its arguments to a file."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    record = tmp_path / "syslog.txt"
    logger = bindir / "logger"
    logger.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{record}"\n')
    logger.chmod(0o755)
    return record


def run_script(
    name: str, env: dict[str, str], fake_logger: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in env.items()}
    if fake_logger is not None:
        full["PATH"] = f"{fake_logger.parent / 'fakebin'}:/usr/bin:/bin"
    return subprocess.run(
        [str(SLURM_DIR / name)], env=full, capture_output=True, text=True, timeout=30, check=False
    )


def slurm_env(bin_dir: Path, sock: Path, job: str = "4242") -> dict[str, str]:
    return {
        "SLURM_JOB_ID": job,
        "SLURMD_NODENAME": "n1",
        "HUSHMON_AGENT": str(bin_dir / "hushmon-agent"),
        "HUSHMON_AGENT_SOCKET": str(sock),
    }


def test_prolog_and_epilog_with_an_agent(
    bin_dir: Path, agent: RunningAgent, fake_logger: Path
) -> None:
    env = slurm_env(bin_dir, agent.sock)
    proc = run_script("prolog.sh", env, fake_logger)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " jobs=4242 " in agent.status()
    proc = run_script("epilog.sh", env, fake_logger)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " jobs=- " in agent.status()
    assert not fake_logger.exists(), "nothing to log when all went well"


def test_socket_from_the_agent_config(bin_dir: Path, agent: RunningAgent, tmp_path: Path) -> None:
    """No HUSHMON_AGENT_SOCKET, no PATH (as slurmd runs prologs): the socket
    comes from control.socket in the agent's config file."""
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'period_ms = 1000\n[control]\nsocket = "{agent.sock}"\n')
    env = {
        "SLURM_JOB_ID": "77",
        "HUSHMON_AGENT": str(bin_dir / "hushmon-agent"),
        "HUSHMON_AGENT_CONFIG": str(cfg),
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", f'unset PATH; exec "{SLURM_DIR}/prolog.sh"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert agent.answers()
    assert " jobs=77 " in agent.status()


@pytest.mark.parametrize("script", ["prolog.sh", "epilog.sh"])
def test_no_agent_exit_0_and_logged(
    bin_dir: Path, tmp_path: Path, fake_logger: Path, script: str
) -> None:
    sock = tmp_path / "nobody.sock"
    proc = run_script(script, slurm_env(bin_dir, sock), fake_logger)
    assert proc.returncode == 0
    event = "begin" if script == "prolog.sh" else "end"
    line = proc.stderr.strip()
    assert line.startswith(f"hushmon: job 4242 {event} on n1: hushmon-agent: no agent answered")
    assert str(sock) in line and line.endswith("the job runs unmonitored")
    logged = fake_logger.read_text().splitlines()
    assert logged == [f"-t hushmon-slurm -p daemon.warning -- {line}"]


def test_agent_refusal_exit_0_and_logged(
    bin_dir: Path, agent: RunningAgent, fake_logger: Path
) -> None:
    """An epilog for a job the agent does not know (it restarted meanwhile)."""
    proc = run_script("epilog.sh", slurm_env(bin_dir, agent.sock, job="31337"), fake_logger)
    assert proc.returncode == 0
    assert "job 31337 is not running on this node" in proc.stderr
    assert "job 31337 is not running on this node" in fake_logger.read_text()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"HUSHMON_AGENT": "/nonexistent/hushmon-agent"}, "hushmon-agent not found"),
        ({"SLURM_JOB_ID": ""}, "SLURM_JOB_ID is not set; nothing sent"),
    ],
)
def test_misconfigured_node_exit_0_and_logged(
    bin_dir: Path, tmp_path: Path, fake_logger: Path, change: dict[str, str], message: str
) -> None:
    env = slurm_env(bin_dir, tmp_path / "agent.sock") | change
    proc = run_script("prolog.sh", env, fake_logger)
    assert proc.returncode == 0
    assert message in proc.stderr
    assert message in fake_logger.read_text()


def test_helper_missing_exit_0(tmp_path: Path, fake_logger: Path) -> None:
    """prolog.sh installed without hushmon-job.sh beside it."""
    lonely = tmp_path / "prolog.sh"
    lonely.write_bytes((SLURM_DIR / "prolog.sh").read_bytes())
    lonely.chmod(0o755)
    env = {"SLURM_JOB_ID": "5", "PATH": f"{tmp_path / 'fakebin'}:/usr/bin:/bin"}
    proc = subprocess.run(
        [str(lonely)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == 0
    assert "hushmon-job.sh missing; job 5 runs unmonitored" in proc.stderr
    assert "hushmon-job.sh missing" in fake_logger.read_text()


def test_scripts_are_executable() -> None:
    for name in ("prolog.sh", "epilog.sh", "hushmon-job.sh"):
        assert os.access(SLURM_DIR / name, os.X_OK), name
