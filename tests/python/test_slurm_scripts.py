"""The Slurm prolog and epilog (c/agent/slurm/), installed as a site does
(the three scripts and hushmon-job.conf in one folder): against a real
agent they announce the job (status shows it) and end it; whatever goes
wrong -- no agent, no binary, no job id, an agent that refuses -- they exit
0, since a failing prolog drains the node, and log why (stderr, and syslog
through /usr/bin/logger). They run as root, so a PATH or HUSHMON_AGENT from
the environment is never followed: a stand-in `logger` and `hushmon-agent`
first on the inherited PATH, and HUSHMON_AGENT naming another program, are
never run."""

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


def install(folder: Path, conf: str) -> Path:
    """The three scripts and ``conf`` as hushmon-job.conf in ``folder``."""
    folder.mkdir(exist_ok=True)
    for name in ("prolog.sh", "epilog.sh", "hushmon-job.sh"):
        (folder / name).write_bytes((SLURM_DIR / name).read_bytes())
        (folder / name).chmod(0o755)
    (folder / "hushmon-job.conf").write_text(conf)
    return folder


@pytest.fixture
def installed(bin_dir: Path, tmp_path: Path) -> Path:
    return install(tmp_path / "slurm", f"# the site's\nagent={bin_dir / 'hushmon-agent'}")


@pytest.fixture
def fake_logger(tmp_path: Path) -> Path:
    """A `logger` and a `hushmon-agent` first on the inherited PATH, and a
    program HUSHMON_AGENT names: each records that it ran (it must not)."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    record = tmp_path / "ran.txt"
    for name in ("logger", "hushmon-agent", "planted"):
        fake = bindir / name
        fake.write_text(f'#!/bin/sh\nprintf "{name} %s\\n" "$*" >> "{record}"\n')
        fake.chmod(0o755)
    return record


def run_script(
    folder: Path, name: str, env: dict[str, str], fake_logger: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in env.items()}
    if fake_logger is not None:
        fakebin = fake_logger.parent / "fakebin"
        full["PATH"] = f"{fakebin}:/usr/bin:/bin"
        full["HUSHMON_AGENT"] = str(fakebin / "planted")
    return subprocess.run(
        [str(folder / name)], env=full, capture_output=True, text=True, timeout=30, check=False
    )


def slurm_env(sock: Path, job: str = "4242") -> dict[str, str]:
    return {"SLURM_JOB_ID": job, "SLURMD_NODENAME": "n1", "HUSHMON_AGENT_SOCKET": str(sock)}


def test_prolog_and_epilog_with_an_agent(
    installed: Path, agent: RunningAgent, fake_logger: Path
) -> None:
    env = slurm_env(agent.sock)
    proc = run_script(installed, "prolog.sh", env, fake_logger)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " jobs=4242 " in agent.status()
    proc = run_script(installed, "epilog.sh", env, fake_logger)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert " jobs=- " in agent.status()
    assert not fake_logger.exists(), "the inherited PATH and HUSHMON_AGENT were followed"


def test_the_environment_never_names_the_agent(tmp_path: Path, fake_logger: Path) -> None:
    """No agent= in the conf and none on the fixed PATH: a hushmon-agent on
    the inherited PATH and HUSHMON_AGENT are not run; the refusal is logged
    (stderr) and the prolog exits 0."""
    bare = install(tmp_path / "bare", "")
    proc = run_script(bare, "prolog.sh", slurm_env(tmp_path / "a.sock"), fake_logger)
    assert proc.returncode == 0
    if Path("/usr/local/bin/hushmon-agent").exists() or Path("/usr/bin/hushmon-agent").exists():
        pytest.skip("a hushmon-agent is installed on this machine's fixed PATH")
    assert "hushmon-agent not found (agent= in" in proc.stderr, proc.stderr
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)" in proc.stderr
    assert not fake_logger.exists(), fake_logger.read_text()


def test_socket_from_the_agent_config(bin_dir: Path, agent: RunningAgent, tmp_path: Path) -> None:
    """No HUSHMON_AGENT_SOCKET, no PATH (as slurmd runs prologs): the socket
    comes from control.socket in the agent's config file (agent_config= in
    hushmon-job.conf)."""
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'period_ms = 1000\n[control]\nsocket = "{agent.sock}"\n')
    folder = install(tmp_path / "slurm", f"agent={bin_dir / 'hushmon-agent'}\nagent_config={cfg}")
    env = {"SLURM_JOB_ID": "77"}
    proc = subprocess.run(
        ["/bin/sh", "-c", f'unset PATH; exec "{folder}/prolog.sh"'],
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
    installed: Path, tmp_path: Path, fake_logger: Path, script: str
) -> None:
    sock = tmp_path / "nobody.sock"
    proc = run_script(installed, script, slurm_env(sock), fake_logger)
    assert proc.returncode == 0
    event = "begin" if script == "prolog.sh" else "end"
    line = proc.stderr.strip()
    assert line.startswith(f"hushmon: job 4242 {event} on n1: hushmon-agent: no agent answered")
    assert str(sock) in line and line.endswith("the job runs unmonitored")
    assert not fake_logger.exists()  # syslog through /usr/bin/logger, not the planted one


def test_agent_refusal_exit_0_and_logged(installed: Path, agent: RunningAgent) -> None:
    """An epilog for a job the agent does not know (it restarted meanwhile)."""
    proc = run_script(installed, "epilog.sh", slurm_env(agent.sock, job="31337"))
    assert proc.returncode == 0
    assert "job 31337 is not running on this node" in proc.stderr


@pytest.mark.parametrize(
    ("conf", "change", "message"),
    [
        ("agent=/nonexistent/hushmon-agent", {}, "hushmon-agent not found"),
        (None, {"SLURM_JOB_ID": ""}, "SLURM_JOB_ID is not set; nothing sent"),
    ],
)
def test_misconfigured_node_exit_0_and_logged(
    installed: Path, tmp_path: Path, conf: str | None, change: dict[str, str], message: str
) -> None:
    if conf is not None:
        (installed / "hushmon-job.conf").write_text(conf + "\n")
    env = slurm_env(tmp_path / "agent.sock") | change
    proc = run_script(installed, "prolog.sh", env)
    assert proc.returncode == 0
    assert message in proc.stderr


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
    assert not fake_logger.exists()


def test_scripts_are_executable() -> None:
    for name in ("prolog.sh", "epilog.sh", "hushmon-job.sh"):
        assert os.access(SLURM_DIR / name, os.X_OK), name
